"""Renderers share one small Protocol and are chosen by the output's suffix.

``renderer_for(Path("r.html"))`` draws HTML, ``.json`` the JSON report, ``.txt`` (or ``.text``)
the terminal summary without colour.  Each returns the whole file as a string.  The HTML and
text renderers name the trace files by file name unless ``full_paths`` (:mod:`traceq.report.paths`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import click

from traceq.errors import InvalidArgumentError
from traceq.report import json_text
from traceq.report.model import Report
from traceq.report.paths import with_display_paths


def shown(report: Report, *, full_paths: bool = False) -> Report:
    """``report`` as a page shows it: its source paths cut to their file names unless ``full_paths``."""
    return report if full_paths else with_display_paths(report, (f.path for f in report.source.files))


class Renderer(Protocol):
    """Draws a report into the text of one output file."""

    def render(self, report: Report) -> str: ...


@dataclass(frozen=True)
class HtmlRenderer:
    """The self-contained HTML page (plotly inlined unless ``cdn``)."""

    cdn: bool = False
    full_paths: bool = False

    def render(self, report: Report) -> str:
        from traceq.report.html.page import render_html

        return render_html(shown(report, full_paths=self.full_paths), cdn=self.cdn)


@dataclass(frozen=True)
class JsonRenderer:
    """The JSON report (``schemas/report.schema.json``): sorted keys, one space indent."""

    def render(self, report: Report) -> str:
        return json_text.dumps(report.to_dict()) + "\n"


@dataclass(frozen=True)
class TextRenderer:
    """The terminal summary, plain (no ANSI colour)."""

    full_paths: bool = False

    def render(self, report: Report) -> str:
        from traceq.report.text import render_text

        return click.unstyle(render_text(shown(report, full_paths=self.full_paths)))


SUFFIXES: Final = (".html", ".htm", ".json", ".txt", ".text")


def renderer_for(path: Path, *, cdn: bool = False, full_paths: bool = False) -> Renderer:
    """The renderer for an output file, by its suffix (JSON keeps the paths as read: it is data)."""
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        return HtmlRenderer(cdn=cdn, full_paths=full_paths)
    if suffix == ".json":
        return JsonRenderer()
    if suffix in (".txt", ".text"):
        return TextRenderer(full_paths=full_paths)
    raise InvalidArgumentError(
        f"cannot tell what to write to {path.name}", hint=f"name the output with one of {', '.join(SUFFIXES)}"
    )
