"""Both writers: the same bytes on every run, exactly the planted events, the same ns in both formats."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from tracegen import (
    build_timeline,
    preset,
    write_kineto_json,
    write_kineto_ranks,
    write_nsys_per_rank,
    write_nsys_sqlite,
)

from .planted import KINETO_KIND, kinds, load_kineto, timeline, to_ns, truth

# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", ["training_step", "straggler_job"])
def test_both_writers_give_identical_bytes_on_every_run(name: str, tmp_path: Path) -> None:
    def write_all(folder: Path) -> dict[str, bytes]:
        tl = build_timeline(preset(name))
        paths = [
            write_nsys_sqlite(tl, folder / "node.nsys.sqlite"),
            *write_nsys_per_rank(tl, folder / "per_rank"),
            *write_kineto_ranks(tl, folder / "kineto"),
            write_kineto_json(tl, folder / "plain.pt.trace.json", rank=0),
        ]
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in paths}

    first, second = write_all(tmp_path / "a"), write_all(tmp_path / "b")
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []


# --------------------------------------------------------------------------- files == ground truth


def nsys_counts(path: Path) -> dict[int, Counter[str]]:
    """Rows per kind and process, counted with plain SQL."""
    queries = {
        "kernel": "SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "memcpy": "SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "memset": "SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "gpu_sync": "SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "cuda_api": "SELECT globalTid >> 24 FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)",
        "range": "SELECT globalTid >> 24 FROM NVTX_EVENTS WHERE eventType IN (59, 60)",
    }
    out: dict[int, Counter[str]] = {}
    with sqlite3.connect(path) as db:
        for kind, sql in queries.items():
            for (proc,) in db.execute(sql):
                out.setdefault(proc & 0xFFFFFF, Counter())[kind] += 1
    return out


def kineto_counts(path: Path) -> Counter[str]:
    return Counter(KINETO_KIND[e["cat"]] for e in load_kineto(path)["traceEvents"] if e.get("cat") in KINETO_KIND)


def test_every_file_holds_exactly_the_planted_events(files: dict[str, Path]) -> None:
    single, job = timeline("training_step"), timeline("straggler_job")
    nsys_single, nsys_job = nsys_counts(files["nsys"]), nsys_counts(files["job_nsys"])
    assert nsys_single == {single.processes[0].pid: Counter(kinds(truth("training_step", "nsys")))}
    assert kineto_counts(files["kineto"]) == Counter(kinds(truth("training_step", "kineto")))
    for p in job.processes:
        planted_nsys = truth("straggler_job", "nsys").filter(pl.col("rank") == p.rank)
        planted_kineto = truth("straggler_job", "kineto").filter(pl.col("rank") == p.rank)
        assert nsys_job[p.pid] == Counter(kinds(planted_nsys))
        assert kineto_counts(files[f"job_rank{p.rank}"]) == Counter(kinds(planted_kineto))
    assert kinds(truth("training_step")) == kinds(truth("training_step", "kineto"))
    assert set(kinds(truth("training_step"))) - set(kinds(truth("training_step", "nsys"))) == {"cpu_op"}


Interval = tuple[str, int, int, int]


def nsys_intervals(path: Path) -> Counter[Interval]:
    tables = {
        "kernel": "CUPTI_ACTIVITY_KIND_KERNEL",
        "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
        "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
        "gpu_sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "cuda_api": "CUPTI_ACTIVITY_KIND_RUNTIME",
    }
    with sqlite3.connect(path) as db:
        return Counter(
            (kind, s, e, c)
            for kind, table in tables.items()
            for s, e, c in db.execute(f'SELECT start, "end", correlationId FROM {table}')
        )


def kineto_intervals(path: Path) -> Counter[Interval]:
    data = load_kineto(path)
    return Counter(
        (KINETO_KIND[e["cat"]], to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]), e["args"]["correlation"])
        for e in data["traceEvents"]
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_runtime")
    )


def truth_intervals(df: pl.DataFrame) -> Counter[Interval]:
    rows = df.filter(pl.col("correlation").is_not_null()).select(
        pl.col("kind").cast(pl.String), "start_ns", "end_ns", "correlation"
    )
    return Counter(rows.iter_rows())


def test_both_formats_carry_the_same_ns_for_every_gpu_and_api_row(files: dict[str, Path]) -> None:
    planted = truth_intervals(truth("training_step"))
    assert nsys_intervals(files["nsys"]) == planted
    assert kineto_intervals(files["kineto"]) == planted
    with sqlite3.connect(files["nsys"]) as db:
        ((epoch, clock),) = db.execute("SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME")
    assert epoch - clock == load_kineto(files["kineto"])["baseTimeNanoseconds"]  # same epoch mapping too
