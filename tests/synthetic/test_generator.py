"""Specification of the synthetic-trace generator (``traceq.synthetic``) and the shipped samples.

The generator simulates a training job into a ground-truth timeline and writes it as an nsys
SQLite export and as Kineto JSON.  These tests say what that promises: the files are
deterministic, look like the real formats, hold exactly the planted events (counted here with
plain ``sqlite3`` and ``json``, not with traceq's importers), carry the same ns in both formats,
and each planted problem moves the ground truth the way its name says (measured by small
brute-force computations written out below, independent of traceq's interval engine).
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import re
import sqlite3
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import polars as pl
import pytest

from traceq.schema import validate
from traceq.synthetic import (
    KERNELS,
    PRESETS,
    Knobs,
    Scenario,
    Timeline,
    build_timeline,
    preset,
    write_kineto_json,
    write_kineto_ranks,
    write_nsys_per_rank,
    write_nsys_sqlite,
)
from traceq.synthetic.nsys_writer import TABLES, global_tid
from traceq.synthetic.timeline import KINETO_BASE_TIME_NS, MEMORY_BOUND_CLASSES

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


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The single-rank default and the 4-rank straggler job, written in both formats."""
    out = tmp_path_factory.mktemp("synthetic")
    paths = {
        "nsys": write_nsys_sqlite(timeline("training_step"), out / "training_step.nsys.sqlite"),
        "kineto": write_kineto_json(timeline("training_step"), out / "training_step.pt.trace.json.gz"),
        "job_nsys": write_nsys_sqlite(timeline("straggler_job"), out / "job.nsys.sqlite"),
    }
    for r, p in enumerate(write_kineto_ranks(timeline("straggler_job"), out / "job")):
        paths[f"job_rank{r}"] = p
    return paths


# --------------------------------------------------------------------------- determinism


def test_same_scenario_gives_the_same_ground_truth() -> None:
    assert build_timeline(preset("straggler_job")).events().equals(truth("straggler_job"))
    reseeded = build_timeline(replace(preset("straggler_job"), seed=1)).events()
    assert not reseeded.equals(truth("straggler_job"))


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


# --------------------------------------------------------------------------- the nsys export


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


# --------------------------------------------------------------------------- the Kineto trace


def test_kineto_trace_is_plain_json_with_the_keys_readers_need(files: dict[str, Path]) -> None:
    data = load_kineto(files["kineto"])
    assert data["schemaVersion"] == 1
    assert data["distributedInfo"] | {"pg_config": None} == {
        "backend": "nccl",
        "rank": 0,
        "world_size": 8,
        "pg_count": 1,
        "pg_config": None,
        "nccl_version": data["distributedInfo"]["nccl_version"],
    }
    assert data["baseTimeNanoseconds"] == KINETO_BASE_TIME_NS
    assert data["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert data["deviceProperties"][0]["numSms"] == 132
    keys = list(data)
    assert keys.index("baseTimeNanoseconds") < keys.index("traceEvents")  # streaming readers get the base first
    cats = Counter(e.get("cat") for e in data["traceEvents"])
    assert set(KINETO_KIND) | {"ac2g", "Trace", None} == set(cats)
    names = {e["name"] for e in data["traceEvents"] if e["ph"] == "M"}
    assert names >= {"process_name", "thread_name", "process_labels"}
    with gzip.open(files["kineto"], "rt") as fh:
        text = fh.read()
    numbers = re.findall(r'"(?:ts|dur)": ([0-9.]+)', text)
    assert numbers and all(re.fullmatch(r"\d+\.\d{3}", n) for n in numbers)  # µs with exactly 3 decimals


def test_kineto_gpu_rows_sit_on_device_and_stream_and_are_linked_to_their_launch(files: dict[str, Path]) -> None:
    proc = timeline("training_step").processes[0]
    events = load_kineto(files["kineto"])["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")]
    assert all(e["pid"] == e["args"]["device"] == proc.device and e["tid"] == e["args"]["stream"] for e in gpu)
    by_corr = {e["args"]["correlation"]: e for e in gpu}
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert starts.keys() == ends.keys() == by_corr.keys()
    for corr, g in by_corr.items():
        assert ends[corr]["ts"] == g["ts"] and ends[corr]["bp"] == "e"
        assert starts[corr]["ts"] == launches[corr]["ts"] and launches[corr]["ts"] <= g["ts"]
    # Each launch sits inside the cpu_op whose External id it carries.
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    for call in launches.values():
        op = ops[call["args"]["External id"]]
        assert op["tid"] == call["tid"] and op["ts"] <= call["ts"] and call["ts"] + call["dur"] <= op["ts"] + op["dur"]


