"""The step breakdown equals an independent brute-force computation; its idle by cause, the oracle's.

The reference below walks every nanosecond of small hand-built and random timelines for compute,
communication, exposed communication and idle time; the idle time's causes come from the
attribution oracle (``attribution_oracle.py``, which walks every elementary segment with the
documented rules).  Neither shares code with traceq's interval engine or its polars joins.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses import CAUSES, Options, analyze, breakdown
from traceq.analyses.model import Analysis
from traceq.analyses.steps import only_dev
from traceq.errors import TraceqError
from traceq.literal_columns import with_literals

from ..builders import PID, TID, Row, api, kernel, launch, memcpy, nccl, step, table
from ..test_literal_columns import held_bytes
from .attribution_oracle import attribute

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


def _covered(rows: list[Row], t: int) -> bool:
    return any(r["start_ns"] <= t < r["end_ns"] for r in rows)


def reference(rows: list[Row], device: int = 0, pid: int = PID) -> list[RefStep]:
    """Per step window, by walking every ns of one device's timeline."""
    acts = [
        r for r in rows if r["kind"] in ("kernel", "memcpy", "memset") and r["device"] == device and r["pid"] == pid
    ]
    comm = [r for r in acts if r.get("is_comm")]
    compute = [r for r in acts if not r.get("is_comm")]
    steps = [r for r in rows if r["kind"] == "range" and r["pid"] == pid]
    windows = [(s["start_ns"], s["end_ns"]) for s in steps] or [
        (min(r["start_ns"] for r in acts), max(r["end_ns"] for r in acts))
    ]
    out = []
    for w0, w1 in windows:
        points = range(w0, w1)
        c = sum(_covered(compute, t) for t in points)
        m = sum(_covered(comm, t) for t in points)
        e = sum(_covered(comm, t) and not _covered(compute, t) for t in points)
        idle = sum(not _covered(acts, t) for t in points)
        out.append(RefStep(w0, w1, c, m, e, idle))
    return out


def assert_matches_reference(rows: list[Row], result: Analysis, device: int = 0, pid: int = PID) -> None:
    ref_steps = sorted(reference(rows, device, pid), key=lambda s: (s.start, s.end))
    steps = sorted(
        (s for s in result.steps if s.device == device and s.pid == pid), key=lambda s: (s.start_ns, s.end_ns)
    )
    assert [(s.start_ns, s.end_ns) for s in steps] == [(r.start, r.end) for r in ref_steps]
    oracle = attribute(table(*rows))[("test.trace", pid, device)]
    causes = sorted(oracle.windows, key=lambda w: (w.start_ns, w.end_ns))
    for got, want, by_cause in zip(steps, ref_steps, causes, strict=True):
        assert (got.compute_ns, got.comm_ns, got.exposed_comm_ns, got.idle_ns) == (
            want.compute,
            want.comm,
            want.exposed,
            want.idle,
        )
        assert dict(got.idle_by_cause_ns) == dict(by_cause.causes_ns)
        assert sum(got.idle_by_cause_ns.values()) == got.idle_ns
        assert got.dur_ns == got.compute_ns + got.exposed_comm_ns + got.idle_ns
    gaps = result.gap_table.filter((pl.col("device") == device) & (pl.col("pid") == pid)).sort("start_ns")
    assert gaps.select("start_ns", "end_ns", "kind").rows() == [(g.start_ns, g.end_ns, g.kind) for g in oracle.gaps]
    device_row = next(d for d in result.devices if d.device == device and d.pid == pid)
    assert device_row.dur_ns == sum(r.end - r.start for r in ref_steps)
    assert device_row.idle_ns == sum(r.idle for r in ref_steps)
    for cause in CAUSES:
        assert device_row.idle_by_cause_ns[cause] == sum(w.causes_ns[cause] for w in causes)


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
    # Launch latency 10 ns (the smallest delay from a launch's return to its work). By hand, per idle
    # interval: [0, 20) launch (issuing kernel 1 from 0); [100, 200) cpu 50 (the step, before the
    # launch at 150), launch 20 (150 to 160 + 10), dependency 30 (queued from 170, started at 200);
    # [300, 440) sync 100 (blocked in cudaStreamSynchronize, which began as the GPU went idle and so
    # drained nothing), cpu 20, launch 20; [700, 800) launch 100 (cudaMemcpyAsync queues the copy:
    # no data loader is recorded, so no input stall); [900, 950) cpu 50 (no launch recorded for the
    # last kernel: the host that launched the copy before it, inside its step).
    assert s.idle_by_cause_ns == {
        "input": 0,
        "sync": 100,
        "compile": 0,
        "launch": 160,
        "cpu": 120,
        "dependency": 30,
        "unknown": 0,
    }
    assert sum(s.idle_by_cause_ns.values()) == s.idle_ns
    (d,) = result.devices
    assert d.launch_latency_ns == 10
    assert d.gaps_by_cause == {
        "input": 0,
        "sync": 1,
        "compile": 0,
        "launch": 2,
        "cpu": 2,
        "dependency": 0,
        "unknown": 0,
    }
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
    assert (g.start_ns, g.end_ns, g.cause, g.launch, g.kind) == (10, 30, "unknown", None, "between")
    assert result.devices[0].window == "activity" and result.devices[0].steps == 0


