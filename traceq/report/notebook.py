"""A report in a Jupyter cell: the HTML page (findings, breakdown, charts) in an iframe.

:func:`notebook_frame` puts a whole page into ``<iframe srcdoc=...>``: the page's own stylesheet
and scripts (plotly, inlined as in the HTML file, so the charts draw offline) run inside the
frame and never touch the notebook.  The page is the same text :func:`render_html` writes to
``report.html``; inside the attribute it is escaped once more, whole (``&``, ``<``, ``>``, both
quotes), so nothing in it can end the attribute or the element, and the browser decodes it back
to exactly the page.  ``sandbox="allow-scripts"`` runs the charts' scripts in an opaque origin:
even a page that an escaping bug had broken could not reach the notebook, its cookies or its
kernel.  Other results with a page of their own (a diff) can show it the same way.
"""

from __future__ import annotations

from html import escape
from typing import Final

from traceq.report import display
from traceq.report.model import Report

FRAME_HEIGHT_PX: Final = 900


def notebook_frame(page: str, *, title: str, height_px: int = FRAME_HEIGHT_PX) -> str:
    """``page`` (a whole HTML document) as a sandboxed iframe for a notebook cell."""
    return (
        f'<iframe title="{escape(title, quote=True)}" sandbox="allow-scripts" '
        f'style="width: 100%; height: {int(height_px)}px; border: 0" srcdoc="{escape(page, quote=True)}"></iframe>'
    )


def report_frame(report: Report) -> str:
    """The report's HTML page (:func:`traceq.report.html.page.render_html`) in a notebook cell."""
    from traceq.report.html.page import render_html

    return notebook_frame(render_html(report), title="traceq report")


display.register(Report, report_frame)
