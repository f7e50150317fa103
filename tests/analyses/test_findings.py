"""Findings: each rule fires on the preset that plants its problem, on the right device, with
numbers that match an independent computation; a clean trace gets none; and every rule fires
when its cause takes 10% of a step and stays silent at 1.9% (hand-built timelines).

The references below recompute each number from the raw event rows with plain Python (sorted
interval merges, the generator's own kernel classes); they share no code with the rules.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceq
import traceq.analyses.operators
from tracegen import KERNELS, MEMORY_BOUND_CLASSES, build_timeline, preset, write_kineto_ranks, write_nsys_sqlite
from traceq.analyses import analyze
from traceq.analyses.findings import FINDING_IDS, FIRE_SHARE, find_findings
from traceq.analyses.model import SEVERITIES, Analysis, Finding

from ..builders import Row, api, kernel, launch, memcpy, nccl, step, table
from ..conftest import SHARED_TRACES
from ..spans import Span, length_in, merge, subtract
from .attribution_oracle import Device, attribute
from .attribution_oracle import Gap as OracleGap

# --- independent references ----------------------------------------------------------------------


def spans(frame: pl.DataFrame) -> list[Span]:
    return list(zip(frame["start_ns"].to_list(), frame["end_ns"].to_list(), strict=True))


def windows_of(events: pl.DataFrame, pid: int) -> list[Span]:
    return spans(
        events.filter(
            (pl.col("kind") == "range")
            & pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#")
            & (pl.col("pid") == pid)
            & pl.col("tid").is_not_null()
        )
    )


def rows_on(events: pl.DataFrame, pid: int, kinds: tuple[str, ...]) -> pl.DataFrame:
    return events.filter(pl.col("kind").is_in(kinds) & (pl.col("pid") == pid) & pl.col("device").is_not_null())


@functools.cache
def run(name: str) -> tuple[pl.DataFrame, Analysis, dict[str, Finding]]:
    events = build_timeline(preset(name)).events("nsys")
    analysis = analyze(events)
    return events, analysis, {f.id: f for f in find_findings(events, analysis)}


def pid_of_rank(name: str, rank: int) -> int:
    return build_timeline(preset(name)).processes[rank].pid


def check_title(f: Finding, *numbers: str) -> None:
    assert f"{f.share:.1%}" in f.title
    for number in numbers:
        assert number in f.title, (number, f.title)


# --- which finding fires where ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["clean", "training_step", "balanced_job"])
def test_a_healthy_trace_has_no_findings(name: str) -> None:
    """``clean`` is compute-bound (its per-step loss.item() costs well under 2%); ``training_step``
    and ``balanced_job`` have a little of everything and nothing dominant."""
    assert run(name)[2] == {}


@pytest.mark.parametrize(
    ("name", "finding_id", "rank"),
    [
        ("launch_bound", "launch_bound", 0),
        ("host_sync", "host_sync", 0),
        ("input_stall", "input_stall", 0),
        ("exposed_comm", "exposed_comm", 0),
        ("memory_bound", "memory_bound_kernels", 0),
        ("small_kernels", "small_kernels", 0),
        ("straggler_job", "straggler", 2),
        ("slow_link_job", "exposed_comm", None),
    ],
)
def test_each_preset_fires_its_finding_on_the_right_device(name: str, finding_id: str, rank: int | None) -> None:
    _, analysis, found = run(name)
    f = found[finding_id]
    assert f.share >= FIRE_SHARE
    assert f.severity == ("high" if f.share >= 0.25 else "medium" if f.share >= 0.10 else "low")
    assert f.evidence and all(e.text for e in f.evidence)
    assert f.fix
    worst = f.evidence[0]
    if "steps" in f.metrics:
        assert f.metrics["steps"] == preset(name).steps
    if "step_ns" in f.metrics:
        assert f.metrics["step_ns"] == next(d.dur_ns for d in analysis.devices if d.rank == worst.rank)
    if rank is not None:
        assert (worst.rank, worst.device) == (rank, rank)
        assert f"(rank {rank}, GPU {rank})" in f.title
    assert {e.rank for e in f.evidence} <= {d.rank for d in analysis.devices}


def test_planted_presets_fire_nothing_unexpected() -> None:
    """Only the planted problem fires, except where two rules read the same problem (the seed's
    launch-bound row: short gaps between short kernels) or its real side effect (halved matmuls
    leave the all-reduces less compute to hide behind)."""
    assert set(run("host_sync")[2]) == {"host_sync"}
    assert set(run("input_stall")[2]) == {"input_stall"}
    assert set(run("exposed_comm")[2]) == {"exposed_comm"}
    assert set(run("memory_bound")[2]) == {"memory_bound_kernels"}
    assert set(run("launch_bound")[2]) == {"launch_bound", "small_kernels"}
    assert set(run("small_kernels")[2]) == {"small_kernels", "launch_bound", "exposed_comm"}
    assert set(run("straggler_job")[2]) == {"straggler", "exposed_comm"}


def test_a_slow_link_is_exposed_comm_not_a_straggler() -> None:
    found = run("slow_link_job")[2]
    assert "straggler" not in found
    assert found["exposed_comm"].share > 0.3


def test_findings_are_sorted_by_severity_then_share_then_id() -> None:
    for name in ("small_kernels", "straggler_job", "launch_bound"):
        events, analysis, _ = run(name)
        got = find_findings(events, analysis)
        key = [(SEVERITIES.index(f.severity), -f.share, f.id) for f in got]
        assert key == sorted(key)
        assert all(f.id in FINDING_IDS for f in got)


# --- the numbers, against independent computations -----------------------------------------------


def oracle_of(name: str) -> Device:
    """The attribution oracle's one device of preset ``name`` (nsys view)."""
    (device,) = attribute(run(name)[0]).values()
    return device


