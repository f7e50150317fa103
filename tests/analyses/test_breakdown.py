"""The step breakdown and gap attribution equal an independent brute-force computation.

The reference below walks every nanosecond of small hand-built and random timelines; it shares
no code with traceq's interval engine or its polars joins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses import CAUSES, Options, analyze
from traceq.analyses.model import Analysis

from ..builders import PID, TID, Row, api, kernel, launch, memcpy, nccl, step, table

SYNC_NAMES = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy"}


# --- the brute-force reference ---------------------------------------------------------------


@dataclass
class RefStep:
    start: int
    end: int
    compute: int
    comm: int
    exposed: int
    idle: int
    idle_by_cause: dict[str, int]


def _covered(rows: list[Row], t: int) -> bool:
    return any(r["start_ns"] <= t < r["end_ns"] for r in rows)


def reference(rows: list[Row], device: int = 0, pid: int = PID) -> tuple[list[RefStep], list[dict[str, Any]]]:
    """Per step window and per gap, by walking every ns of one device's timeline."""
    acts = [
        r for r in rows if r["kind"] in ("kernel", "memcpy", "memset") and r["device"] == device and r["pid"] == pid
    ]
    comm = [r for r in acts if r.get("is_comm")]
    compute = [r for r in acts if not r.get("is_comm")]
    apis = [r for r in rows if r["kind"] == "cuda_api" and r["pid"] == pid]
    steps = [r for r in rows if r["kind"] == "range" and r["pid"] == pid]
    busy_points = sorted({t for r in acts for t in range(r["start_ns"], r["end_ns"])})
    windows = [(s["start_ns"], s["end_ns"]) for s in steps] or [
        (min(r["start_ns"] for r in acts), max(r["end_ns"] for r in acts))
    ]
    # gaps: maximal uncovered runs between the first and last covered ns
    gaps = []
    if busy_points:
        t = busy_points[0]
        last = busy_points[-1]
        while t <= last:
            if not _covered(acts, t):
                g0 = t
                while not _covered(acts, t):
                    t += 1
                gaps.append({"start": g0, "end": t})
            t += 1
    for g in gaps:
        at_end = [r for r in acts if r["start_ns"] == g["end"]]
        at_end.sort(key=lambda r: (r.get("correlation") is None, r.get("correlation") or 0))
        nxt = at_end[0]
        g["next"] = nxt
        launches = sorted(
            (a for a in apis if nxt.get("correlation") is not None and a.get("correlation") == nxt["correlation"]),
            key=lambda a: a["start_ns"],
        )
        lc = launches[0] if launches else None
        g["launch"] = lc
        g["sync"] = None
        if lc is None:
            g["cause"] = "unknown"
        elif lc["end_ns"] <= g["start"]:
            g["cause"] = "other"
        elif nxt["kind"] == "memcpy" and nxt.get("copy_kind") == "HtoD":
            g["cause"] = "input"
        else:
            syncs = [
                a
                for a in apis
                if a["name"] in SYNC_NAMES and a["tid"] == lc["tid"] and g["start"] <= a["end_ns"] <= lc["start_ns"]
            ]
            if syncs:
                g["cause"] = "sync"
                g["sync"] = max(syncs, key=lambda a: a["end_ns"])
            else:
                g["cause"] = "launch"
    out = []
    for w0, w1 in windows:
        points = range(w0, w1)
        c = sum(_covered(compute, t) for t in points)
        m = sum(_covered(comm, t) for t in points)
        e = sum(_covered(comm, t) and not _covered(compute, t) for t in points)
        idle = sum(not _covered(acts, t) for t in points)
        by_cause = dict.fromkeys(CAUSES, 0)
        for g in gaps:
            by_cause[g["cause"]] += max(0, min(g["end"], w1) - max(g["start"], w0))
        out.append(RefStep(w0, w1, c, m, e, idle, by_cause))
    return out, gaps


