"""Scenarios: impossible shapes are refused, and each planted problem (knob) moves the ground truth the
way its name says, measured by brute force on the ground truth.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pytest

from tracegen import KERNELS, MEMORY_BOUND_CLASSES, Knobs, Scenario, preset

from .planted import GPU_KINDS, timeline, truth


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
