"""The phases: the painting (per segment, the largest key covering it) and which phase launched what."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses.phases import _EMPTY, NO_PHASE, _innermost, _paint
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