def in_windows(gaps: list[OracleGap], windows: list[Span]) -> list[OracleGap]:
    return [g for g in gaps if length_in([(g.start_ns, g.end_ns)], windows) > 0]


def test_launch_bound_numbers() -> None:
    events, analysis, found = run("launch_bound")
    f = found["launch_bound"]
    (device,) = analysis.devices
    pid = pid_of_rank("launch_bound", 0)
    win = windows_of(events, pid)
    oracle = oracle_of("launch_bound")
    # the cost: launch idle, plus CPU idle inside idle intervals under 100 µs that end at a kernel
    short = [g for g in oracle.gaps if g.end_ns - g.start_ns < 100_000 and g.next and g.next["kind"] == "kernel"]
    launch_ns = sum(w.causes_ns["launch"] for w in oracle.windows)
    overhead = launch_ns + sum(g.causes_ns["cpu"] for g in short)  # every short gap lies inside a step here
    assert f.metrics["launch_idle_ns"] == device.steady.idle_by_cause_ns["launch"] == launch_ns
    assert f.metrics["overhead_idle_ns"] == overhead
    assert f.metrics["step_ns"] == sum(e - s for s, e in win)
    assert f.share == pytest.approx(overhead / f.metrics["step_ns"])
    launch_gaps = [
        g for g in in_windows(oracle.gaps, win) if g.causes_ns["launch"] or (g in short and g.causes_ns["cpu"])
    ]
    assert f.metrics["launch_gaps"] == len(launch_gaps)
    kernels = rows_on(events, pid, ("kernel",)).filter(~pl.col("is_comm"))
    t_k = round(statistics.median(e - s for s, e in spans(kernels) if length_in([(s, e)], win) > 0))
    assert f.metrics["t_k_ns"] == t_k
    # t_cpu: the launching thread's calls that put work on the GPU, inside the steps, in order.
    launched = set(rows_on(events, pid, ("kernel", "memcpy", "memset"))["correlation"].to_list())
    calls = events.filter((pl.col("kind") == "cuda_api") & (pl.col("pid") == pid))
    starts = sorted(
        s
        for s, e, c in zip(
            calls["start_ns"].to_list(), calls["end_ns"].to_list(), calls["correlation"].to_list(), strict=True
        )
        if c in launched and length_in([(s, e)], win) > 0
    )
    t_cpu = round(statistics.median(b - a for a, b in itertools.pairwise(starts)))
    assert f.metrics["t_cpu_ns"] == t_cpu
    assert f.metrics["busy_bound"] == pytest.approx(t_k / max(t_k, t_cpu))
    assert t_cpu > t_k  # the planted problem: the CPU is slower per launch than the GPU per kernel
    assert f"{t_k / max(t_k, t_cpu):.0%}" in f.evidence[0].text
    assert device.regime is not None and device.regime.verdict == "overhead-bound"
    check_title(f, "(rank 0, GPU 0)")
    # each kernel's launch gaps name an op that launched it (here, without cpu_op rows in the nsys
    # export: the innermost NVTX range around the launch)
    ops = traceq.analyses.operators.activity_operators(events).filter(pl.col("kind") == "kernel")
    ops_of = {name: set(o) for name, o in ops.group_by("name").agg(pl.col("op_name").drop_nulls()).iter_rows()}
    per_kernel = [e for e in f.evidence if "launch gaps (" in e.text and e.name]
    assert per_kernel
    for e in per_kernel:  # a kernel launched outside every range (the backward pass here) names none
        assert any(f"(from {op})" in e.text for op in ops_of[e.name]) if ops_of[e.name] else "(from" not in e.text
    assert any("(from DistributedDataParallel.forward)" in e.text for e in per_kernel)


