"""The phases: the painting (per segment, the largest key covering it) and which phase launched what."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import polars as pl
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from traceq import intervals as iv
from traceq.analyses import phases as phases_module
from traceq.analyses.model import CAUSES
from traceq.analyses.phases import _EMPTY, NO_PHASE, _device_phases, _innermost, _paint, _sum_by_key
from traceq.analyses.regimes import Busy
from traceq.api import phases

from ..builders import kernel, launch, step, trace

INTERVAL = st.tuples(st.integers(0, 30), st.integers(0, 12), st.integers(-1, 6))


@settings(deadline=None, max_examples=300)
@given(st.lists(INTERVAL, max_size=25), st.lists(st.integers(0, 45), max_size=10))
def test_each_segment_gets_the_largest_key_covering_it(drawn: list[tuple[int, int, int]], extra: list[int]) -> None:
    """Brute force over every segment; the bounds hold every start and end (as the phases' do) plus
    other points, so that intervals cover one segment, several, or none (zero length)."""
    start = np.array([s for s, _, _ in drawn], np.int64)
    end = np.array([s + d for s, d, _ in drawn], np.int64)
    key = np.array([k for _, _, k in drawn], np.int64)
    bounds = np.unique(np.concatenate([start, end, np.array(extra, np.int64)]))
    got = _paint(bounds, start, end, key)
    want = [
        max((int(k) for s, e, k in zip(start, end, key, strict=True) if s <= lo and hi <= e), default=_EMPTY)
        for lo, hi in itertools.pairwise(bounds)
    ]
    assert got.tolist() == want


@settings(deadline=None, max_examples=300)
@given(st.lists(INTERVAL, max_size=25), st.lists(st.integers(-5, 50), max_size=15))
def test_each_point_gets_the_largest_key_of_the_intervals_containing_it(
    drawn: list[tuple[int, int, int]], points: list[int]
) -> None:
    """Brute force: the host's phase of an idle segment is read at its start; intervals nest, tile,
    overlap or have zero length, and points fall before, inside, on the ends of and after them."""
    start = np.array([s for s, _, _ in drawn], np.int64)
    end = np.array([s + d for s, d, _ in drawn], np.int64)
    key = np.array([k for _, _, k in drawn], np.int64)
    at = np.array(sorted(points), np.int64)
    got = _innermost(at, start, end, key)
    want = [max((int(k) for s, e, k in zip(start, end, key, strict=True) if s <= p < e), default=_EMPTY) for p in at]
    assert got.tolist() == want


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.integers(-2, 5), st.integers(1, 40), st.integers(0, 10**12)), max_size=30),
    st.sampled_from([0, 4096]),
)
def test_lengths_are_summed_by_key_whether_or_not_runs_are_summed_first(
    runs: list[tuple[int, int, int]], run_sum_min: int
) -> None:
    """Brute force: keys come in runs (as a phase's kernels do) or alone; _EMPTY is left out.  With
    the threshold at 0 every input of more than one key is looked at for runs."""
    key = np.repeat(np.array([k for k, _, _ in runs], np.int64), [n for _, n, _ in runs])
    rng = np.random.default_rng(len(key))
    lengths = rng.integers(0, max((x for _, _, x in runs), default=1) + 1, len(key)).astype(np.int64)
    with mock.patch.object(phases_module, "_RUN_SUM_MIN", run_sum_min):
        got = _sum_by_key(key, lengths, 7)
    want = [sum(int(x) for k, x in zip(key, lengths, strict=True) if k == slot - 1) for slot in range(7)]
    assert got.tolist() == want


def test_work_launched_outside_every_phase_or_not_launched_is_no_phase() -> None:
    """Planned: a ``forward`` range [0, 100) on the launching thread; a kernel launched inside it, one
    launched after it, one with no launching call at all.  Only the first is the phase's."""
    rows = [
        step(0, 1_000, 0),
        step(0, 100, name="forward"),
        launch(10, 20, corr=1),
        launch(150, 160, corr=2),
        kernel(30, 60, corr=1),
        kernel(200, 260, corr=2),
        kernel(300, 340, corr=3),
    ]
    got = phases(trace(*rows)).select("phase", "activities").sort("phase").rows()
    assert got == sorted([(NO_PHASE, 2), ("forward", 1)])


def _apart_spans(drawn: list[tuple[int, int, int]]) -> tuple[list[int], list[int], list[int]]:
    """Spans in start order, none overlapping the next: (gap before, length, key) each."""
    starts, ends, keys, t = [], [], [], 0
    for gap, length, key in drawn:
        starts.append(t + gap)
        ends.append(t + gap + length)
        keys.append(key)
        t += gap + length
    return starts, ends, keys


def _disjoint(drawn: list[tuple[int, int]]) -> iv.Intervals:
    return iv.merge(iv.Intervals.from_arrays([s for s, _ in drawn], [s + d for s, d in drawn]))


SPAN = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(-1, 4))
PAIR = st.tuples(st.integers(0, 60), st.integers(0, 15))


@settings(deadline=None, max_examples=300)
@given(
    st.lists(SPAN, max_size=12),
    st.lists(SPAN, max_size=8),
    st.lists(PAIR, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12), st.sampled_from([0, 1, None])), max_size=5),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20), st.integers(-1, 4), st.integers(0, 1)), max_size=8),
    st.lists(st.tuples(st.sampled_from(CAUSES), st.integers(0, 60), st.integers(0, 10)), max_size=6),
)
def test_apart_activities_are_measured_as_the_painted_segments(
    compute: list[tuple[int, int, int]],
    comm: list[tuple[int, int, int]],
    windows: list[tuple[int, int]],
    gaps: list[tuple[int, int, int | None]],
    ranges: list[tuple[int, int, int, int]],
    causes: list[tuple[str, int, int]],
) -> None:
    """Where no two compute activities overlap and no two communication ones do (each kind on one
    stream; compute and communication overlap freely), measuring each activity's own ns gives what
    painting every segment with its largest key gives: every measure, every phase key."""
    c_start, c_end, c_key = _apart_spans(compute)
    m_start, m_end, m_key = _apart_spans(comm)
    acts = pl.DataFrame(
        {
            "start_ns": c_start + m_start,
            "end_ns": c_end + m_end,
            "phase_key": c_key + m_key,
            "is_comm": [False] * len(c_start) + [True] * len(m_start),
        },
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "phase_key": pl.Int64, "is_comm": pl.Boolean},
    ).sort("start_ns", "end_ns", maintain_order=True)
    gap_rows, t = [], 0
    for gap, length, thread in gaps:  # idle intervals: in start order, apart
        gap_rows.append((t + gap, t + gap + length, thread))
        t += gap + length
    gap_frame = pl.DataFrame(
        gap_rows, schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "thread": pl.Int64}, orient="row"
    )
    range_frame = pl.DataFrame(
        [(s, s + d, k, tid) for s, d, k, tid in ranges],
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "key": pl.Int64, "tid": pl.Int64},
        orient="row",
    )
    by_cause = {c: _disjoint([(s, d) for cc, s, d in causes if cc == c]) for c in {c for c, _, _ in causes}}
    win = _disjoint(windows)
    assume(len(win) > 0)
    n_keys = 6
    fast = _device_phases(acts, win, gap_frame, by_cause, range_frame, n_keys)
    painted = _device_phases(acts, win, gap_frame, by_cause, range_frame, n_keys, painted=True)
    assert {k: v.tolist() for k, v in fast.items()} == {k: v.tolist() for k, v in painted.items()}
    # The same, with the activity merged by the caller (as the breakdown hands it over).
    spans = {
        "compute": _disjoint([(s, e - s) for s, e in zip(c_start, c_end, strict=True)]),
        "comm": _disjoint([(s, e - s) for s, e in zip(m_start, m_end, strict=True)]),
        "every": _disjoint([(s, e - s) for s, e in zip(c_start + m_start, c_end + m_end, strict=True)]),
    }
    handed = _device_phases(acts, win, gap_frame, by_cause, range_frame, n_keys, merged=Busy(**spans))
    assert {k: v.tolist() for k, v in handed.items()} == {k: v.tolist() for k, v in painted.items()}


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10), st.integers(-1, 4)), max_size=10),
    st.lists(SPAN, max_size=6),
    st.lists(PAIR, min_size=1, max_size=4),
)
def test_overlapping_activities_are_measured_as_the_painted_segments_whatever_union_is_handed(
    compute: list[tuple[int, int, int]], comm: list[tuple[int, int, int]], windows: list[tuple[int, int]]
) -> None:
    """Compute activities that may overlap (several streams), zero-length ones included: the
    measures equal the painted segments', with or without the caller's unions (which tell whether
    the compute activities are apart without copying them)."""
    m_start, m_end, m_key = _apart_spans(comm)
    acts = pl.DataFrame(
        {
            "start_ns": [s for s, _, _ in compute] + m_start,
            "end_ns": [s + d for s, d, _ in compute] + m_end,
            "phase_key": [k for _, _, k in compute] + m_key,
            "is_comm": [False] * len(compute) + [True] * len(m_start),
        },
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "phase_key": pl.Int64, "is_comm": pl.Boolean},
    ).sort("start_ns", "end_ns", maintain_order=True)
    win = _disjoint(windows)
    assume(len(win) > 0)
    no_gaps = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "thread": pl.Int64})
    no_ranges = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "key": pl.Int64, "tid": pl.Int64})
    painted = _device_phases(acts, win, no_gaps, {}, no_ranges, 6, painted=True)
    unions = Busy(
        compute=_disjoint([(s, d) for s, d, _ in compute]),
        comm=_disjoint([(s, e - s) for s, e in zip(m_start, m_end, strict=True)]),
        every=_disjoint([(s, d) for s, d, _ in compute] + [(s, e - s) for s, e in zip(m_start, m_end, strict=True)]),
    )
    for merged in (None, unions):
        found = _device_phases(acts, win, no_gaps, {}, no_ranges, 6, merged=merged)
        assert {k: v.tolist() for k, v in found.items()} == {k: v.tolist() for k, v in painted.items()}