def test_kineto_projects_the_step_range_onto_the_stream_that_ran_its_work(files: dict[str, Path]) -> None:
    events = load_kineto(files["kineto"])["traceEvents"]
    cpu_steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    gpu_steps = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert (
        [e["name"] for e in cpu_steps] == [e["name"] for e in gpu_steps] == [f"ProfilerStep#{n}" for n in range(2, 6)]
    )
    for cpu, gpu in zip(cpu_steps, gpu_steps, strict=True):
        assert (gpu["pid"], gpu["tid"]) == (0, 7)
        assert cpu["ts"] < gpu["ts"] and gpu["ts"] + gpu["dur"] <= cpu["ts"] + cpu["dur"]


def test_each_rank_file_says_its_own_rank_and_device(files: dict[str, Path]) -> None:
    for p in timeline("straggler_job").processes:
        data = load_kineto(files[f"job_rank{p.rank}"])
        assert (data["distributedInfo"]["rank"], data["distributedInfo"]["world_size"]) == (p.rank, 4)
        kernel_pids = {e["pid"] for e in data["traceEvents"] if e.get("cat") == "kernel"}
        assert kernel_pids == {p.device}


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


# --------------------------------------------------------------------------- well-formed ground truth


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_ground_truth_is_a_valid_event_table_in_every_view(name: str) -> None:
    for view in ("truth", "nsys", "kineto"):
        validate(truth(name, view))


@pytest.mark.parametrize("name", ["training_step", "host_sync", "small_kernels", "straggler_job"])
def test_cpu_rows_nest_and_gpu_rows_queue_in_order(name: str) -> None:
    df = truth(name)
    for _, rows in df.filter(pl.col("tid").is_not_null()).group_by("pid", "tid"):
        stack: list[int] = []
        for s, e in (
            rows.sort(["start_ns", "end_ns"], descending=[False, True]).select("start_ns", "end_ns").iter_rows()
        ):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], "CPU ranges, ops and API calls must nest on a thread"
            stack.append(e)
    gpu = df.filter(pl.col("kind").is_in(GPU_KINDS))
    for _, rows in gpu.group_by("pid", "stream"):
        s, e = rows.sort("start_ns")["start_ns"].to_numpy(), rows.sort("start_ns")["end_ns"].to_numpy()
        assert (s[1:] >= e[:-1]).all(), "a stream runs one operation at a time"
    launched = gpu.join(
        df.filter(pl.col("kind") == "cuda_api").select("pid", "correlation", api_start="start_ns"),
        on=["pid", "correlation"],
    )
    assert launched.height == gpu.height
    assert (launched["api_start"] < launched["start_ns"]).all()


def test_stream_synchronize_returns_only_after_the_stream_has_drained() -> None:
    df = truth("training_step")
    syncs = df.filter((pl.col("kind") == "cuda_api") & (pl.col("name") == "cudaStreamSynchronize"))
    gpu = df.filter(pl.col("kind").is_in(GPU_KINDS) & (pl.col("stream") == 7))
    for s, e in syncs.select("start_ns", "end_ns").iter_rows():
        drained_at = int(gpu.filter(pl.col("start_ns") < s)["end_ns"].max())  # type: ignore[arg-type]
        assert drained_at <= e


def test_correlation_ids_are_unique_per_process() -> None:
    api = truth("straggler_job").filter(pl.col("kind") == "cuda_api")
    assert api.select("pid", "correlation").is_unique().all()


