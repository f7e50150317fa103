"""Sorted searches: the count gives NumPy's binary searches' answer, value for value."""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq import sorted_search
from traceq.sorted_search import COUNT_FROM, counted, distinct, is_sorted, searchsorted, searchsorted_from

Side = Literal["left", "right"]
SIDES: st.SearchStrategy[Side] = st.sampled_from(["left", "right"])
VALUES = st.lists(st.integers(-20, 20), max_size=40)  # (a small range: many ties, within and across)


@settings(deadline=None, max_examples=500)
@given(VALUES, VALUES, SIDES)
def test_counting_gives_each_sorted_value_its_binary_search_answer(a: list[int], v: list[int], side: Side) -> None:
    """Ties inside ``a``, inside ``v`` and between them; values before, among and after ``a``."""
    array, values = np.array(sorted(a), np.int64), np.array(sorted(v), np.int64)
    assert counted(array, values, side).tolist() == np.searchsorted(array, values, side).tolist()


def test_long_sorted_values_are_counted_and_others_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    array = np.sort(rng.integers(0, 1_000, 500))
    calls: list[int] = []
    real = sorted_search.counted

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(sorted_search, "counted", counting)
    long_sorted = np.sort(rng.integers(-10, 1_010, COUNT_FROM))
    unsorted = rng.integers(-10, 1_010, COUNT_FROM)
    short = long_sorted[:: COUNT_FROM // 100]
    for values in (long_sorted, unsorted, short):
        for side in get_args(Side):
            assert np.array_equal(searchsorted(array, values, side), np.searchsorted(array, values, side))
    assert len(calls) == 2  # the long sorted values, on each side


@given(VALUES)
def test_is_sorted_says_whether_the_values_never_decrease(v: list[int]) -> None:
    assert is_sorted(np.array(v, np.int64)) == (v == sorted(v))


@settings(deadline=None, max_examples=500)
@given(VALUES, st.lists(st.tuples(st.integers(-20, 20), st.integers(0, 10), st.integers(0, 1)), max_size=40), SIDES)
def test_a_search_from_a_lower_answer_gives_the_binary_search_answer(
    a: list[int], pairs: list[tuple[int, int, int]], side: Side
) -> None:
    """Each value ``v = s + d`` searched from the answer for ``s`` (or from 0): ties, values that stay
    at their lower bound, values that pass one or many of ``a``, and values past its end."""
    array = np.array(sorted(a), np.int64)
    lows = np.array([s for s, _, _ in pairs], np.int64)
    values = np.array([s + d for s, d, _ in pairs], np.int64)
    lower = np.searchsorted(array, lows, side) * np.array([keep for _, _, keep in pairs], np.intp)
    found = searchsorted_from(array, values, lower.astype(np.intp), side)
    assert found.tolist() == np.searchsorted(array, values, side).tolist()


@given(st.lists(st.integers(min_value=-(2**62), max_value=2**62), max_size=200))
def test_distinct_is_numpys_sorted_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    for runs in (False, True):  # the merge sort's answer is the same, whatever the order
        result = distinct(array, runs=runs)
        assert result.dtype == np.int64
        assert np.array_equal(result, np.unique(array))


@given(st.lists(st.lists(st.integers(min_value=-(2**62), max_value=2**62), max_size=40), max_size=6))
def test_distinct_of_sorted_runs_is_numpys_sorted_unique(runs: list[list[int]]) -> None:
    array = np.concatenate([np.sort(np.array(r, dtype=np.int64)) for r in runs] or [np.array([], np.int64)])
    assert np.array_equal(distinct(array, runs=True), np.unique(array))
