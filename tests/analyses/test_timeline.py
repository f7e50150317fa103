"""The timeline excerpt: which window, which bars and gaps, labels, and downsampling."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceq
from traceq.analyses import analyze
from traceq.analyses.model import StepBreakdown
from traceq.analyses.timeline import TimelineExcerpt, pick_steps, timeline_excerpt
from traceq.report.html.charts_timeline import timeline_rows

from ..builders import api, kernel, launch, memcpy, nccl, step, table

# One process on GPU 0.  Steps: [0, 1000) 1.0 µs, [1000, 2500) 1.5 µs, [2500, 3600) 1.1 µs; the
# median is step 2.  Launch latency 40 ns (the smallest start-after-launch: gemm_a, the copy).
# Gaps (dominant cause): [0, 100) launch (from gemm_a's launch at 50; before it, CPU work in the
# step), [900, 950) dependency (gemm_b was launched at 95, long before), [1400, 1500) launch,
# [2000, 2700) sync (blocked in cudaStreamSynchronize 2050-2600), [3000, 3100) launch (the copy's
# cudaMemcpyAsync at 3050: no data loader is recorded, so this is no input stall), [3200, 3300)
# cpu (no launch is recorded for the kernel: the thread that issued the copy before it was inside
# its step).
EVENTS = table(
    step(0, 1000, 0),
    step(1000, 2500, 1),
    step(2500, 3600, 2),
    launch(50, 60, 1),
    kernel(100, 900, "gemm_a", corr=1),
    launch(90, 95, 2),
    kernel(950, 1400, "gemm_b", corr=2),
    launch(1420, 1450, 3),
    nccl(1500, 2000, corr=3),
    api("cudaStreamSynchronize", 2050, 2600),
    launch(2612, 2620, 4),
    kernel(2700, 3000, "gemm_c", corr=4),
    api("cudaMemcpyAsync", 3050, 3060, corr=5),
    memcpy(3100, 3200, corr=5),
    kernel(3300, 3700, "no_launch_recorded", corr=6),
)


def _steps(*durations: int) -> list[StepBreakdown]:
    out, start = [], 0
    for i, dur in enumerate(durations):
        out.append(StepBreakdown(None, 0, 1, i, f"step{i}", start, start + dur, dur, 0, 0, 0, dur, {}, False))
        start += dur
    return out


def test_pick_steps_centres_on_the_median_step_and_clamps_at_the_ends() -> None:
    windows = _steps(50, 10, 30, 20, 40)  # median duration 30: step 2
    assert [s.step for s in pick_steps(windows, 3)] == [1, 2, 3]
    assert [s.step for s in pick_steps(windows, 1)] == [2]
    assert [s.step for s in pick_steps(windows, 9)] == [0, 1, 2, 3, 4]
    edge = _steps(5, 10, 20, 30)  # lower median 10: step 1; 3 steps from step 0
    assert [s.step for s in pick_steps(edge, 3)] == [0, 1, 2]
    late = _steps(50, 40, 30, 10)  # lower median 30: step 2; clamped to the last three
    assert [s.step for s in pick_steps(late, 3)] == [1, 2, 3]
    assert pick_steps([], 3) == ()


def test_one_step_window_holds_its_bars_clipped_and_its_gaps_with_labels() -> None:
    excerpt = timeline_excerpt(EVENTS, analyze(EVENTS), steps=1)
    assert excerpt is not None
    assert (excerpt.start_ns, excerpt.end_ns, excerpt.steps) == (2500, 3600, ("ProfilerStep#2",))
    bars = [(b.kind, b.name, b.stream, b.start_ns, b.end_ns) for b in excerpt.bars]
    assert bars == [
        ("kernel", "gemm_c", 7, 2700, 3000),
        ("memcpy", "[CUDA memcpy HtoD]", 7, 3100, 3200),
        ("kernel", "no_launch_recorded", 7, 3300, 3600),  # clipped at the window's end
    ]
    assert excerpt.bars_total == 3
    gaps = [(g.start_ns, g.end_ns, g.cause, g.label) for g in excerpt.gaps]
    assert gaps == [
        (
            2500,
            2700,
            "sync",
            "sync: cudaStreamSynchronize returned 12 ns before cudaLaunchKernel; also cpu 9%, launch 7%, dependency 6%",
        ),
        (3000, 3100, "launch", "launch: cudaMemcpyAsync called 50 ns into the gap; also cpu 50%"),
        (
            3200,
            3300,
            "cpu",
            "cpu: no launch recorded for no_launch_recorded; the host that last fed the GPU ran CPU work",
        ),
    ]


def test_three_steps_show_every_stream_and_every_cause() -> None:
    excerpt = timeline_excerpt(EVENTS, analyze(EVENTS))
    assert excerpt is not None
    assert (excerpt.start_ns, excerpt.end_ns) == (0, 3600)
    assert {b.kind for b in excerpt.bars} == {"kernel", "comm", "memcpy"}
    assert [b.stream for b in excerpt.bars if b.kind == "comm"] == [20]
    labels = {(g.start_ns, g.cause): g.label for g in excerpt.gaps}
    assert labels[(900, "dependency")] == (
        "dependency: cudaLaunchKernel returned 805 ns before the gap; the queued work waited (another stream, an "
        "event, a peer)"
    )
    assert labels[(1400, "launch")] == (
        "launch: cudaLaunchKernel called 20 ns into the gap; also cpu 20%, dependency 10%"
    )
    assert timeline_rows(excerpt) == [
        "GPU 0 · CPU thread 101",
        "GPU 0 · idle gaps",
        "GPU 0 · stream 7",
        "GPU 0 · stream 20",
    ]


def test_the_launching_thread_shows_its_calls_coloured_by_the_cause_they_explain() -> None:
    other_thread = api("cudaMalloc", 10, 20, tid=999)  # launches nothing on the device: not drawn
    events = table(*EVENTS.to_dicts(), other_thread)
    excerpt = timeline_excerpt(events, analyze(events))
    assert excerpt is not None
    spans = [(c.tid, c.kind, c.name, c.start_ns, c.end_ns) for c in excerpt.cpu]
    assert spans == [
        (101, "launch", "cudaLaunchKernel", 50, 60),
        (101, "launch", "cudaLaunchKernel", 90, 95),
        (101, "launch", "cudaLaunchKernel", 1420, 1450),
        (101, "sync", "cudaStreamSynchronize", 2050, 2600),
        (101, "launch", "cudaLaunchKernel", 2612, 2620),
        (101, "launch", "cudaMemcpyAsync", 3050, 3060),
    ]
    assert excerpt.cpu_total == len(spans)
    # each gap names the call behind it: the sync for a sync gap, else the launch that ended it
    calls = {(g.start_ns, g.cause): (g.call_tid, g.call_start_ns, g.call_end_ns) for g in excerpt.gaps}
    assert calls[(2000, "sync")] == (101, 2050, 2600)
    assert calls[(1400, "launch")] == (101, 1420, 1450)
    assert calls[(3200, "cpu")] == (None, None, None)  # no launch recorded for the kernel after it


def test_without_step_ranges_the_window_is_the_whole_activity() -> None:
    events = table(launch(0, 5, 1), kernel(10, 20, corr=1), launch(30, 35, 2), kernel(40, 60, corr=2))
    excerpt = timeline_excerpt(events, analyze(events))
    assert excerpt is not None
    assert (excerpt.start_ns, excerpt.end_ns, excerpt.steps) == (10, 60, ("(whole trace)",))
    # the launch at 30 returned at 35; the kernel started 5 ns later (the latency): all launch, from
    # its start; before it (20-30) nothing is recorded on the thread (no step range): unknown
    assert [(g.start_ns, g.end_ns, g.cause) for g in excerpt.gaps] == [(20, 40, "launch")]


def test_no_gpu_activity_gives_no_excerpt() -> None:
    events = table(api("cudaMalloc", 0, 10), step(0, 100, 1))
    assert timeline_excerpt(events, analyze(events)) is None


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        timeline_excerpt(EVENTS, analyze(EVENTS), max_bars=0)


def test_downsampling_keeps_the_longest_bars_and_counts_them_all() -> None:
    # 60 kernels of lengths 1..60 ns (some repeated), back to back inside one step.
    lengths = [(i * 37) % 61 + 1 for i in range(60)]
    rows, t = [step(0, 10_000, 1)], 100
    for i, length in enumerate(lengths):
        rows += [launch(t - 5, t - 1, i + 1), kernel(t, t + length, f"k{i}", corr=i + 1, stream=7 + i % 3)]
        t += length + 10
    events = table(*rows)
    excerpt = timeline_excerpt(events, analyze(events), max_bars=10)
    assert excerpt is not None
    assert excerpt.bars_total == len(lengths)
    kept = sorted((b.end_ns - b.start_ns for b in excerpt.bars), reverse=True)
    assert kept == sorted(lengths, reverse=True)[:10]
    # Ties at the cut go to the earliest start; the rows come back in stream, then time order.
    expected = sorted(((-length, i) for i, length in enumerate(lengths)))[:10]
    assert sorted(b.name for b in excerpt.bars) == sorted(f"k{i}" for _, i in expected)
    order = [(b.stream, b.start_ns) for b in excerpt.bars]
    assert order == sorted(order)


@pytest.fixture(scope="module")
def ranks(samples: Path) -> tuple[traceq.Trace, traceq.Analysis, TimelineExcerpt]:
    trace = traceq.load(samples / "ranks")
    analysis = traceq.analyze(trace)
    excerpt = timeline_excerpt(trace.events, analysis)
    assert excerpt is not None
    return trace, analysis, excerpt


def test_multi_rank_excerpt_matches_an_independent_selection(
    ranks: tuple[traceq.Trace, traceq.Analysis, TimelineExcerpt],
) -> None:
    trace, analysis, excerpt = ranks
    lo, hi = excerpt.start_ns, excerpt.end_ns
    first = analysis.devices[0]
    mine = sorted((s for s in analysis.steps if s.pid == first.pid), key=lambda s: s.start_ns)
    assert excerpt.steps == tuple(s.name for s in mine[:3])
    assert (lo, hi) == (mine[0].start_ns, mine[2].end_ns)

    activity = trace.events.filter(
        pl.col("kind").is_in(["kernel", "memcpy", "memset"]) & (pl.col("start_ns") < hi) & (pl.col("end_ns") > lo)
    )
    assert excerpt.bars_total == activity.height == len(excerpt.bars)
    assert all(lo <= b.start_ns <= b.end_ns <= hi for b in excerpt.bars)
    per_stream = activity.group_by("rank", "device", "stream").len()
    drawn: dict[tuple[int | None, int, int | None], int] = {}
    for b in excerpt.bars:
        drawn[(b.rank, b.device, b.stream)] = drawn.get((b.rank, b.device, b.stream), 0) + 1
    assert drawn == {(r, d, s): n for r, d, s, n in per_stream.iter_rows()}

    gaps = analysis.gap_table.filter((pl.col("start_ns") < hi) & (pl.col("end_ns") > lo))
    expected = sorted(
        (r, d, max(s, lo), min(e, hi), c)
        for r, d, s, e, c in gaps.select("rank", "device", "start_ns", "end_ns", "cause").iter_rows()
    )
    assert sorted((g.rank, g.device, g.start_ns, g.end_ns, g.cause) for g in excerpt.gaps) == expected
    assert expected, "the sample has gaps inside the window"

    rows = timeline_rows(excerpt)
    assert rows[:4] == [
        "rank 0 · GPU 0 · CPU thread 48213",
        "rank 0 · GPU 0 · idle gaps",
        "rank 0 · GPU 0 · stream 7",
        "rank 0 · GPU 0 · stream 20",
    ]
    assert len(rows) == 4 * 4  # per rank: its launching thread, its gaps, two streams


def test_max_devices_limits_the_devices_and_downsampling_is_deterministic(
    ranks: tuple[traceq.Trace, traceq.Analysis, TimelineExcerpt],
) -> None:
    trace, analysis, excerpt = ranks
    two = timeline_excerpt(trace.events, analysis, max_devices=2, max_bars=100)
    assert two is not None
    assert {(b.rank, b.device) for b in two.bars} == {(0, 0), (1, 1)}
    assert two.bars_total == sum(1 for b in excerpt.bars if b.rank in (0, 1))
    assert len(two.bars) == 100
    again = timeline_excerpt(trace.events, analysis, max_devices=2, max_bars=100)
    assert again == two
    shortest_kept = min(b.end_ns - b.start_ns for b in two.bars)
    dropped = [b for b in excerpt.bars if b.rank in (0, 1) and b not in two.bars]
    assert all(b.end_ns - b.start_ns <= shortest_kept for b in dropped)
