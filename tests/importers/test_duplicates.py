"""Exact duplicate events (``traceq.importers.duplicates``): GPU work and API calls recorded twice.

Specification: a kernel, memcpy or memset, or an API call with a correlation id, that is equal in
every column to an earlier row is the same event recorded twice -- kept once and counted under
``exact duplicate`` in the import statistics, so that ``events == rows + skipped`` still holds and
no GPU time is counted twice; rows whose identity the table does not hold (CPU ops, instants,
API calls without a correlation id) are kept even when equal.  Both importers.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

import traceq
from traceq import schema
from traceq.importers.duplicates import SKIP_DUPLICATE, drop_exact_duplicates
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite

from .. import builders


def _kernel(ts: float, correlation: int) -> dict[str, Any]:
    args = {"device": 0, "stream": 7, "correlation": correlation}
    return {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": ts, "dur": 5, "args": args}


def _launch(ts: float, correlation: int | None) -> dict[str, Any]:
    args = {"correlation": correlation} if correlation is not None else {}
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2}
    return {**call, "args": args}


def _memory(ts: float, nbytes: int) -> dict[str, Any]:
    # Two of these differ only in args the event table does not keep.
    instant = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts}
    return {**instant, "args": {"Bytes": nbytes}}


def _stats(result: Any) -> dict[str, tuple[int, int, dict[str, int]]]:
    return {c.category: (c.events, c.rows, dict(c.skipped)) for c in result.stats.counts}


def test_kineto_kernels_and_launches_recorded_twice_are_kept_once_and_counted(tmp_path: Path) -> None:
    events = [_launch(0, 1), _kernel(10, 1), _launch(20, 2), _kernel(30, 2)]
    doubled = [*events, _kernel(10, 1), _launch(20, 2), _kernel(10, 1)]
    path = tmp_path / "doubled.json"
    path.write_text(json.dumps({"traceEvents": doubled}))
    once = tmp_path / "once.json"
    once.write_text(json.dumps({"traceEvents": events}))

    result = read_kineto(path)

    got = schema.to_polars(result.events).drop("source")
    assert got.equals(schema.to_polars(read_kineto(once).events).drop("source"))
    assert _stats(result)["kernel"] == (4, 2, {SKIP_DUPLICATE: 2})
    assert _stats(result)["cuda_runtime"] == (3, 2, {SKIP_DUPLICATE: 1})


def test_a_copy_is_not_missing_work_so_the_report_has_no_caveat_for_it(tmp_path: Path) -> None:
    # The caveats of incomplete data count rows skipped on import; a copy's event is a row.
    events = [_launch(0, 1), _kernel(10, 1), _launch(20, 2), _kernel(30, 2)]
    path = tmp_path / "doubled.json"
    path.write_text(json.dumps({"traceEvents": [*events, _kernel(10, 1)]}))
    assert traceq.report(path).caveats == ()


def test_kineto_rows_the_table_cannot_tell_apart_are_kept(tmp_path: Path) -> None:
    events = [_memory(5, 100), _memory(5, 200), _launch(0, None), _launch(0, None), _kernel(10, 1), _kernel(10, 2)]
    path = tmp_path / "alike.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = read_kineto(path)
    assert result.events.num_rows == len(events)  # kernels differ by correlation: two kernels
    assert all(SKIP_DUPLICATE not in c.skipped for c in result.stats.counts)


def test_nsys_rows_copied_in_a_table_are_kept_once_and_counted(tmp_path: Path, samples: Path) -> None:
    path = tmp_path / "copied.sqlite"
    shutil.copyfile(samples / "training_step.nsys.sqlite", path)
    db = sqlite3.connect(path)
    (kernels,) = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 10 = 0")
    (copies,) = db.execute("SELECT COUNT(*) - ? FROM CUPTI_ACTIVITY_KIND_KERNEL", (kernels,)).fetchone()
    db.commit()
    db.close()

    result = read_nsys_sqlite(path)

    original = read_nsys_sqlite(samples / "training_step.nsys.sqlite")
    got = schema.to_polars(result.events).drop("source")
    assert got.equals(schema.to_polars(original.events).drop("source"))
    assert _stats(result)["CUPTI_ACTIVITY_KIND_KERNEL"] == (kernels + copies, kernels, {SKIP_DUPLICATE: copies})


def test_only_later_copies_go_and_the_order_stays() -> None:
    cpu_op = {"kind": "cpu_op", "pid": builders.PID, "tid": builders.TID}
    table = builders.table(
        builders.kernel(0, 5, "a"),
        builders.kernel(0, 5, "b"),
        {**cpu_op, "start_ns": 0, "end_ns": 5, "name": "a"},
        builders.kernel(0, 5, "a"),
        builders.kernel(6, 9, "a"),
        {**cpu_op, "start_ns": 6, "end_ns": 9, "name": "c"},
        {**cpu_op, "start_ns": 6, "end_ns": 9, "name": "c"},
    )
    kept, dropped = drop_exact_duplicates(table)
    assert kept.select(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String)).rows() == [
        ("kernel", "a"),
        ("kernel", "b"),
        ("cpu_op", "a"),
        ("kernel", "a"),
        ("cpu_op", "c"),
        ("cpu_op", "c"),
    ]
    assert dropped["kind"].cast(pl.String).to_list() == ["kernel"]
