"""The phases' painting: per segment between bounds, the largest key of the intervals covering it."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses.phases import _EMPTY, _paint

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
