"""The diff's output files, chosen by suffix as the report's are (:mod:`traceq.report.render`):
``.html`` the page, ``.json`` the JSON diff (``schemas/diff.schema.json``), ``.txt`` the terminal
diff without colour."""

from __future__ import annotations

from pathlib import Path

import click

from traceq.diff.model import Diff
from traceq.errors import InvalidArgumentError
from traceq.report import json_text as report_json
from traceq.report.paths import with_display_paths
from traceq.report.render import SUFFIXES


def check_diff_output(path: Path) -> None:
    """Raise :class:`InvalidArgumentError` where ``path``'s suffix names no output (before any work)."""
    if path.suffix.lower() not in SUFFIXES:
        raise InvalidArgumentError(
            f"cannot tell what to write to {path.name}", hint=f"name the output with one of {', '.join(SUFFIXES)}"
        )


def render_diff(diff: Diff, path: Path, *, cdn: bool = False, full_paths: bool = False) -> str:
    """The whole file ``path`` gets, by its suffix (HTML and text name the files by file name unless
    ``full_paths``; JSON keeps the paths as read)."""
    check_diff_output(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return json_text(diff)
    if suffix in (".html", ".htm"):
        from traceq.diff.html import render_diff_html

        return render_diff_html(shown_diff(diff, full_paths=full_paths), cdn=cdn)
    from traceq.diff.text import render_diff_text

    return click.unstyle(render_diff_text(shown_diff(diff, full_paths=full_paths)))


def shown_diff(diff: Diff, *, full_paths: bool = False) -> Diff:
    """``diff`` as a page shows it: both sides' paths cut below the folder they share unless ``full_paths``."""
    if full_paths:
        return diff
    sides = (diff.before, diff.after)
    return with_display_paths(diff, [p for side in sides for p in (side.name, *side.files)])


def json_text(diff: Diff) -> str:
    """The JSON diff: sorted keys, one space indent, as the JSON report."""
    return report_json.dumps(diff.to_dict()) + "\n"
