"""What the tests of the synthetic-trace generator (``tracegen``) share: presets simulated once, and
the plain ``json`` reading of a Kineto file.

The generator simulates a training job into a ground-truth timeline and writes it as an nsys
SQLite export and as Kineto JSON.  Its tests (this folder) say what that promises: the files are
deterministic, look like the real formats, hold exactly the planted events (counted with plain
``sqlite3`` and ``json``, not with traceq's importers), carry the same ns in both formats, and
each planted problem moves the ground truth the way its name says (measured by small brute-force
computations, independent of traceq's interval engine).
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl

from tracegen import Timeline, build_timeline, preset

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
GPU_KINDS = ("kernel", "memcpy", "memset")
KINETO_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_sync": "gpu_sync",
    "cuda_runtime": "cuda_api",
    "user_annotation": "range",
    "gpu_user_annotation": "range",
    "cpu_op": "cpu_op",
}


@functools.cache
def timeline(name: str) -> Timeline:
    return build_timeline(preset(name))


@functools.cache
def truth(name: str, view: str = "truth") -> pl.DataFrame:
    return timeline(name).events(view)  # type: ignore[arg-type]


def kinds(df: pl.DataFrame) -> dict[str, int]:
    return {str(k): n for k, n in df.group_by("kind").len().iter_rows() if n}


def load_kineto(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def to_ns(us: float) -> int:
    return round(us * 1000)