def test_host_sync_numbers() -> None:
    events, analysis, found = run("host_sync")
    f = found["host_sync"]
    (device,) = analysis.devices
    oracle = oracle_of("host_sync")
    sync_ns = sum(w.causes_ns["sync"] for w in oracle.windows)
    assert f.metrics["sync_idle_ns"] == device.idle_by_cause_ns["sync"] == sync_ns
    assert f.metrics["step_ns"] == device.dur_ns
    assert f.share == pytest.approx(sync_ns / device.dur_ns)
    # One `.item()` after each of the 4 forward layers, in each of the 4 steps, and the step's own
    # loss.item() at its end, whose drained queue the next step's data loading keeps empty (the
    # idle after it is part sync, part input): 5 idle intervals with sync ns per step.
    layers, steps = preset("host_sync").layers, preset("host_sync").steps
    win = windows_of(events, pid_of_rank("host_sync", 0))
    with_sync = [g for g in in_windows(oracle.gaps, win) if g.causes_ns["sync"]]
    assert f.metrics["sync_gaps"] == len(with_sync) == (layers + 1) * steps
    assert f.metrics["sync_gaps_per_step"] == layers + 1
    syncs = events.filter((pl.col("kind") == "cuda_api") & (pl.col("name") == "cudaStreamSynchronize"))
    assert syncs.height == (layers + 1) * steps
    assert f"{layers + 1:.1f} per step" in f.evidence[0].text
    assert f"{layers + 1:.1f} such calls per step" in f.evidence[0].text
    assert f.evidence[0].name == "cudaStreamSynchronize"
    check_title(f, "(rank 0, GPU 0)")


def test_input_stall_numbers() -> None:
    events, analysis, found = run("input_stall")
    f = found["input_stall"]
    (device,) = analysis.devices
    oracle = oracle_of("input_stall")
    input_ns = sum(w.causes_ns["input"] for w in oracle.windows)
    assert f.metrics["input_idle_ns"] == device.idle_by_cause_ns["input"] == input_ns
    assert f.share == pytest.approx(input_ns / device.dur_ns)
    pid = pid_of_rank("input_stall", 0)
    win = windows_of(events, pid)
    loaders = events.filter(
        (pl.col("kind") == "range")
        & pl.col("name").cast(pl.String).str.starts_with("enumerate(DataLoader)#")
        & (pl.col("pid") == pid)
    )
    # seed 000's "how to confirm": the idle time matches the loader wait (here, to the ns)
    assert f.metrics["loader_wait_ns"] == length_in(spans(loaders), win) == input_ns
    steps = preset("input_stall").steps
    assert f.metrics["input_gaps"] == len([g for g in in_windows(oracle.gaps, win) if g.causes_ns["input"]]) == steps
    assert any("(100% of the loader's wait)" in e.text for e in f.evidence)
    check_title(f, "(rank 0, GPU 0)")


