"""The import progress line: only on a terminal, only for slow imports, always cleared."""

from __future__ import annotations

import io
import time
from pathlib import Path

from traceq.progress import import_progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_printed_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out = io.StringIO()
    with import_progress([tmp_path], stream=out, delay_s=0.0, interval_s=0.01):
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_a_slow_import_shows_name_size_and_time_then_clears_the_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CI", raising=False)
    trace = tmp_path / "big.json"
    trace.write_bytes(b"x" * 2500)
    out = FakeTty()
    with import_progress([trace], stream=out, delay_s=0.0, interval_s=0.01):
        time.sleep(0.05)
    text = out.getvalue()
    assert "importing big.json (2.5 KB)" in text
    assert text.endswith("\r\x1b[2K")


def test_a_fast_import_prints_nothing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CI", raising=False)
    out = FakeTty()
    with import_progress([tmp_path], stream=out, delay_s=5.0):
        pass
    assert out.getvalue() == ""
