"""A progress line on stderr for slow commands, shown only on a terminal.

Importers read whole columns at a time (no per-event callbacks on the hot path); they advance a
process-wide tally of source bytes read (:mod:`traceq.read_progress`) once per block or chunk, and
the pipeline and CLI set its stage.  The line, refreshed a few times a second from a background
thread, says ``importing NAME 45% (120.0 of 270.0 MB), 3 s left`` while bytes are being counted,
``importing NAME (270.0 MB) … 3.4 s`` when none are (a cache hit, or ranks read in other
processes), then ``analysing NAME … 5.1 s`` and ``rendering NAME … 6.0 s``.  Nothing is printed
for work that finishes within ``delay_s`` (1 s), when stderr is not a TTY, or under ``CI``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from traceq import read_progress


def _size_of(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.iterdir() if p.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


class ProgressLine:
    """The text of the line for ``label`` and ``total_bytes`` (the inputs' size), read from the
    tally at ``clock()`` (seconds, monotonic); the clock is read when the line is made."""

    def __init__(self, label: str, total_bytes: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total_bytes = total_bytes
        self.clock = clock
        self.started_s = clock()

    def text(self) -> str:
        now = read_progress.snapshot()
        elapsed_s = self.clock() - self.started_s
        if now.stage != read_progress.IMPORTING:
            return f"{now.stage} {self.label} … {elapsed_s:.1f} s"
        if now.bytes_read <= 0 or self.total_bytes <= 0:
            return f"importing {self.label} ({_human_bytes(self.total_bytes)}) … {elapsed_s:.1f} s"
        done = min(now.bytes_read, self.total_bytes)
        line = f"importing {self.label} {100 * done // self.total_bytes}% ({_of(done, self.total_bytes)})"
        if done < self.total_bytes and elapsed_s > 0:
            left_s = (self.total_bytes - done) * elapsed_s / done
            line += f", {left_s:.0f} s left"
        return line


def _of(done: int, total: int) -> str:
    """``120.0 of 270.0 MB``: both in the total's unit."""
    total_text = _human_bytes(total)
    unit = total_text.split()[1]
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
    done_text = f"{done}" if unit == "B" else f"{done / scale:.1f}"
    return f"{done_text} of {total_text}"


@contextmanager
def import_progress(
    paths: Sequence[Path],
    *,
    stream: TextIO | None = None,
    delay_s: float = 1.0,
    interval_s: float = 0.2,
    enabled: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Show the progress line (:class:`ProgressLine`) on ``stream`` (stderr) while the block runs
    (``enabled=False``: ``--quiet``), and clear it when the block ends.  The tally is reset on
    entry and the stage set to importing.  Under ``TERM=dumb`` the line is redrawn with a carriage
    return and spaces, never an escape sequence."""
    read_progress.reset()
    out = stream if stream is not None else sys.stderr
    if not enabled or not out.isatty() or os.environ.get("CI"):
        yield
        return
    label = paths[0].name if len(paths) == 1 else f"{len(paths)} inputs"
    line = ProgressLine(label, _size_of(paths), clock=clock)
    done = threading.Event()
    clear = "\r" + " " * 79 + "\r" if os.environ.get("TERM") == "dumb" else "\r\x1b[2K"

    def draw() -> None:
        if done.wait(delay_s):
            return
        while not done.is_set():
            out.write(f"{clear}{line.text()}")
            out.flush()
            done.wait(interval_s)
        out.write(clear)
        out.flush()

    worker = threading.Thread(target=draw, name="traceq-progress", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()