def test_exposed_comm_numbers() -> None:
    events, _, found = run("exposed_comm")
    f = found["exposed_comm"]
    pid = pid_of_rank("exposed_comm", 0)
    acts = rows_on(events, pid, ("kernel", "memcpy", "memset"))
    comm, compute = spans(acts.filter(pl.col("is_comm"))), spans(acts.filter(~pl.col("is_comm")))
    win = windows_of(events, pid)
    exposed = length_in(subtract(comm, compute), win)
    assert f.metrics["exposed_comm_ns"] == exposed
    assert f.metrics["comm_ns"] == length_in(comm, win)
    assert f.metrics["step_ns"] == sum(e - s for s, e in win)
    assert f.share == pytest.approx(exposed / f.metrics["step_ns"])
    assert f.metrics["collectives"] == preset("exposed_comm").steps  # one unoverlapped all-reduce per step
    assert f.metrics["hidden_comm_share"] == pytest.approx(1 - exposed / f.metrics["comm_ns"])
    check_title(f, "(rank 0, GPU 0)")


def test_memory_bound_numbers() -> None:
    events, _, found = run("memory_bound")
    f = found["memory_bound_kernels"]
    pid = pid_of_rank("memory_bound", 0)
    kernels = rows_on(events, pid, ("kernel",))
    cls = {spec.name: spec.kernel_class for spec in KERNELS.values()}  # the generator's own classes
    names = kernels["name"].cast(pl.String).to_list()
    memory = [sp for sp, n in zip(spans(kernels), names, strict=True) if cls[n] in MEMORY_BOUND_CLASSES]
    math = [sp for sp, n in zip(spans(kernels), names, strict=True) if cls[n] == "gemm"]
    win = windows_of(events, pid)
    m, g = length_in(memory, win), length_in(math, win)
    step_ns = sum(e - s for s, e in win)
    assert f.metrics["memory_bound_ns"] == m
    assert f.metrics["math_ns"] == g
    assert f.metrics["memory_bound_excess_ns"] == round(m - 0.5 * g)
    assert f.share == pytest.approx((m - 0.5 * g) / step_ns)
    assert f.metrics["memory_bound_share"] == pytest.approx(m / step_ns)
    k = length_in(spans(kernels.filter(~pl.col("is_comm"))), win)
    assert f.metrics["kernel_ns"] == k
    assert f.metrics["memory_bound_kernel_share"] == pytest.approx(m / k)
    check_title(f, f"{m / step_ns:.1%}", "(rank 0, GPU 0)")


def test_small_kernels_numbers() -> None:
    events, _, found = run("small_kernels")
    f = found["small_kernels"]
    pid = pid_of_rank("small_kernels", 0)
    win = windows_of(events, pid)
    oracle = oracle_of("small_kernels")
    # short idle intervals with launch ns whose next kernel is short, and those kernels
    gaps = [
        g
        for g in oracle.gaps
        if g.causes_ns["launch"]
        and g.end_ns - g.start_ns < 100_000
        and g.next is not None
        and g.next["kind"] == "kernel"
        and g.next["end_ns"] - g.next["start_ns"] < 10_000
    ]
    short = [(g.next["start_ns"], g.next["end_ns"]) for g in gaps if g.next is not None]
    gap_spans = [(g.start_ns, g.end_ns) for g in gaps]
    cost = length_in(short + gap_spans, win)
    assert f.metrics["small_kernel_cost_ns"] == cost
    assert f.metrics["short_kernel_ns"] == length_in(short, win)
    assert f.metrics["short_launch_gap_ns"] == length_in(gap_spans, win)
    assert f.share == pytest.approx(cost / sum(e - s for s, e in win))