def test_profiled_steps_can_repeat_a_few_templates_at_vectorised_offsets() -> None:
    sc = replace(preset("training_step"), steps=6, distinct_steps=2)
    tl = build_timeline(sc)
    assert len(tl.templates) == 2 and [i.template for i in tl.instances] == [0, 1, 0, 1, 0, 1]
    df = tl.events()
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.height == 3 * sum(e.kind == "kernel" for t in tl.templates for e in t.events[0])
    step = [i.offset_ns for i in tl.instances]
    first = kernels.filter(pl.col("start_ns").is_between(step[0], step[1] - 1))["start_ns"].to_numpy()
    third = kernels.filter(pl.col("start_ns").is_between(step[2], step[3] - 1))["start_ns"].to_numpy()
    assert (third - first == step[2] - step[0]).all()
    steps = df.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#") & pl.col("tid").is_not_null())
    assert steps["name"].cast(pl.String).to_list() == [f"ProfilerStep#{n}" for n in range(2, 8)]


def test_scenarios_reject_impossible_shapes() -> None:
    with pytest.raises(ValueError, match="ranks"):
        Scenario("bad", ranks=4, world_size=2)
    with pytest.raises(ValueError, match="straggler_rank"):
        Scenario("bad", Knobs(straggler=True), ranks=2, world_size=2, straggler_rank=5)
    with pytest.raises(KeyError, match="no preset 'nope'"):
        preset("nope")


# --------------------------------------------------------------------------- planted problems
# Shares of step time, averaged over steps (and ranks unless one is named), from the ground truth.
# Busy time is computed on a 100 ns bitmap of each step window: slow, obvious, independent.

RES_NS = 100