def test_concurrent_comm_and_compute_hide_the_communication() -> None:
    rows = [step(0, 100, 1), kernel(0, 100), nccl(20, 80)]
    (s,) = analyze(table(*rows)).steps
    assert (s.compute_ns, s.comm_ns, s.exposed_comm_ns, s.idle_ns) == (100, 60, 0, 0)


def test_work_queued_before_the_gap_is_a_dependency() -> None:
    # The first kernel starts 5 µs after its launch returned (the launch latency); the second was
    # launched 10 µs in, long before the gap [50, 80) µs began: queued, the GPU waited on something else.
    rows = [
        step(0, 100_000, 1),
        launch(0, 5_000, 1),
        launch(5_000, 10_000, 2),
        kernel(10_000, 50_000, corr=1),
        kernel(80_000, 90_000, corr=2),
    ]
    result = analyze(table(*rows))
    assert result.devices[0].launch_latency_ns == 5_000
    (g,) = [g for g in result.gaps if g.kind == "between"]
    assert (g.start_ns, g.end_ns, g.cause, g.causes_ns["dependency"]) == (50_000, 80_000, "dependency", 30_000)


def test_correlation_ids_join_within_the_process_only() -> None:
    rows = [
        kernel(0, 10, corr=1, pid=1),
        kernel(50, 60, corr=2, pid=1),
        launch(20, 30, 2, pid=2, tid=2),  # same id, another process
    ]
    (g,) = analyze(table(*rows)).gaps
    assert (g.cause, g.launch) == ("unknown", None)


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
    assert_matches_reference(rows, analyze(table(*rows)))


@pytest.mark.parametrize("where", ["launch_link", "operator_table_of", "activity_phases", "attribute"])
def test_an_error_on_either_thread_reaches_the_caller_as_it_was_raised(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The launch link, the operators and each activity's phase are worked out on a second thread,
    the attribution on the calling one: an error in any of them is the analysis' error, unchanged."""

    class Planted(TraceqError):
        pass

    def fail(*args: object, **kwargs: object) -> None:
        raise Planted(f"planted in {where}")

    monkeypatch.setattr(breakdown, where, fail)
    events = table(step(0, 100, 1), launch(1, 2, 1), kernel(5, 10, corr=1))
    with pytest.raises(Planted, match=f"planted in {where}"):
        analyze(events)


@pytest.mark.parametrize(
    ("devs", "expected"),
    [([3, 3, 3], 3), ([0], 0), ([], None), ([1, 2, 1], None), ([1, None], None), ([None], None)],
)
def test_only_dev_names_the_dev_when_every_row_has_the_same_one(devs: list[int | None], expected: int | None) -> None:
    assert only_dev(pl.DataFrame({"dev": pl.Series(devs, dtype=pl.UInt32), "x": range(len(devs))})) == expected


def test_only_dev_reads_a_literal_dev_without_making_it_an_array() -> None:
    dtypes = {"dev": pl.UInt32(), "x": pl.Int64()}
    rows = with_literals(pl.DataFrame({"x": range(1000)}), {"dev": 3}, dtypes, ["dev", "x"])
    assert only_dev(rows) == 3
    assert held_bytes(rows, "dev") < 64  # still one value, not 1000
