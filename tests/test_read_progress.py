"""The tally of source bytes read: each file adds exactly its size, never more, never backwards;
the shipped Kineto and nsys samples, imported for real, advance it to their size on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceq import read_progress
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite
from traceq.read_progress import FileReading


@pytest.fixture(autouse=True)
def fresh_tally() -> None:
    read_progress.reset()


def test_a_file_adds_its_share_as_it_grows_and_exactly_its_size_when_finished() -> None:
    reading = FileReading(1000)
    reading.to_share(0.25)
    assert read_progress.snapshot().bytes_read == 250
    reading.to_share(0.1)  # a smaller share (a second parse from the start) takes nothing back
    assert read_progress.snapshot().bytes_read == 250
    reading.to_share(7.0)  # a share past the end counts the file once
    reading.finish()
    assert read_progress.snapshot().bytes_read == 1000


def test_reset_starts_a_fresh_tally_in_the_importing_stage() -> None:
    read_progress.add_bytes_read(5)
    read_progress.set_stage(read_progress.RENDERING)
    read_progress.reset()
    assert read_progress.snapshot() == read_progress.Snapshot(0, read_progress.IMPORTING)


@pytest.mark.parametrize("name", ["training_step.pt.trace.json.gz", "clean_step.pt.trace.json.gz"])
def test_importing_a_kineto_sample_advances_the_tally_to_its_size(samples: Path, name: str) -> None:
    read_kineto(samples / name)
    assert read_progress.snapshot().bytes_read == (samples / name).stat().st_size


def test_importing_a_plain_json_trace_counts_its_bytes(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 0}]}')
    read_kineto(trace)
    assert read_progress.snapshot().bytes_read == trace.stat().st_size


@pytest.mark.parametrize("name", ["training_step.nsys.sqlite", "clean_step.nsys.sqlite"])
def test_importing_an_nsys_sample_advances_the_tally_to_its_size(samples: Path, name: str) -> None:
    read_nsys_sqlite(samples / name)
    assert read_progress.snapshot().bytes_read == (samples / name).stat().st_size