def assert_matches_reference(rows: list[Row], result: Analysis, device: int = 0, pid: int = PID) -> None:
    ref_steps, ref_gaps = reference(rows, device, pid)
    steps = sorted(
        (s for s in result.steps if s.device == device and s.pid == pid), key=lambda s: (s.start_ns, s.end_ns)
    )
    ref_steps.sort(key=lambda s: (s.start, s.end))
    assert [(s.start_ns, s.end_ns) for s in steps] == [(r.start, r.end) for r in ref_steps]
    for got, want in zip(steps, ref_steps, strict=True):
        assert (got.compute_ns, got.comm_ns, got.exposed_comm_ns, got.idle_ns) == (
            want.compute,
            want.comm,
            want.exposed,
            want.idle,
        )
        assert dict(got.idle_by_cause_ns) == want.idle_by_cause
        assert got.dur_ns == got.compute_ns + got.exposed_comm_ns + got.idle_ns
    gaps = result.gap_table.filter((pl.col("device") == device) & (pl.col("pid") == pid)).sort("start_ns")
    assert gaps.select("start_ns", "end_ns").rows() == [(g["start"], g["end"]) for g in ref_gaps]
    assert gaps["cause"].to_list() == [g["cause"] for g in ref_gaps]
    assert gaps["next_correlation"].to_list() == [g["next"].get("correlation") for g in ref_gaps]
    assert gaps["launch_start_ns"].to_list() == [g["launch"] and g["launch"]["start_ns"] for g in ref_gaps]
    assert gaps["sync_end_ns"].to_list() == [g["sync"] and g["sync"]["end_ns"] for g in ref_gaps]
    device_row = next(d for d in result.devices if d.device == device and d.pid == pid)
    assert device_row.dur_ns == sum(r.end - r.start for r in ref_steps)
    assert device_row.idle_ns == sum(r.idle for r in ref_steps)
    for cause in CAUSES:
        assert device_row.idle_by_cause_ns[cause] == sum(r.idle_by_cause[cause] for r in ref_steps)


# --- hand-built timelines --------------------------------------------------------------------


def test_every_cause_on_one_hand_built_step() -> None:
    rows = [
        step(0, 1000, 1),
        launch(0, 10, 1),
        kernel(20, 100, corr=1),
        launch(150, 160, 2),
        kernel(200, 300, corr=2),  # gap 100-200: the CPU was late
        api("cudaStreamSynchronize", 300, 400),  # gap 300-440: the CPU waited
        launch(420, 430, 3),
        kernel(440, 500, corr=3),
        launch(430, 440, 4),
        nccl(450, 700, corr=4),  # comm 450-700, exposed 500-700
        api("cudaMemcpyAsync", 700, 790, corr=5),
        memcpy(800, 900, "HtoD", corr=5),  # gap 700-800: input
        kernel(950, 1100, corr=None),  # gap 900-950: no launch record
    ]
    result = analyze(table(*rows))
    (s,) = result.steps
    assert (s.dur_ns, s.compute_ns, s.comm_ns, s.exposed_comm_ns, s.idle_ns) == (1000, 390, 250, 200, 410)
    assert s.idle_by_cause_ns == {"input": 100, "sync": 140, "launch": 100, "other": 0, "unknown": 50}
    # 20 ns of idle before the first kernel lies in no gap
    assert s.idle_ns - sum(s.idle_by_cause_ns.values()) == 20
    (d,) = result.devices
    assert d.gaps_by_cause == {"input": 1, "sync": 1, "launch": 1, "other": 0, "unknown": 1}
    assert (d.kernels, d.memcpys, d.memsets, d.steps, d.window) == (5, 1, 0, 1, "steps")
    sync_gap = next(g for g in result.gaps if g.cause == "sync")
    assert sync_gap.sync is not None and sync_gap.sync.name == "cudaStreamSynchronize"
    assert sync_gap.launch is not None and sync_gap.launch.correlation == 3
    assert_matches_reference(rows, result)


def test_overlapping_kernels_on_two_streams_count_once() -> None:
    rows = [step(0, 100, 1), kernel(10, 60, stream=7), kernel(40, 90, stream=13)]
    (s,) = analyze(table(*rows)).steps
    assert (s.compute_ns, s.idle_ns) == (80, 20)
    assert_matches_reference(rows, analyze(table(*rows)))


def test_a_kernel_crossing_a_step_boundary_is_split_between_the_steps() -> None:
    rows = [step(0, 100, 1), step(100, 200, 2), kernel(80, 130, corr=1), launch(70, 75, 1)]
    result = analyze(table(*rows))
    assert [(s.step, s.compute_ns, s.idle_ns) for s in result.steps] == [(1, 20, 80), (2, 30, 70)]
    assert_matches_reference(rows, result)


def test_a_gap_without_a_launch_record_is_unknown() -> None:
    rows = [kernel(0, 10, corr=7), kernel(30, 40, corr=8)]
    result = analyze(table(*rows))
    (g,) = result.gaps
    assert (g.start_ns, g.end_ns, g.cause, g.launch) == (10, 30, "unknown", None)
    assert result.devices[0].window == "activity" and result.devices[0].steps == 0


