"""The import progress line: only on a terminal, only for slow imports, always cleared.

Nothing here waits a while to see what happens: the terminal says when the line was drawn, and
"slow" is a delay no test comes near.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from traceq.progress import import_progress

_WAIT_S = 120.0
"""A guard against a progress thread that never draws: far beyond any load, never a measurement."""


class FakeTty(io.StringIO):
    """A terminal that says when the progress line was first drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        written = super().write(text)
        if "importing" in text:
            self.drawn.set()
        return written


def _progress_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "traceq-progress"]


def test_nothing_is_printed_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out = io.StringIO()
    with import_progress([tmp_path], stream=out, delay_s=0.0, interval_s=0.01):
        assert _progress_threads() == []  # nothing that could print later, either
    assert out.getvalue() == ""


def test_a_slow_import_shows_name_size_and_time_then_clears_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    trace = tmp_path / "big.json"
    trace.write_bytes(b"x" * 2500)
    out = FakeTty()
    with import_progress([trace], stream=out, delay_s=0.0, interval_s=0.01):
        assert out.drawn.wait(_WAIT_S), "the progress line was never drawn"
    text = out.getvalue()
    assert "importing big.json (2.5 KB)" in text
    assert text.endswith("\r\x1b[2K")
    assert _progress_threads() == []


def test_a_fast_import_prints_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    out = FakeTty()
    with import_progress([tmp_path], stream=out, delay_s=3600.0):  # "fast": done well within the delay
        pass
    assert out.getvalue() == ""
    assert _progress_threads() == []
