"""The HTML report: one self-contained, deterministic page drawn from a :class:`Report`.

:func:`render_html` returns the page; sections, in order: findings, step breakdown per device,
idle time by cause (with the longest gaps), the timeline excerpt, top kernels, ranks side by side
with the job's clock alignment, collective skew heatmap and straggler verdict (several ranks or
devices only), MFU (when computed), import statistics, and the source files' metadata.

Python computes what the page shows (``sections_*.py``: rows, formatted numbers, labels;
``charts_*.py``: the plotly figures); the Jinja templates under ``templates/`` lay it out
(:mod:`traceq.report.html.templating` loads them).

* **Text first**: the content comes first; plotly.js (4.8 MB) rides at the end of ``<body>``,
  gzip-compressed and base64-encoded in a data block (:func:`packed_plotly`, about 1.5 MB), which
  ``page.js`` unpacks (``DecompressionStream``, in memory: no request) and runs after the first
  frame has painted.  ``cdn=True`` links the plotly CDN build instead (with its integrity hash).
  No other script, stylesheet or font is loaded.
* **Deterministic**: the same report gives the same bytes: fixed element ids, JSON with sorted
  keys, floats from ``repr``, no clock time anywhere.
* **Escaping**: every string from a trace is attacker-controlled.  The templates autoescape every
  value they print (text and attributes); inside chart labels trace strings go through
  :func:`~traceq.report.html.chart_style.plot_text` before they reach the JSON.  Exactly two
  values are marked safe (:class:`markupsafe.Markup`), both built here:

  - the plotly.js element (:func:`_plotly_element`): plotly's own bundle from the installed
    package, packed as base64 (only ``A-Z a-z 0-9 + / =``: nothing that can end the element or
    open markup), or the CDN ``<script src>`` whose URL and integrity hash are escaped here;
  - the chart JSON (:func:`script_json`), which sits in a ``<script type="application/json">``
    element: it is ASCII only (every non-ASCII character, U+2028/U+2029 included, is a ``\\u``
    escape) and ``<``, ``>`` and ``&`` are written ``\\u003c``, ``\\u003e``, ``\\u0026``, so no
    trace string in it can close the element or open markup.  HTML-escaping it instead would
    break it: a script element's text is not decoded.

  The stylesheet and the drawing script are template files of the package (``page.css``,
  ``page.js``), not values.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from importlib import metadata
from typing import Any, Final

import plotly.offline
from markupsafe import Markup

from traceq.report.html import sections_explore, sections_overview, sections_ranks, sections_sources, sections_steps
from traceq.report.html.charts_job import arrivals_figure, rank_comparison_figure, skew_heatmap_figure
from traceq.report.html.charts_steps import idle_by_cause_figure, step_breakdown_figure
from traceq.report.html.charts_timeline import timeline_figure
from traceq.report.html.templating import environment
from traceq.report.model import Report

PLOTLY_CONFIG: Final[dict[str, Any]] = {
    "displaylogo": False,
    "responsive": True,
    "typesetMath": False,
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    "toImageButtonOptions": {"format": "svg", "filename": "traceq-chart"},
}
"""plotly.js settings: no logo link, no MathJax typesetting of ``$...$`` in trace names."""


@dataclass(frozen=True)
class Section:
    """One ``<section>``: its id (the navigation's anchor), its title, and the view its fragment
    ``templates/sections/<id>.html.j2`` lays out."""

    id: str
    title: str
    view: object

    @property
    def template(self) -> str:
        return f"sections/{self.id}.html.j2"


def render_html(report: Report, *, cdn: bool = False) -> str:
    """The report as one HTML page (a ``str``; write it as UTF-8).

    plotly.js is packed (:func:`packed_plotly`, a fifth of a second of zlib, which lets the GIL go)
    on a thread of its own while this one draws the figures and sections."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceq-plotly") as pool:
        plotly_js = pool.submit(_plotly_element, cdn)
        return _page(report, plotly_js)