def bitmap(intervals: Iterable[tuple[int, int]], lo: int, hi: int) -> np.ndarray:
    cells = np.zeros((hi - lo + RES_NS - 1) // RES_NS, dtype=bool)
    for s, e in intervals:
        a, b = max(s, lo), min(e, hi)
        if b > a:
            cells[(a - lo) // RES_NS : (b - lo + RES_NS - 1) // RES_NS] = True
    return cells


def step_windows(df: pl.DataFrame, rank: int) -> list[tuple[int, int]]:
    steps = df.filter(
        (pl.col("rank") == rank)
        & (pl.col("kind") == "range")
        & pl.col("tid").is_not_null()
        & pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#")
    )
    return list(steps.select("start_ns", "end_ns").iter_rows())


def spans(df: pl.DataFrame) -> list[tuple[int, int]]:
    return list(df.select("start_ns", "end_ns").iter_rows())


def per_step(name: str, measure: Any, rank: int | None = None) -> float:
    """Mean over steps (and ranks) of ``measure(rank_frame, lo, hi)`` / step length."""
    df = truth(name)
    shares = []
    for r in range(timeline(name).scenario.ranks) if rank is None else [rank]:
        mine = df.filter(pl.col("rank") == r)
        for lo, hi in step_windows(df, r):
            shares.append(measure(mine, lo, hi) / (hi - lo))
    return float(np.mean(shares))


def idle_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    busy = bitmap(spans(df.filter(pl.col("kind").is_in(GPU_KINDS))), lo, hi)
    return int((~busy).sum()) * RES_NS


def exposed_comm_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    gpu = df.filter(pl.col("kind").is_in(GPU_KINDS))
    comm = bitmap(spans(gpu.filter(pl.col("is_comm"))), lo, hi)
    compute = bitmap(spans(gpu.filter(~pl.col("is_comm"))), lo, hi)
    return int((comm & ~compute).sum()) * RES_NS


def idle_after_sync_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    """GPU idle from each cudaStreamSynchronize's return to the next GPU work."""
    busy = bitmap(spans(df.filter(pl.col("kind").is_in(GPU_KINDS))), lo, hi)
    total = 0
    syncs = df.filter((pl.col("name") == "cudaStreamSynchronize") & pl.col("end_ns").is_between(lo, hi - 1))
    for end in syncs["end_ns"]:
        i = (end - lo) // RES_NS
        nxt = np.flatnonzero(busy[i:])
        total += int(nxt[0] if nxt.size else busy.size - i) * RES_NS
    return total


def idle_before_input_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    """GPU idle between the step start and the host-to-device copy of the batch."""
    copies = df.filter((pl.col("copy_kind") == "HtoD") & pl.col("start_ns").is_between(lo, hi))
    busy = bitmap(spans(df.filter(pl.col("kind").is_in(GPU_KINDS))), lo, int(copies["start_ns"].min()))  # type: ignore[arg-type]
    return int((~busy).sum()) * RES_NS


def kernel_time(df: pl.DataFrame, lo: int, hi: int, keep: Any) -> int:
    k = df.filter((pl.col("kind") == "kernel") & pl.col("start_ns").is_between(lo, hi))
    return sum(e - s for n, s, e in k.select("name", "start_ns", "end_ns").iter_rows() if keep(str(n), e - s))


CLASS_OF = {spec.name: spec.kernel_class for spec in KERNELS.values()}


def memory_bound_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    return kernel_time(df, lo, hi, lambda n, _: CLASS_OF[n] in MEMORY_BOUND_CLASSES)


def memory_bound_share_of_kernel_time(name: str) -> float:
    return per_step(name, memory_bound_ns) / per_step(
        name, lambda df, lo, hi: kernel_time(df, lo, hi, lambda n, _: CLASS_OF[n] != "comm")
    )


def tiny_kernel_ns(df: pl.DataFrame, lo: int, hi: int) -> int:
    """Each sub-10-µs kernel on the compute stream, plus the idle it leaves before the next kernel."""
    k = df.filter((pl.col("kind") == "kernel") & (pl.col("stream") == 7) & pl.col("start_ns").is_between(lo, hi))
    s, e = k.sort("start_ns")["start_ns"].to_numpy(), k.sort("start_ns")["end_ns"].to_numpy()
    following = np.append(s[1:], e[-1:])
    tiny = (e - s) < 10_000
    return int((following - s)[tiny].sum())


def tiny_kernel_count_share(name: str) -> float:
    k = truth(name).filter(pl.col("kind") == "kernel")
    return float(((k["end_ns"] - k["start_ns"]) < 10_000).mean())  # type: ignore[arg-type]


def collectives(name: str, column: str) -> np.ndarray:
    """``column`` of every rank's NCCL kernels: one row per rank, one column per collective, in order."""
    df = truth(name).filter(pl.col("is_comm"))
    ranks = timeline(name).scenario.ranks
    return np.array([df.filter(pl.col("rank") == r).sort("start_ns")[column].to_numpy() for r in range(ranks)])


def arrival_skew_ns(name: str) -> list[int]:
    """Per step, the largest spread of the ranks' NCCL kernel start times over its collectives."""
    starts = collectives(name, "start_ns")
    spread = starts.max(axis=0) - starts.min(axis=0)
    return [int(x) for x in spread.reshape(timeline(name).scenario.steps, -1).max(axis=1)]


def waiting_in_collectives_ns(name: str) -> np.ndarray:
    """Per rank and step, how much longer its NCCL kernels ran than the shortest rank's (time spent waiting)."""
    durations = collectives(name, "end_ns") - collectives(name, "start_ns")
    excess = durations - durations.min(axis=0)
    sc = timeline(name).scenario
    per_step_sum: np.ndarray = excess.reshape(sc.ranks, sc.steps, -1).sum(axis=2)
    return per_step_sum


def step_ns(name: str) -> float:
    lo_hi = step_windows(truth(name), 0)
    return float(np.mean([hi - lo for lo, hi in lo_hi]))


@pytest.mark.parametrize(
    ("knob", "measure"),
    [
        ("launch_bound", idle_ns),
        ("host_sync", idle_after_sync_ns),
        ("input_stall", idle_before_input_ns),
        ("exposed_comm", exposed_comm_ns),
        ("small_kernels", tiny_kernel_ns),
    ],
)
def test_each_problem_knob_costs_at_least_a_fifth_of_the_step_and_clean_costs_nothing(knob: str, measure: Any) -> None:
    assert per_step(knob, measure) >= 0.20
    assert per_step("clean", measure) <= 0.05
    assert per_step("training_step", measure) <= 0.10  # the realistic default: a little, never dominant


def test_clean_keeps_the_gpu_busy_through_the_step() -> None:
    assert per_step("clean", idle_ns) <= 0.05
    assert per_step("launch_bound", idle_ns) >= 0.60


def test_memory_bound_kernels_dominate_only_with_the_knob() -> None:
    assert memory_bound_share_of_kernel_time("memory_bound") >= 0.50
    assert per_step("memory_bound", memory_bound_ns) >= 0.20
    assert memory_bound_share_of_kernel_time("clean") <= 0.25
    assert memory_bound_share_of_kernel_time("training_step") <= 0.25


def test_small_kernels_are_most_kernels_only_with_the_knob() -> None:
    assert tiny_kernel_count_share("small_kernels") >= 0.60
    assert tiny_kernel_count_share("clean") <= 0.05


def test_a_straggler_makes_the_other_ranks_wait_inside_the_collectives() -> None:
    sc = timeline("straggler_job").scenario
    slow = sc.resolved_straggler_rank()
    for r in range(sc.ranks):
        wait = per_step("straggler_job", exposed_comm_ns, rank=r)
        assert wait <= 0.05 if r == slow else wait >= 0.20
    starts = collectives("straggler_job", "start_ns")
    assert (starts[slow] == starts.max(axis=0)).all()
    waiting = waiting_in_collectives_ns("straggler_job")
    others = [r for r in range(sc.ranks) if r != slow]
    assert (waiting[others] >= 0.20 * step_ns("straggler_job")).all()  # early start, long NCCL kernels
    assert (waiting[slow] == 0).all()
    assert (waiting_in_collectives_ns("balanced_job") <= 0.05 * step_ns("balanced_job")).all()
    assert max(arrival_skew_ns("balanced_job")) <= 0.05 * step_ns("balanced_job")


def test_a_slow_link_exposes_communication_on_every_rank_without_arrival_skew() -> None:
    for r in range(4):
        assert per_step("slow_link_job", exposed_comm_ns, rank=r) >= 0.20
        assert per_step("balanced_job", exposed_comm_ns, rank=r) <= 0.05
    assert max(arrival_skew_ns("slow_link_job")) <= 0.05 * step_ns("slow_link_job")


# --------------------------------------------------------------------------- shipped samples

SAMPLE_FILES = (
    "training_step.nsys.sqlite",
    "training_step.pt.trace.json.gz",
    *(f"ranks/rank{r}.pt.trace.json.gz" for r in range(4)),
)


def make_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_samples", REPO / "sample_traces" / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_samples_are_up_to_date_and_small(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert make_samples().main(["--check", "--out", str(samples)]) == 0, capsys.readouterr().err
    for name in SAMPLE_FILES:
        assert (samples / name).stat().st_size < MIB, name


# --------------------------------------------------------------------------- traceq's own importers


def importers_or_skip() -> ModuleType:
    for module in ("traceq.importers.nsys.sqlite_importer", "traceq.importers.kineto.importer"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not written yet")
    import traceq.importers

    return traceq.importers


GPU_API_COLUMNS = ["kind", "start_ns", "end_ns", "pid", "device", "stream", "correlation", "is_comm"]


def comparable(df: pl.DataFrame, kinds_: Iterable[str], columns: list[str]) -> pl.DataFrame:
    rows = df.filter(pl.col("kind").cast(pl.String).is_in(list(kinds_)))
    rows = rows.select([pl.col(c).cast(pl.String) if c in ("kind", "name") else pl.col(c) for c in columns])
    return rows.sort(columns, nulls_last=True)


@pytest.mark.parametrize(
    ("sample", "view"),
    [("training_step.nsys.sqlite", "nsys"), ("training_step.pt.trace.json.gz", "kineto")],
)
def test_traceq_imports_the_samples_as_planted(samples: Path, sample: str, view: str) -> None:
    imported = pl.from_arrow(importers_or_skip().read_file(samples / sample).events)
    assert isinstance(imported, pl.DataFrame)
    planted = truth("training_step", view)
    got = kinds(imported)
    assert {k: got.get(k, 0) for k in kinds(planted)} == kinds(planted)
    gpu_api = ("kernel", "memcpy", "memset", "gpu_sync", "cuda_api")
    assert comparable(imported, gpu_api, GPU_API_COLUMNS).equals(comparable(planted, gpu_api, GPU_API_COLUMNS))
    named = ["kind", "start_ns", "end_ns", "name"]
    assert comparable(imported, ("kernel", "cuda_api", "range"), named).equals(
        comparable(planted, ("kernel", "cuda_api", "range"), named)
    )