def test_straggler_names_rank_2_and_the_wait_it_costs() -> None:
    """Against arrival skew computed here: the n-th all-reduce of every rank is one collective, the
    last to start is the one the others wait for, and what it costs a rank is the part of its wait
    (its start → the last start) with none of its own compute beside it."""
    events, _, found = run("straggler_job")
    f = found["straggler"]
    pids = {r: pid_of_rank("straggler_job", r) for r in range(4)}
    starts = {r: sorted(spans(rows_on(events, pid, ("kernel",)).filter(pl.col("is_comm")))) for r, pid in pids.items()}
    busy = {
        r: merge(spans(rows_on(events, pid, ("kernel", "memcpy", "memset")).filter(~pl.col("is_comm"))))
        for r, pid in pids.items()
    }
    win = {r: windows_of(events, pid) for r, pid in pids.items()}
    last = [max(range(4), key=lambda r: starts[r][n][0]) for n in range(len(starts[0]))]
    assert last == [2] * 12
    lost = {r: 0 for r in (0, 1, 3)}
    for n in range(12):
        latest = starts[2][n][0]
        for r in lost:
            s = starts[r][n][0]
            lost[r] += (latest - s) - length_in(busy[r], [(s, latest)])
    shares = {r: lost[r] / sum(e - s for s, e in win[r]) for r in lost}
    assert f.share == pytest.approx(statistics.median(shares.values()))
    assert f.metrics["wait_share"] == f.share
    assert f.metrics["wait_caused_ns"] == sum(lost.values())
    assert f.metrics["others_wait_ns_per_step"] == pytest.approx(statistics.median(v / 3 for v in lost.values()))
    per_step = {r: length_in(busy[r], win[r]) / 3 for r in range(4)}
    median = statistics.median(per_step.values())
    assert f.metrics["slow_compute_ns_per_step"] == pytest.approx(per_step[2])
    assert f.metrics["median_compute_ns_per_step"] == pytest.approx(median)
    assert f.metrics["compute_excess_ns_per_step"] == pytest.approx(per_step[2] - median)
    assert (f.metrics["slow_rank"], f.metrics["slow_device"], f.metrics["ranks"]) == (2, 2, 4)
    assert (f.metrics["last_arrivals"], f.metrics["collectives"], f.metrics["expected_last_arrivals"]) == (12, 12, 3)
    assert f.metrics["last_arrival_bound"] == pytest.approx(0.25**12)
    check_title(
        f, "Rank 2 is a straggler", "last at 12 of 12", f"{(per_step[2] - median) / 1e6:.2f} ms", "(rank 2, GPU 2)"
    )
    assert f.evidence[0].rank == 2
    assert [e.rank for e in f.evidence[3:6]] == sorted((0, 1, 3), key=lambda r: (-shares[r], r))


def test_a_straggler_finding_never_blames_a_rank_for_a_slow_link() -> None:
    """In the slow-link job every rank arrives within a few µs: whoever is last most often costs the
    others nothing worth a finding, whatever its compute."""
    events, analysis, found = run("slow_link_job")
    assert "straggler" not in found
    assert found["exposed_comm"].share > 0.3
    assert "straggler" not in {f.id for f in find_findings(events, analysis)}


def test_exposed_comm_caused_by_a_straggler_says_so_in_its_fix() -> None:
    found = run("straggler_job")[2]
    assert found["exposed_comm"].fix.startswith("Most of this is waiting for a straggler (Rank 2")
    assert not run("slow_link_job")[2]["exposed_comm"].fix.startswith("Most of this")


def test_findings_from_written_files(tmp_path: Path) -> None:
    """The same findings from the files the generator writes, loaded like a user's traces."""
    host_sync = write_nsys_sqlite(build_timeline(preset("host_sync")), tmp_path / "host_sync.nsys.sqlite")
    trace = traceq.load(host_sync)
    assert [f.id for f in find_findings(trace.events, analyze(trace.events))] == ["host_sync"]
    write_kineto_ranks(build_timeline(preset("straggler_job")), tmp_path / "job")
    trace = traceq.load(tmp_path / "job")
    found = {f.id: f for f in find_findings(trace.events, analyze(trace.events))}
    assert found["straggler"].metrics["slow_rank"] == 2


# --- the 10% / 2% rule, exactly, on hand-built timelines -------------------------------------------

