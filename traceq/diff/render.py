"""The diff's output files, chosen by suffix as the report's are (:mod:`traceq.report.render`):
``.html`` the page, ``.json`` the JSON diff (``schemas/diff.schema.json``), ``.txt`` the terminal
diff without colour."""

from __future__ import annotations

import json
from pathlib import Path

import click

from traceq.diff.model import Diff
from traceq.errors import InvalidArgumentError
from traceq.report.render import SUFFIXES


def check_diff_output(path: Path) -> None:
    """Raise :class:`InvalidArgumentError` where ``path``'s suffix names no output (before any work)."""
    if path.suffix.lower() not in SUFFIXES:
        raise InvalidArgumentError(
            f"cannot tell what to write to {path.name}", hint=f"name the output with one of {', '.join(SUFFIXES)}"
        )


def render_diff(diff: Diff, path: Path, *, cdn: bool = False) -> str:
    """The whole file ``path`` gets, by its suffix."""
    check_diff_output(path)
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        from traceq.diff.html import render_diff_html

        return render_diff_html(diff, cdn=cdn)
    if suffix == ".json":
        return json_text(diff)
    from traceq.diff.text import render_diff_text

    return click.unstyle(render_diff_text(diff))


def json_text(diff: Diff) -> str:
    """The JSON diff: sorted keys, one space indent, as the JSON report."""
    return json.dumps(diff.to_dict(), indent=1, sort_keys=True) + "\n"
