"""Fuzzing both importers with seeded mutants of the shipped samples (``mutants.py``).

Specification: every damaged trace -- bits flipped, cut short, bytes inserted or deleted, tokens
swapped for hostile ones, gzip streams broken; nsys exports with tables dropped, values of the
wrong type or not UTF-8, damaged schemas and pages, transactions left in the WAL -- gives a trace
or a :class:`~traceq.errors.TraceqError` (one line naming the file), never another exception, and
leaves its files as they were.  A crash in a compiled reader fails the run; a failure names its
seed (replay: ``kineto_mutant(seed, ...)``).

The counts are kept small for CI (about ten seconds); ``TRACEQ_FUZZ_KINETO`` and
``TRACEQ_FUZZ_NSYS`` run a larger campaign (``docs/importers.md`` gives the last one's numbers).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

import traceq
from traceq.errors import TraceqError

from ..conftest import SAMPLES
from .mutants import kineto_mutant, nsys_mutant

KINETO_MUTANTS = int(os.environ.get("TRACEQ_FUZZ_KINETO", "60"))
NSYS_MUTANTS = int(os.environ.get("TRACEQ_FUZZ_NSYS", "30"))
KINETO_SAMPLES = (SAMPLES / "training_step.pt.trace.json.gz", *sorted((SAMPLES / "ranks").glob("*.json.gz")))


@pytest.fixture(scope="module")
def kineto_texts() -> list[bytes]:
    return [gzip.decompress(path.read_bytes()) for path in KINETO_SAMPLES]


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _loads_or_refuses(path: Path) -> None:
    before = _files(path.parent)
    try:
        trace = traceq.load(path, cache=False)
    except TraceqError as exc:
        message = exc.one_line()
        assert str(path) in message and "\n" not in message, message
    else:
        assert trace.events.height == trace.import_stats.rows
    assert _files(path.parent) == before, "the input or its folder changed"


@pytest.mark.parametrize("seed", range(KINETO_MUTANTS))
def test_a_damaged_kineto_trace_gives_a_trace_or_a_traceq_error(
    seed: int, kineto_texts: list[bytes], tmp_path: Path
) -> None:
    _loads_or_refuses(kineto_mutant(seed, kineto_texts[seed % len(kineto_texts)], tmp_path))


@pytest.mark.parametrize("seed", range(NSYS_MUTANTS))
def test_a_damaged_nsys_export_gives_a_trace_or_a_traceq_error(seed: int, tmp_path: Path) -> None:
    _loads_or_refuses(nsys_mutant(seed, SAMPLES / "training_step.nsys.sqlite", tmp_path))
