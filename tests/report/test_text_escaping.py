"""Trace strings reach the terminal with their control characters escaped.

Specification: NUL, BEL, CR, LF, ESC and the other C0/C1 control characters in a trace's names
(and file names) appear as escapes (``\\x07``, ``\\r``, ``\\x1b``) in the terminal summary of
``traceq report``, in ``traceq info`` and in ``traceq events``' table, never as the characters
themselves; the styles traceq adds (bold headings, coloured severities) are its own escapes and stay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
from click.testing import CliRunner

from traceq.cli import cli

HOSTILE = "gemm\x00\x07\r\n\x1b[2J\x1b]0;owned\x07\x9b"
"""NUL, BEL, a carriage return and a line feed, a clear-screen sequence, a window-title sequence, a C1 CSI."""
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters other than the line feeds between lines and a tab (traceq writes neither in a name)."""


def _hostile_trace(folder: Path) -> Path:
    launch = {"ph": "X", "cat": "cuda_runtime", "name": f"launch{HOSTILE}", "pid": 1, "tid": 1, "ts": 0, "dur": 2}
    kernel = {"ph": "X", "cat": "kernel", "name": HOSTILE, "pid": 0, "tid": "stream 7", "ts": 5, "dur": 50}
    events = [
        {**launch, "args": {"correlation": 1}},
        {**kernel, "args": {"device": 0, "stream": 7, "correlation": 1}},
        {**launch, "ts": 100, "args": {"correlation": 2}},
        {**kernel, "ts": 300, "args": {"device": 0, "stream": 7, "correlation": 2}},
    ]
    path = folder / "run\x07\r\x1b.json"  # a file name holds anything but NUL and /
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _assert_escaped(out: str) -> None:
    plain = click.unstyle(out)
    assert not CONTROL.search(plain), repr(plain)
    assert "gemm\\x00\\x07\\r\\n\\x1b[2J\\x1b]0;owned\\x07\\u009b" in plain
    assert "\r" not in out and "\x00" not in out and "\x07" not in out


def test_the_report_summary_escapes_control_characters(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--no-html", "--no-cache", str(_hostile_trace(tmp_path))])
    assert result.exit_code == 0, result.output
    _assert_escaped(result.stdout)


def test_info_escapes_control_characters(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["info", "--no-cache", str(_hostile_trace(tmp_path))])
    assert result.exit_code == 0, result.output
    assert not CONTROL.search(result.stdout), repr(result.stdout)
    assert "run\\x07\\r\\x1b.json" in result.stdout  # the file name too


def test_the_events_table_escapes_control_characters(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["events", "--no-cache", str(_hostile_trace(tmp_path)), "--kind", "kernel"])
    assert result.exit_code == 0, result.output
    assert not CONTROL.search(result.stdout), repr(result.stdout)
    assert "gemm\\x00\\x07\\r\\n" in result.stdout


def test_the_json_and_csv_formats_keep_the_names_as_they_are(tmp_path: Path) -> None:
    # Data formats are read by programs: JSON escapes the characters itself, and CSV is data.
    out = CliRunner().invoke(cli, ["events", "--no-cache", str(_hostile_trace(tmp_path)), "--format", "json"]).stdout
    assert HOSTILE in {row["name"] for row in json.loads(out)}
