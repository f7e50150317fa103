"""Tasks for pool workers in tests, importable by a spawned worker (``tests.executor_tasks``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def announce_and_block(folder: Path) -> None:
    """Say that this worker runs (a file named by its pid in ``folder``), then never return: the
    worker is busy for as long as a test needs, however fast or loaded the machine."""
    (folder / f"{os.getpid()}.running").touch()
    threading.Event().wait()
