"""The progress line: only on a terminal, only for slow work, always cleared; bytes read of the
total with a percentage and an ETA where they are counted, then the stages.

Nothing here waits a while to see what happens: the terminal says when the line was drawn, and
"slow" is a delay no test comes near.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from traceq import read_progress
from traceq.progress import ProgressLine, import_progress

_WAIT_S = 120.0
"""A guard against a progress thread that never draws: far beyond any load, never a measurement."""


class FakeTty(io.StringIO):
    """A terminal that says when the progress line was first drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = threading.Event()

    def isatty(self) -> bool:
        return True

    wanted = "importing"

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.wanted in text:
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


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> FakeClock:
    read_progress.reset()
    return FakeClock()


def test_bytes_read_show_as_a_percentage_of_the_total_with_the_time_left(clock: FakeClock) -> None:
    line = ProgressLine("big.json", 270_000_000, clock=clock)
    read_progress.add_bytes_read(120_000_000)
    clock.now_s += 4.0  # 120 MB in 4 s: the other 150 MB in 5 s
    assert line.text() == "importing big.json 44% (120.0 of 270.0 MB), 5 s left"


def test_with_no_bytes_counted_the_line_shows_size_and_elapsed_time(clock: FakeClock) -> None:
    line = ProgressLine("4 inputs", 2500, clock=clock)  # e.g. ranks read in other processes
    clock.now_s += 3.25
    assert line.text() == "importing 4 inputs (2.5 KB) … 3.2 s"


def test_all_bytes_read_shows_no_time_left(clock: FakeClock) -> None:
    line = ProgressLine("t.json", 800, clock=clock)
    read_progress.add_bytes_read(800)
    clock.now_s += 1.0
    assert line.text() == "importing t.json 100% (800 of 800 B)"


@pytest.mark.parametrize("stage", [read_progress.ANALYSING, read_progress.RENDERING])
def test_after_the_import_the_line_names_the_stage(clock: FakeClock, stage: str) -> None:
    line = ProgressLine("run.nsys-rep", 10**9, clock=clock)
    read_progress.add_bytes_read(10**9)
    read_progress.set_stage(stage)
    clock.now_s += 7.0
    assert line.text() == f"{stage} run.nsys-rep … 7.0 s"


def test_the_drawn_line_follows_the_stage_and_is_cleared_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    trace = tmp_path / "big.json"
    trace.write_bytes(b"x" * 2500)
    out = FakeTty()
    out.wanted = "analysing"
    with import_progress([trace], stream=out, delay_s=0.0, interval_s=0.01):
        read_progress.set_stage(read_progress.ANALYSING)
        assert out.drawn.wait(_WAIT_S), "the analysing line was never drawn"
    text = out.getvalue()
    assert "analysing big.json … " in text
    assert "\x1b" not in text  # TERM=dumb: spaces, never an escape sequence
    assert text.endswith("\r" + " " * 79 + "\r")


def test_entering_the_progress_line_starts_a_fresh_tally(tmp_path: Path) -> None:
    read_progress.add_bytes_read(99)
    read_progress.set_stage(read_progress.RENDERING)
    with import_progress([tmp_path], stream=io.StringIO()):
        assert read_progress.snapshot() == read_progress.Snapshot(0, read_progress.IMPORTING)
