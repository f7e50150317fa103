"""Time writing the event table into SQLite: traceq's ADBC path against the sqlite-utils one it replaced.

    python bench/bench_sqlite.py                      # 1 M rows, 3 repeats; the old path on 20 k rows
    python bench/bench_sqlite.py --rows 2e6 --old-rows 0

The table is the shipped Kineto sample's 2,103 events repeated (each copy shifted past the last)
up to ``--rows``: real column mix, real name lengths.  Each cell is the median wall time of
``--repeats`` runs of :meth:`traceq.Trace.to_sqlite` into a fresh file (one transaction, indexes
on ``start_ns``, ``kind``, ``name``), and of the whole ``traceq convert -o x.db`` write
(:func:`traceq.to_sqlite`: every named table, analysis excluded: it is timed on its own).  The old
path (sqlite-utils ``insert_all``, as ``Trace.to_sqlite`` was written before issue 16) runs where
sqlite-utils is installed; it is no longer a dependency.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

import traceq
from traceq.trace import Trace

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "training_step.pt.trace.json.gz"


def replicated(rows: int) -> Trace:
    base = traceq.load(SAMPLE, cache=False)
    span = int(base.events.get_column("end_ns").max()) - int(base.events.get_column("start_ns").min()) + 1
    copies = -(-rows // base.events.height)
    shifted = [
        base.events.with_columns(pl.col("start_ns") + i * span, pl.col("end_ns") + i * span) for i in range(copies)
    ]
    return Trace(pl.concat(shifted).head(rows), base.import_stats, base.meta)


def timed(write: Callable[[Path], object], repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds (all threads) of ``write`` into a fresh file: on a shared machine
    the CPU time is what the write costs, the wall time what it took."""
    walls, cpus = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "events.db"
            start, cpu = time.perf_counter(), time.process_time()
            write(out)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def row(label: str, n: int, wall_cpu: tuple[float, float]) -> str:
    wall, cpu = wall_cpu
    return f"| {label} | {n:,} | {wall:.2f} | {n / wall:,.0f} | {cpu:.2f} | {n / cpu:,.0f} |"


def old_sqlite_utils(trace: Trace, path: Path) -> None:
    """``Trace.to_sqlite`` before issue 16: sqlite-utils, row dicts, its own chunked commits."""
    import sqlite_utils

    db = sqlite_utils.Database(path)
    events = trace.events.with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String))
    types = {pl.String(): str, pl.Int64(): int, pl.Int32(): int, pl.Boolean(): bool}
    table = db.table("events")
    table.create({name: types[dtype] for name, dtype in events.schema.items()})
    for batch in events.iter_slices(50_000):
        table.insert_all(batch.iter_rows(named=True), batch_size=50_000)
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--old-rows", type=float, default=2e4, help="rows for the old path (0: skip it)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    trace = replicated(int(args.rows))
    n = trace.events.height
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {n:,} rows\n")
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    print("| write | rows | wall s | rows/s | CPU s | rows per CPU s |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    print(row("`Trace.to_sqlite` (events, ADBC, one transaction, 3 indexes)", n, timed(trace.to_sqlite, args.repeats)))
    tables = traceq.tables(trace)
    start = time.perf_counter()
    tables.analysis  # noqa: B018 -- computed once, outside the timed write
    analysis_s = time.perf_counter() - start
    from traceq.exports.sqlite import write_tables

    print(
        row(
            "`traceq convert -o x.db` write (every named table)",
            n,
            timed(lambda p: write_tables(p, tables), args.repeats),
        )
    )
    print(f"| (its analysis, once, not in the write) | {n:,} | {analysis_s:.2f} | | | |")
    if args.old_rows:
        try:
            import sqlite_utils  # noqa: F401
        except ImportError:
            print("| sqlite-utils (before issue 16) | - | not installed | | | |")
            return
        small = Trace(trace.events.head(int(args.old_rows)), trace.import_stats, trace.meta)
        old = timed(lambda path: old_sqlite_utils(small, path), 1)
        print(row("sqlite-utils `insert_all` (before issue 16)", small.events.height, old))


if __name__ == "__main__":
    main()