STEP_NS = 1_000_000


def launch_gap(cost: int) -> list[Row]:
    """Kernel, then ``cost`` ns idle in which the host is issuing the next kernel: its launch call
    starts as the GPU drains and returns 1 µs (the launch latency) before the kernel starts; so
    every idle ns is ``launch``."""
    b = 500_000 + cost
    return [
        step(0, STEP_NS),
        launch(0, 1_000, corr=1),
        kernel(0, 500_000, corr=1),
        launch(500_000, b - 1_000, corr=2),
        kernel(b, STEP_NS, corr=2),
    ]


def sync_gap(cost: int) -> list[Row]:
    """Kernel, then ``cost`` ns idle after a cudaStreamSynchronize that waited for it (blocked 300 µs
    into the kernel, returning 500 ns after it): blocked, then refilling the queue it drained, until
    the next kernel; so every idle ns is ``sync``."""
    b = 500_000 + cost
    return [
        step(0, STEP_NS),
        launch(0, 1_000, corr=1),
        kernel(0, 500_000, corr=1),
        api("cudaStreamSynchronize", 300_000, 500_500),
        launch(b - 2_000, b - 1_000, corr=2),
        kernel(b, STEP_NS, corr=2),
    ]


LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def input_gap(cost: int) -> list[Row]:
    """Kernel, then ``cost`` ns in the data loader, then 2 µs to queue the batch's host-to-device copy
    (``launch``): ``cost`` ns of ``input``."""
    b = 500_000 + cost + 2_000
    return [
        step(0, STEP_NS),
        launch(0, 1_000, corr=1),
        kernel(0, 500_000, corr=1),
        step(500_000, 500_000 + cost, name=LOADER),
        api("cudaMemcpyAsync", b - 2_000, b - 1_000, corr=2),
        memcpy(b, STEP_NS, "HtoD", corr=2),
    ]


def exposed(cost: int) -> list[Row]:
    return [step(0, STEP_NS), kernel(0, STEP_NS - cost), nccl(STEP_NS - cost, STEP_NS)]


STRAGGLING_STEPS = 8
"""Eight collectives, all led by rank 0: two ranks need that many to rule out chance (0.5**8)."""


def straggling(cost: int) -> list[Row]:
    """Rank 0 computes 90% of every step; rank 1 computes ``cost`` less, then waits ``cost`` in the
    all-reduce for rank 0, with nothing to compute: rank 0 costs it ``cost`` per step."""
    fast: dict[str, Any] = dict(device=1, pid=200, rank=1)
    rows: list[Row] = []
    for n in range(STRAGGLING_STEPS):
        t = n * STEP_NS
        rows += [
            step(t, t + STEP_NS, n, rank=0),
            kernel(t, t + 900_000, rank=0),
            nccl(t + 900_000, t + STEP_NS, rank=0),
            step(t, t + STEP_NS, n, pid=200, tid=201, rank=1),
            kernel(t, t + 900_000 - cost, **fast),
            nccl(t + 900_000 - cost, t + STEP_NS, **fast),
        ]
    return rows


ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"


def memory_bound(cost: int) -> list[Row]:
    """400 µs of matmul allows 200 µs of elementwise work; the rest, ``cost`` ns, is the excess."""
    return [
        step(0, STEP_NS),
        kernel(0, 400_000, "ampere_sgemm_128x64_tn"),
        kernel(400_000, 600_000 + cost, ELEMENTWISE),
    ]


def small(pieces: list[tuple[int, int]]) -> list[Row]:
    """A long matmul, then (launch gap, short kernel) pieces."""
    rows = [step(0, STEP_NS), launch(0, 500, corr=1), kernel(0, 900_000, "ampere_sgemm_128x64_tn", corr=1)]
    t = 900_000
    for i, (gap, dur) in enumerate(pieces, start=2):
        k = t + gap
        rows += [launch(k - 1_500, k - 500, corr=i), kernel(k, k + dur, ELEMENTWISE, corr=i)]
        t = k + dur
    return rows


