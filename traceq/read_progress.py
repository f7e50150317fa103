"""How far this process has got: source bytes read so far and the stage it is in.

A process-wide, thread-safe tally that the importers advance as they parse (the Kineto fast
parser per block, the nsys importer per chunk of rows) and that :mod:`traceq.progress` reads to
draw its line.  It sits at the bottom of the layers so that importers can report without knowing
who listens; nothing here prints, and nothing slows the hot path (one locked addition per block).

Bytes are *source* bytes: a share of the file's size on disk.  A ``.json.gz`` file counts the
share of its inflated bytes parsed times its compressed size (the inflater does not say how much
of the compressed stream it has consumed, and the two shares move together closely); an nsys
export counts the share of its rows read times its size.  Work done in other processes (a job's
ranks on a process pool or Dask) is not seen here.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final

IMPORTING: Final = "importing"
ANALYSING: Final = "analysing"
RENDERING: Final = "rendering"

_lock = threading.Lock()
_bytes_read = 0
_stage = IMPORTING


@dataclass(frozen=True)
class Snapshot:
    """The tally at one moment: source bytes read by this process and its stage."""

    bytes_read: int
    stage: str


def snapshot() -> Snapshot:
    with _lock:
        return Snapshot(_bytes_read, _stage)


def add_bytes_read(n: int) -> None:
    """Count ``n`` more source bytes as read (``n`` may be 0; never negative)."""
    global _bytes_read
    if n > 0:
        with _lock:
            _bytes_read += n


def set_stage(stage: str) -> None:
    """Say what the process is doing now (:data:`IMPORTING`, :data:`ANALYSING`, :data:`RENDERING`)."""
    global _stage
    with _lock:
        _stage = stage


def reset() -> None:
    """Start a fresh tally (at the start of a command: nothing read, importing)."""
    global _bytes_read, _stage
    with _lock:
        _bytes_read, _stage = 0, IMPORTING


class FileReading:
    """One source file being read: its share parsed so far, added to the tally as it grows, so
    that the tally gains exactly the file's size once :meth:`finish` is called."""

    def __init__(self, size_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.counted_bytes = 0

    @classmethod
    def of(cls, path: Path) -> FileReading:
        try:
            return cls(os.stat(path).st_size)
        except OSError:  # the importer reports the unreadable file; progress just knows nothing
            return cls(0)

    def to_share(self, share: float) -> None:
        """The file is read up to ``share`` (0 to 1) of its size; a smaller share than before is ignored."""
        target = int(self.size_bytes * min(max(share, 0.0), 1.0))
        if target > self.counted_bytes:
            add_bytes_read(target - self.counted_bytes)
            self.counted_bytes = target

    def finish(self) -> None:
        self.to_share(1.0)


__all__ = [
    "ANALYSING",
    "IMPORTING",
    "RENDERING",
    "FileReading",
    "Snapshot",
    "add_bytes_read",
    "reset",
    "set_stage",
    "snapshot",
]