def _page(report: Report, plotly_js: Future[Markup]) -> str:
    figures = {
        "chart-steps": step_breakdown_figure(report),
        "chart-idle": idle_by_cause_figure(report),
        "chart-timeline": timeline_figure(report),
        "chart-ranks": rank_comparison_figure(report),
        "chart-skew": skew_heatmap_figure(report),
        "chart-arrivals": arrivals_figure(report),
    }
    drawn = {k: v for k, v in figures.items() if v is not None}
    sections = [
        Section("findings", "Findings", sections_overview.findings(report)),
        Section("breakdown", "Step breakdown", sections_steps.breakdown(report, "chart-steps" in drawn)),
        Section("idle", "Idle by cause", sections_steps.idle(report, "chart-idle" in drawn)),
        Section("timeline", "Timeline", sections_steps.timeline(report, "chart-timeline" in drawn)),
        Section("kernels", "Top kernels", sections_steps.kernels(report)),
        Section("operators", "Top operators", sections_explore.operators(report)),
        Section("phases", "Phases", sections_explore.phases(report)),
    ]
    if "chart-ranks" in drawn or report.job is not None:
        sections.append(Section("ranks", "Ranks", sections_ranks.ranks(report, set(drawn))))
    mfu = sections_steps.mfu(report)
    if mfu is not None:
        sections.append(Section("mfu", "MFU", mfu))
    sections.append(Section("import", "Import statistics", sections_sources.import_stats(report)))
    sections.append(Section("sources", "Sources", sections_sources.sources(report.source.files)))
    return (
        environment()
        .get_template("page.html.j2")
        .render(
            version=_version(),
            schema_version=report.schema_version,
            header=sections_overview.header(report),
            sections=sections,
            plotly=plotly_js.result(),
            figures=Markup(script_json({"config": PLOTLY_CONFIG, "figures": drawn})),
        )
    )


def script_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: sorted keys, ASCII only, and no ``<``,
    ``>`` or ``&`` (written as ``\\u003c``, ``\\u003e``, ``\\u0026``)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_json_default
    )
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def cdn_url() -> str:
    """Where the CDN build of the bundled plotly.js version lives."""
    return f"https://cdn.plot.ly/plotly-{plotly.offline.get_plotlyjs_version()}.min.js"


def plotly_element(cdn: bool) -> Markup:
    """The plotly.js ``<script>`` element, inlined or from the CDN (markup: see the module docstring)."""
    return _plotly_element(cdn)


@lru_cache(maxsize=2)
def _plotly_element(cdn: bool) -> Markup:
    source = plotly.offline.get_plotlyjs()
    if cdn:
        digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
        return Markup(
            f'<script src="{escape(cdn_url(), quote=True)}" integrity="sha256-{digest}" '
            'crossorigin="anonymous" charset="utf-8"></script>'
        )
    return Markup(
        f'<script type="{PACKED_TYPE}" id="traceq-plotly" data-encoding="gzip base64">{packed_plotly(source)}</script>'
    )


PACKED_TYPE: Final = "application/gzip"
"""The ``type`` of the element that holds plotly.js packed: not JavaScript, so the browser only
keeps its text (a data block); ``page.js`` unpacks and runs it after the page has painted."""


def packed_plotly(source: str) -> str:
    """plotly.js gzip-compressed (level 9, no file name, mtime 0: the same bytes every time) and
    base64-encoded: about 30% of its size, and only ``A-Z a-z 0-9 + / =``, which nothing in HTML
    reads as markup."""
    return base64.b64encode(gzip.compress(source.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def traceq_version() -> str:
    """The installed traceq's version, as the page's footer and generator tag show it."""
    return _version()


def _version() -> str:
    try:
        return metadata.version("traceq")
    except metadata.PackageNotFoundError:
        return "unknown"
