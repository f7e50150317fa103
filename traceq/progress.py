"""A progress line on stderr for slow imports, shown only on a terminal.

Importers read whole columns at a time (no per-event callbacks on the hot path), so the line
shows what is being read, its size and the time elapsed, refreshed a few times a second from a
background thread.  Nothing is printed for imports that finish within ``delay_s`` (1 s), when
stderr is not a TTY, or under ``CI``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


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


@contextmanager
def import_progress(
    paths: Sequence[Path],
    *,
    stream: TextIO | None = None,
    delay_s: float = 1.0,
    interval_s: float = 0.2,
    enabled: bool = True,
) -> Iterator[None]:
    """Show ``importing NAME (SIZE) … 3.4 s`` on ``stream`` (stderr) while the block runs
    (``enabled=False``: ``--quiet``).  Under ``TERM=dumb`` the line is redrawn with a carriage
    return and spaces, never an escape sequence."""
    out = stream if stream is not None else sys.stderr
    if not enabled or not out.isatty() or os.environ.get("CI"):
        yield
        return
    label = paths[0].name if len(paths) == 1 else f"{len(paths)} inputs"
    size = _human_bytes(_size_of(paths))
    done = threading.Event()
    started = time.monotonic()
    clear = "\r" + " " * 79 + "\r" if os.environ.get("TERM") == "dumb" else "\r\x1b[2K"

    def draw() -> None:
        if done.wait(delay_s):
            return
        while not done.is_set():
            out.write(f"{clear}importing {label} ({size}) … {time.monotonic() - started:.1f} s")
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
