"""WAL-mode exports (``traceq.importers.nsys.wal``): transactions still in the ``-wal`` file are read,
and neither the export nor its directory changes.

Specification: an export whose latest transactions are in its ``-wal`` (a copy taken while the
writer was open) imports what ``sqlite3`` reads from it -- the same rows, the same kernel time --
while the database file, the ``-wal``, their modification times and the directory's listing stay
as they were (no ``-shm`` is created); such a file is not cached (its key would not cover the
``-wal``).  An immutable read alone, what traceq did before, misses those transactions.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from traceq import schema
from traceq.cache import Cache
from traceq.importers import reads_other_files
from traceq.importers.nsys import wal
from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite
from traceq.loading import load

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
KERNEL_TIME_SQL = f'SELECT COUNT(*), SUM("end" - start) FROM {KERNELS}'


def _export_with_wal_frames(samples: Path, folder: Path, *, with_shm: bool = False) -> Path:
    """The shipped nsys sample, changed in WAL mode, as its files are while the writer is open:
    a third of the kernels deleted and half of them a microsecond longer, in frames of the -wal only."""
    writer_dir = folder / "writer"
    writer_dir.mkdir()
    writer = writer_dir / "export.sqlite"
    shutil.copyfile(samples / "training_step.nsys.sqlite", writer)
    db = sqlite3.connect(writer, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute(f'UPDATE {KERNELS} SET "end" = "end" + 1000 WHERE rowid % 2 = 0')
        db.execute(f"DELETE FROM {KERNELS} WHERE rowid % 3 = 0")
        target = folder / "step.nsys.sqlite"
        for suffix in ("", "-wal", *(("-shm",) if with_shm else ())):
            shutil.copyfile(f"{writer}{suffix}", f"{target}{suffix}")
    finally:
        db.close()
    return target


def _sqlite3_reads(export: Path, folder: Path) -> tuple[int, int]:
    """Kernel count and time as plain sqlite3 reads the export (from a copy: sqlite3 writes)."""
    copy = folder / "reference.sqlite"
    shutil.copyfile(export, copy)
    shutil.copyfile(f"{export}-wal", f"{copy}-wal")
    db = sqlite3.connect(copy)
    try:
        count, total = db.execute(KERNEL_TIME_SQL).fetchone()
    finally:
        db.close()
    return int(count), int(total)


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("with_shm", [False, True], ids=["no-shm", "stale-shm"])
def test_transactions_in_the_wal_are_read_as_sqlite3_reads_them(tmp_path: Path, samples: Path, with_shm: bool) -> None:
    export = _export_with_wal_frames(samples, tmp_path, with_shm=with_shm)
    count, total = _sqlite3_reads(export, tmp_path / "writer")
    immutable = sqlite3.connect(export.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    assert immutable.execute(KERNEL_TIME_SQL).fetchone() != (count, total)  # what an immutable read misses
    immutable.close()
    before = _state(tmp_path)

    result = read_nsys_sqlite(export)

    kernels = schema.to_polars(result.events).filter(pl.col("kind") == "kernel")
    assert (kernels.height, int((kernels["end_ns"] - kernels["start_ns"]).sum())) == (count, total)
    assert _state(tmp_path) == before  # bytes, mtimes and names: no -shm made, the -wal untouched
    assert any("WAL mode" in w for w in result.meta.warnings)


def test_a_wal_mode_export_without_frames_is_read_as_it_is(tmp_path: Path, samples: Path) -> None:
    export = tmp_path / "closed.sqlite"
    shutil.copyfile(samples / "training_step.nsys.sqlite", export)
    db = sqlite3.connect(export)
    db.execute("PRAGMA journal_mode=WAL")
    db.close()  # the last connection checkpoints and removes the -wal
    assert not wal.has_wal_frames(export)
    before = _state(tmp_path)
    result = read_nsys_sqlite(export)
    assert result.events.num_rows == read_nsys_sqlite(samples / "training_step.nsys.sqlite").events.num_rows
    assert _state(tmp_path) == before
    assert not any("WAL mode" in w for w in result.meta.warnings)


def test_an_export_with_wal_frames_is_not_cached(tmp_path: Path, samples: Path) -> None:
    export = _export_with_wal_frames(samples, tmp_path)
    assert reads_other_files(export, "nsys-sqlite")
    cache = Cache(tmp_path / "cache")
    load(export, cache=cache)
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))  # nothing stored
