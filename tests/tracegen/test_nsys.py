"""The nsys SQLite writer (``tracegen.nsys``): the tables and conventions of a real 2026.x export."""

from __future__ import annotations

import re
import sqlite3
import struct
from pathlib import Path

import pytest

from tracegen import write_nsys_per_rank
from tracegen.nsys.ddl import TABLES
from tracegen.nsys.ids import global_tid

from .planted import timeline


def real_columns(shared: Path) -> dict[str, list[str]]:
    """Column lists of the tables in real 2026.2 exports (2026.1 for tables the 2026.2 sample lacks)."""
    columns: dict[str, list[str]] = {}
    for name in ("nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite", "nsysai_mock_2026.1.1_rtx3080.sqlite"):
        path = shared / "nsys" / name
        if not path.exists():
            continue
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                columns.setdefault(table, [row[1] for row in db.execute(f"PRAGMA table_info({table})")])
    return columns


@pytest.mark.real
def test_nsys_tables_have_the_columns_of_a_real_2026_export(files: dict[str, Path], shared_traces: Path) -> None:
    real = real_columns(shared_traces)
    if not real:
        pytest.skip(f"no real 2026.x nsys export under {shared_traces / 'nsys'}")
    with sqlite3.connect(files["nsys"]) as db:
        ours = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in TABLES}
    assert {t: cols for t, cols in ours.items() if real.get(t) != cols} == {}


def test_nsys_export_follows_the_exporter_conventions(files: dict[str, Path]) -> None:
    proc = timeline("training_step").processes[0]
    with sqlite3.connect(files["nsys"]) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == list(TABLES)
        api = db.execute(
            "SELECT DISTINCT s.value, r.eventClass, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId"
        ).fetchall()
        assert {re.sub(r"_v\d+$", "", name) for name, _, _ in api} >= {"cudaLaunchKernel", "cudaStreamSynchronize"}
        assert all(re.search(r"_v\d{4,}$", name) for name, _, _ in api)
        assert {(cls, gtid) for _, cls, gtid in api} == {(0, global_tid(proc.pid, proc.tid))}
        assert global_tid(proc.pid, proc.tid) == (1 << 48) | (proc.pid << 24) | proc.tid
        steps = db.execute(
            "SELECT text, eventType, textId, domainId FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start"
        ).fetchall()
        assert steps == [(f"ProfilerStep#{n}", 59, None, 0) for n in range(2, 6)]
        # Every sync record belongs to exactly one API call of the same process, named after its syncType.
        linked = db.execute(
            "SELECT y.syncType, s.value FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = y.correlationId "
            "AND (r.globalTid >> 24) = (y.globalPid >> 24) JOIN StringIds s ON s.id = r.nameId"
        ).fetchall()
        n_sync = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION").fetchone()[0]
        assert len(linked) == n_sync > 0
        assert {(t, re.sub(r"_v\d+$", "", n)) for t, n in linked} == {
            (3, "cudaStreamSynchronize"),
            (2, "cudaStreamWaitEvent"),
        }
        meta = dict(db.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
        assert re.fullmatch(r"20\d\d\.\d+\.\d+\.\d+", meta["EXPORT_PRODUCT_VERSION"])
        assert "traceq" in meta["GENERATED_BY"]
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    assert page_size == 4096
    header = files["nsys"].read_bytes()[:100]
    assert struct.unpack(">I", header[96:100]) == (3_046_000,)  # pinned, not the local SQLite's version


def test_a_multi_rank_job_is_one_process_per_rank_in_one_export_or_one_export_per_rank(
    files: dict[str, Path], tmp_path: Path
) -> None:
    tl = timeline("straggler_job")
    with sqlite3.connect(files["job_nsys"]) as db:
        kernel_procs = db.execute(
            "SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchall()
    assert sorted(kernel_procs) == [(p.pid, p.device) for p in tl.processes]
    for p, path in zip(tl.processes, write_nsys_per_rank(tl, tmp_path), strict=True):
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall() == [(p.device,)]
            env = [v for (v,) in db.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT%'")]
            assert f'RANK="{p.rank}"' in env