def test_concurrent_comm_and_compute_hide_the_communication() -> None:
    rows = [step(0, 100, 1), kernel(0, 100), nccl(20, 80)]
    (s,) = analyze(table(*rows)).steps
    assert (s.compute_ns, s.comm_ns, s.exposed_comm_ns, s.idle_ns) == (100, 60, 0, 0)


def test_work_queued_before_the_gap_is_other() -> None:
    # the launch returned long before the gap began: the GPU waited for something else
    rows = [launch(0, 5, 1), launch(5, 10, 2), kernel(10, 50, corr=1), kernel(80, 90, corr=2)]
    (g,) = analyze(table(*rows)).gaps
    assert g.cause == "other"


def test_correlation_ids_join_within_the_process_only() -> None:
    rows = [
        kernel(0, 10, corr=1, pid=1),
        kernel(50, 60, corr=2, pid=1),
        launch(20, 30, 2, pid=2, tid=2),  # same id, another process
    ]
    (g,) = analyze(table(*rows)).gaps
    assert g.cause == "unknown"


def test_the_step_pattern_is_configurable_and_checked() -> None:
    from traceq.errors import InvalidArgumentError

    rows = [step(0, 50, name="train_batch 1"), kernel(0, 40)]
    assert analyze(table(*rows)).devices[0].window == "activity"
    assert analyze(table(*rows), Options(step_pattern=r"^train_batch \d+$")).devices[0].window == "steps"
    with pytest.raises(InvalidArgumentError, match="not a valid regular expression"):
        analyze(table(*rows), Options(step_pattern="("))


def test_steps_apply_to_every_device_of_their_process() -> None:
    rows = [step(0, 100, 1), kernel(0, 50, device=0), kernel(0, 80, device=1)]
    result = analyze(table(*rows))
    assert [(d.device, d.steps, d.idle_ns) for d in result.devices] == [(0, 1, 50), (1, 1, 20)]


def test_top_kernels_rank_by_total_time() -> None:
    rows = [kernel(0, 10, "a"), kernel(10, 20, "a"), kernel(20, 50, "b"), kernel(60, 61, "c")]
    stats = analyze(table(*rows), Options(top_kernels=2)).kernels
    assert [(k.name, k.count, k.total_ns, k.mean_ns, k.max_ns) for k in stats] == [
        ("b", 1, 30, 30, 30),
        ("a", 2, 20, 10, 10),
    ]
    assert stats[0].share == pytest.approx(30 / 51)


# --- random timelines -------------------------------------------------------------------------


@st.composite
def timelines(draw: st.DrawFn) -> list[Row]:
    rows: list[Row] = []
    n = draw(st.integers(1, 12))
    for corr in range(1, n + 1):
        start = draw(st.integers(0, 200))
        dur = draw(st.integers(0, 40))
        what = draw(st.sampled_from(["kernel", "comm", "h2d", "d2h"]))
        stream = draw(st.sampled_from([7, 13, 20]))
        if what == "kernel":
            rows.append(kernel(start, start + dur, corr=corr, stream=stream))
        elif what == "comm":
            rows.append(nccl(start, start + dur, corr=corr, stream=stream))
        else:
            rows.append(memcpy(start, start + dur, "HtoD" if what == "h2d" else "DtoH", corr=corr, stream=stream))
        if draw(st.booleans()):
            l0 = draw(st.integers(0, 220))
            rows.append(launch(l0, l0 + draw(st.integers(0, 15)), corr, tid=draw(st.sampled_from([TID, TID + 1]))))
    for _ in range(draw(st.integers(0, 4))):
        s0 = draw(st.integers(0, 240))
        rows.append(
            api(
                draw(st.sampled_from(sorted(SYNC_NAMES))),
                s0,
                s0 + draw(st.integers(0, 20)),
                tid=draw(st.sampled_from([TID, TID + 1])),
            )
        )
    for i in range(draw(st.integers(0, 3))):
        w0 = draw(st.integers(0, 200))
        rows.append(step(w0, w0 + draw(st.integers(0, 80)), i))
    return rows


@settings(max_examples=300, deadline=None)
@given(timelines())
def test_random_timelines_match_the_brute_force_reference(rows: list[Row]) -> None:
    if not any(r["kind"] in ("kernel", "memcpy") and r["end_ns"] > r["start_ns"] for r in rows):
        return
    result = analyze(table(*rows))
    # sync calls with equal end times are interchangeable: compare the matched end, not the name
    assert_matches_reference(rows, result)