BOUNDARY_CASES: dict[str, Callable[[int], list[Row]]] = {
    "launch_bound": launch_gap,
    "host_sync": sync_gap,
    "input_stall": input_gap,
    "exposed_comm": exposed,
    "straggler": straggling,
    "memory_bound_kernels": memory_bound,
}


def findings_for(rows: list[Row]) -> dict[str, Finding]:
    events = table(*rows)
    return {f.id: f for f in find_findings(events, analyze(events))}


@pytest.mark.parametrize("finding_id", sorted(BOUNDARY_CASES))
def test_fires_at_10_percent_of_a_step(finding_id: str) -> None:
    build = BOUNDARY_CASES[finding_id]
    f = findings_for(build(100_000))[finding_id]
    assert f.share == pytest.approx(0.10)
    assert f.severity == ("medium" if f.share >= 0.10 else "low")  # 0.9 − 0.8 is a hair under 0.1 in floats
    assert "10.0%" in f.title
    assert f.evidence


@pytest.mark.parametrize("finding_id", sorted(BOUNDARY_CASES))
def test_silent_at_1_9_percent_of_a_step(finding_id: str) -> None:
    build = BOUNDARY_CASES[finding_id]
    found = findings_for(build(19_000))
    assert finding_id not in found
    # Only the straggler timeline has another real problem: rank 1 waits 11.9% in its collective.
    assert set(found) == ({"exposed_comm"} if finding_id == "straggler" else set())


def test_small_kernels_fires_at_10_percent_and_is_silent_at_1_9_percent() -> None:
    """Ten 5 µs kernels, each after a 5 µs launch gap: 100 µs of a 1 ms step."""
    f = findings_for(small([(5_000, 5_000)] * 10))["small_kernels"]
    assert f.share == pytest.approx(0.10)
    assert (f.metrics["short_kernel_ns"], f.metrics["short_launch_gap_ns"]) == (50_000, 50_000)
    assert f.metrics["short_kernels"] == 10 and f.metrics["kernels"] == 11
    assert "10.0%" in f.title and "91% of kernels" in f.title
    assert findings_for(small([(10_000, 9_000)])) == {}


def test_the_boundary_timelines_measure_what_they_claim() -> None:
    """Cross-check the hand-built costs with the breakdown itself."""
    events = table(*launch_gap(100_000))
    (d,) = analyze(events).devices
    assert (d.dur_ns, d.idle_by_cause_ns["launch"], d.idle_ns) == (STEP_NS, 100_000, 100_000)
    (d,) = analyze(table(*sync_gap(100_000))).devices
    assert (d.idle_by_cause_ns["sync"], d.idle_ns) == (100_000, 100_000)
    (d,) = analyze(table(*input_gap(100_000))).devices
    assert (d.idle_by_cause_ns["input"], d.idle_by_cause_ns["launch"], d.idle_ns) == (100_000, 2_000, 102_000)
    events = table(*exposed(19_000))
    (d,) = analyze(events).devices
    assert d.exposed_comm_ns == 19_000


def test_no_devices_no_findings() -> None:
    events = table(api("cudaMalloc", 0, 10))
    assert find_findings(events, analyze(events)) == ()


# --- real traces ----------------------------------------------------------------------------------

REAL = sorted(
    str(p.relative_to(SHARED_TRACES))
    for pattern in ("**/*.sqlite", "**/*.json.gz")
    for p in (SHARED_TRACES.glob(pattern) if SHARED_TRACES.is_dir() else [])
)


@pytest.mark.real
@pytest.mark.parametrize("relative", REAL or ["(none)"])
def test_findings_on_real_traces(shared_traces: Path, relative: str) -> None:
    trace = traceq.load(shared_traces / relative)
    analysis = analyze(trace.events)
    found = find_findings(trace.events, analysis)
    labels = {(d.rank, d.device) for d in analysis.devices}
    for f in found:
        assert f.id in FINDING_IDS
        assert FIRE_SHARE <= f.share <= 1.0
        assert f"{f.share:.1%}" in f.title
        assert f.evidence and all(e.text for e in f.evidence)
        assert all((e.rank, e.device) in labels for e in f.evidence if e.device is not None)
