"""The interval engine, specified two ways.

1. Hand-written examples with the expected answer beside them (touching, nested, zero-length,
   empty, unsorted, values near 1e18, malformed input).
2. Hypothesis properties checked against a brute-force reference: a boolean coverage array over
   the small integer timeline ``0..TIMELINE``, where nanosecond ``t`` is covered by ``[s, e)`` iff
   ``s <= t < e``.  The reference is deliberately naive (Python loops, one cell per ns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from unittest import mock

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq import window_slices
from traceq.errors import InvalidArgumentError
from traceq.intervals import (
    Intervals,
    clip,
    complement,
    gaps,
    gaps_by_key,
    intersect,
    measure,
    measure_by_key,
    measure_in_windows,
    merge,
    merge_by_key,
    overlap_with_windows,
    overlaps,
    subtract,
    union,
)

Pairs = list[tuple[int, int]]
TIMELINE = 200
E18 = 10**18
SETTINGS = settings(deadline=None, max_examples=300)


def iv(*pairs: tuple[int, int]) -> Intervals:
    """``iv((0, 5), (7, 9))`` -> Intervals [0, 5), [7, 9)."""
    return Intervals.from_arrays([s for s, _ in pairs], [e for _, e in pairs])


def pairs_of(x: Intervals) -> Pairs:
    return list(zip(x.start_ns.tolist(), x.end_ns.tolist(), strict=True))


# --- the brute-force reference ----------------------------------------------------------------


def covered(x: Intervals) -> npt.NDArray[np.bool_]:
    """One cell per ns of the timeline: True where some interval of ``x`` covers it."""
    cells = np.zeros(TIMELINE, dtype=bool)
    for s, e in pairs_of(x):
        cells[max(s, 0) : max(min(e, TIMELINE), 0)] = True  # windows may reach past the timeline
    return cells


def runs(cells: npt.NDArray[np.bool_]) -> Pairs:
    """Maximal runs of True cells as half-open ``(start, end)`` pairs, in order."""
    out: Pairs = []
    start = None
    for t, on in enumerate([*cells.tolist(), False]):
        if on and start is None:
            start = t
        elif not on and start is not None:
            out.append((start, t))
            start = None
    return out


def window_cells(s: int, e: int) -> npt.NDArray[np.bool_]:
    return covered(iv((s, e)))


def assert_normalised(x: Intervals) -> None:
    """Sorted, non-empty, disjoint and not touching."""
    starts, ends = x.start_ns.tolist(), x.end_ns.tolist()
    assert all(s < e for s, e in zip(starts, ends, strict=True)), "an interval is empty"
    assert all(e < s for e, s in zip(ends[:-1], starts[1:], strict=True)), "intervals overlap, touch or are unsorted"


# --- strategies -------------------------------------------------------------------------------

_long = st.tuples(st.integers(0, TIMELINE), st.integers(0, TIMELINE)).map(lambda p: (min(p), max(p)))
_short = st.tuples(st.integers(0, TIMELINE), st.integers(0, 12)).map(lambda p: (p[0], min(p[0] + p[1], TIMELINE)))
_pairs = st.lists(st.one_of(_short, _short, _long), max_size=15)

interval_sets = _pairs.map(lambda ps: iv(*ps))
"""Unsorted, overlapping, nested, touching, duplicated and zero-length intervals on 0..TIMELINE."""

# Windows also start or end outside the timeline, before and after every interval.
_window = st.tuples(st.integers(-30, TIMELINE + 30), st.integers(0, 60)).map(lambda p: (p[0], p[0] + p[1]))
window_sets = st.lists(_window, max_size=12).map(lambda ps: iv(*ps))


# --- hand-written examples --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_pairs", "merged"),
    [
        ([], []),  # nothing in, nothing out
        ([(0, 5), (5, 9)], [(0, 9)]),  # touching intervals fuse
        ([(0, 10), (2, 3), (4, 6)], [(0, 10)]),  # nested intervals vanish into their parent
        ([(3, 3), (7, 7)], []),  # zero-length intervals cover nothing
        ([(0, 4), (4, 4), (4, 8)], [(0, 8)]),  # a zero-length interval between touching ones
        ([(8, 9), (0, 2), (1, 3), (5, 6)], [(0, 3), (5, 6), (8, 9)]),  # unsorted, overlapping
        ([(0, 2), (0, 2), (0, 2)], [(0, 2)]),  # duplicates
        ([(0, 2), (3, 5)], [(0, 2), (3, 5)]),  # a 1 ns hole keeps them apart
        ([(E18, E18 + 5), (E18 + 5, E18 + 7), (E18 + 9, 2 * E18)], [(E18, E18 + 7), (E18 + 9, 2 * E18)]),
    ],
)
def test_merge_examples(given_pairs: Pairs, merged: Pairs) -> None:
    assert pairs_of(merge(iv(*given_pairs))) == merged


def test_set_operation_examples() -> None:
    a = iv((0, 10), (20, 30))
    b = iv((5, 25), (30, 40))
    assert pairs_of(union(a, b)) == [(0, 40)]  # [20, 30) touches [30, 40)
    assert pairs_of(intersect(a, b)) == [(5, 10), (20, 25)]
    assert pairs_of(subtract(a, b)) == [(0, 5), (25, 30)]
    assert pairs_of(subtract(b, a)) == [(10, 20), (30, 40)]
    assert pairs_of(intersect(iv((0, 5)), iv((5, 9)))) == []  # touching is not overlapping
    assert pairs_of(complement(a, -5, 35)) == [(-5, 0), (10, 20), (30, 35)]
    assert pairs_of(complement(a, 0, 30)) == [(10, 20)]
    assert pairs_of(complement(iv(), 3, 7)) == [(3, 7)]  # nothing ran: all idle
    assert pairs_of(complement(a, 12, 12)) == []  # a zero-length window has nothing to be idle in
    assert pairs_of(clip(a, 5, 25)) == [(5, 10), (20, 25)]
    assert pairs_of(clip(a, 10, 20)) == []  # the window is exactly the hole
    assert pairs_of(gaps(iv((0, 10), (15, 20), (18, 30), (40, 41)))) == [(10, 15), (30, 40)]
    assert pairs_of(gaps(iv((0, 10)))) == []
    assert pairs_of(gaps(iv())) == []
    assert measure(iv((0, 10), (5, 15), (20, 20))) == 15
    assert measure(iv()) == 0
    assert measure(iv((E18, 2 * E18), (3 * E18, 4 * E18))) == 2 * E18
    assert union(a, b, iv((100, 101))) == iv((0, 40), (100, 101))  # union takes any number of sets


def test_measure_in_windows_examples() -> None:
    busy = iv((0, 10), (20, 30))
    windows = iv((0, 30), (5, 25), (10, 20), (12, 12), (-50, -40), (25, 100), (0, 30))
    expected = [20, 10, 0, 0, 0, 5, 20]  # overlapping, repeated, zero-length and outside windows
    assert measure_in_windows(busy, windows).tolist() == expected
    assert measure_in_windows(iv(), windows).tolist() == [0] * 7
    assert measure_in_windows(busy, iv()).tolist() == []
    # per interval of the first argument, unmerged and in its own order
    assert overlap_with_windows(iv((25, 40), (0, 5), (0, 5), (12, 12)), busy).tolist() == [5, 5, 5, 0]


def test_grouped_examples() -> None:
    x = iv((0, 5), (5, 9), (0, 3), (10, 12), (4, 4), (7, 8))
    key = [1, 1, 0, 1, 2, 0]
    keys, merged = merge_by_key(x, key)
    assert keys.tolist() == [0, 0, 1, 1]
    assert pairs_of(merged) == [(0, 3), (7, 8), (0, 9), (10, 12)]
    unique, ns = measure_by_key(x, key)
    assert unique.tolist() == [0, 1, 2]
    assert ns.tolist() == [4, 11, 0]  # key 2 has only a zero-length interval
    gap_keys, gap_ivs = gaps_by_key(x, key)
    assert gap_keys.tolist() == [0, 1]
    assert pairs_of(gap_ivs) == [(3, 7), (9, 10)]


def test_grouped_with_keys_too_far_apart_to_pack() -> None:
    x = iv((0, 5), (3, 9), (0, 2), (E18, 2 * E18))
    keys, merged = merge_by_key(x, [2**62, 2**62, -(2**62), -(2**62)])
    assert keys.tolist() == [-(2**62), -(2**62), 2**62]
    assert pairs_of(merged) == [(0, 2), (E18, 2 * E18), (0, 9)]
    keys, merged = merge_by_key(iv((3, 3), (5, 5)), [2**62, -(2**62)])
    assert (keys.tolist(), pairs_of(merged)) == ([], [])  # nothing but zero-length intervals


def test_a_normalised_input_comes_back_as_is() -> None:
    x = iv((0, 5), (6, 9))
    assert merge(x) is x
    assert clip(x, -1, 100) is x


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: iv((5, 4)), "1 interval(s) end before they start (first: index 0, [5, 4))"),
        (lambda: Intervals.from_arrays([0, 1], [2]), "start_ns has 2 values but end_ns has 1"),
        (lambda: Intervals.from_arrays([0.5], [2.0]), "start_ns must hold integer ns, got dtype float64"),
        (lambda: Intervals.from_arrays([[0]], [[2]]), "start_ns must be 1-D, got shape (1, 1)"),
        (
            lambda: Intervals.from_arrays([0], np.array([2**63], dtype=np.uint64)),
            "end_ns has values beyond the int64 range",
        ),
        (lambda: complement(iv((0, 5)), 9, 3), "window [9, 3) ends before it starts"),
        (lambda: clip(iv((0, 5)), 0, 2**63), "window_end_ns must be an int64 number of ns"),
        (lambda: merge_by_key(iv((0, 5)), [1, 2]), "key has 2 values for 1 intervals"),
        (
            lambda: Intervals.from_polars(pl.Series([0, None]), pl.Series([1, 2])),
            "start_ns has 1 null value(s). Drop or fill them first",
        ),
    ],
)
def test_malformed_input_is_refused(make: Callable[[], object], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        make()
    assert message in str(raised.value)


def test_polars_round_trip() -> None:
    frame = pl.DataFrame({"start_ns": [5, 0], "end_ns": [9, 6], "name": ["b", "a"]})
    x = Intervals.from_frame(frame)
    assert pairs_of(x) == [(5, 9), (0, 6)]
    assert merge(x).to_frame().to_dicts() == [{"start_ns": 0, "end_ns": 9}]
    assert Intervals.from_polars(pl.Series([1], dtype=pl.Int32), pl.Series([2], dtype=pl.UInt64)) == iv((1, 2))


# --- properties against the reference ---------------------------------------------------------


@SETTINGS
@given(interval_sets)
def test_merge_is_normalised_and_covers_the_same_ns(x: Intervals) -> None:
    merged = merge(x)
    assert_normalised(merged)
    assert pairs_of(merged) == runs(covered(x))
    assert merge(merged) is merged  # idempotent, and free on normalised input
    assert merged.is_normalised()


@SETTINGS
@given(interval_sets, st.data())
def test_where_keeps_the_flagged_intervals_in_their_order(x: Intervals, data: st.DataObject) -> None:
    flags = data.draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x)))
    got = x.where(np.array(flags, dtype=np.bool_))
    assert pairs_of(got) == [pair for pair, keep in zip(pairs_of(x), flags, strict=True) if keep]


def test_where_refuses_a_mask_of_another_length() -> None:
    with pytest.raises(InvalidArgumentError, match=r"a mask of shape \(1,\) for 2 intervals"):
        iv((0, 5), (7, 9)).where(np.array([True]))


@SETTINGS
@given(interval_sets)
def test_merge_does_not_depend_on_input_order(x: Intervals) -> None:
    by_start = np.argsort(x.start_ns, kind="stable")  # exercises the no-sort path
    assert merge(Intervals(x.start_ns[by_start], x.end_ns[by_start])) == merge(x)
    assert merge(Intervals(x.start_ns[::-1], x.end_ns[::-1])) == merge(x)


@SETTINGS
@given(interval_sets, interval_sets)
def test_union_is_the_ns_covered_by_either(a: Intervals, b: Intervals) -> None:
    assert pairs_of(union(a, b)) == runs(covered(a) | covered(b))
    assert union(a, b) == union(b, a)  # commutative
    assert union(a, a) == merge(a)  # idempotent
    assert union(a) == merge(a)


@SETTINGS
@given(interval_sets, interval_sets)
def test_intersect_is_the_ns_covered_by_both(a: Intervals, b: Intervals) -> None:
    both = intersect(a, b)
    assert_normalised(both)
    assert pairs_of(both) == runs(covered(a) & covered(b))
    assert both == intersect(b, a)  # commutative
    assert intersect(a, a) == merge(a)


@SETTINGS
@given(interval_sets, interval_sets)
def test_subtract_is_the_ns_covered_by_a_only(a: Intervals, b: Intervals) -> None:
    only_a = subtract(a, b)
    assert_normalised(only_a)
    assert pairs_of(only_a) == runs(covered(a) & ~covered(b))


@SETTINGS
@given(interval_sets, interval_sets)
def test_a_and_b_and_a_minus_b_partition_a(a: Intervals, b: Intervals) -> None:
    shared, only_a = intersect(a, b), subtract(a, b)
    assert len(intersect(shared, only_a)) == 0  # disjoint
    assert union(shared, only_a) == merge(a)  # together, exactly a
    assert measure(shared) + measure(only_a) == measure(a)


@SETTINGS
@given(interval_sets, _window)
def test_busy_plus_idle_is_the_window(x: Intervals, window: tuple[int, int]) -> None:
    w0, w1 = window
    busy, idle = clip(x, w0, w1), complement(x, w0, w1)
    assert_normalised(busy)
    assert_normalised(idle)
    assert pairs_of(busy) == runs(covered(x) & window_cells(w0, w1))
    assert measure(busy) + measure(idle) == w1 - w0
    assert len(intersect(busy, idle)) == 0
    assert union(busy, idle) == merge(iv((w0, w1)))
    assert measure_in_windows(x, iv((w0, w1))).tolist() == [measure(busy)]


@SETTINGS
@given(interval_sets)
def test_measure_counts_covered_ns(x: Intervals) -> None:
    assert measure(x) == int(covered(x).sum())


@SETTINGS
@given(interval_sets)
def test_gaps_are_the_maximal_holes_between_first_and_last_covered_ns(x: Intervals) -> None:
    cells = covered(x)
    on = np.flatnonzero(cells)
    holes = runs(~cells[on[0] : on[-1] + 1]) if on.size else []
    assert pairs_of(gaps(x)) == [(s + int(on[0]), e + int(on[0])) for s, e in holes]
    assert_normalised(gaps(x))


@SETTINGS
@given(interval_sets, window_sets)
def test_measure_in_windows_counts_covered_ns_per_window(x: Intervals, windows: Intervals) -> None:
    cells = covered(x)
    expected = [int((cells & window_cells(s, e)).sum()) for s, e in pairs_of(windows)]
    assert measure_in_windows(x, windows).tolist() == expected


@SETTINGS
@given(interval_sets, window_sets)
def test_overlap_with_windows_counts_each_intervals_ns_inside_the_windows(x: Intervals, windows: Intervals) -> None:
    inside = covered(windows)
    expected = [int((inside & window_cells(s, e)).sum()) for s, e in pairs_of(x)]
    assert overlap_with_windows(x, windows).tolist() == expected


@SETTINGS
@given(interval_sets, window_sets)
def test_overlaps_says_whether_each_interval_has_a_ns_inside_the_windows(x: Intervals, windows: Intervals) -> None:
    inside = covered(windows)
    expected = [bool((inside & window_cells(s, e)).any()) for s, e in pairs_of(x)]
    assert overlaps(x, windows).tolist() == expected


@SETTINGS
@given(interval_sets, window_sets, st.booleans(), st.sampled_from([1, 2, 1 << 16]))
def test_per_interval_answers_in_start_order_are_the_same_by_either_path(
    x: Intervals, windows: Intervals, sliced: bool, chunk_rows: int
) -> None:
    # In start order against few windows, the intervals are read a slice per window (a chunk of
    # rows at a time); against many, by one search per interval.
    order = np.argsort(x.start_ns, kind="stable")
    in_order = Intervals(x.start_ns[order], x.end_ns[order])
    inside = covered(windows)
    cells = [inside & window_cells(s, e) for s, e in pairs_of(in_order)]
    with (
        mock.patch.object(window_slices, "MAX_WINDOWS", len(windows) if sliced else -1),
        mock.patch.object(window_slices, "CHUNK_ROWS", chunk_rows),
    ):
        assert overlaps(in_order, windows).tolist() == [bool(c.any()) for c in cells]
        assert overlap_with_windows(in_order, windows).tolist() == [int(c.sum()) for c in cells]
        assert measure_in_windows(windows, in_order).tolist() == [int(c.sum()) for c in cells]


def test_overlaps_examples() -> None:
    windows = iv((10, 20), (30, 40))
    # before, touching the first's start, inside, spanning the gap, in the gap, touching the
    # last's end, after, zero-length inside
    x = iv((0, 10), (5, 11), (12, 13), (19, 31), (20, 30), (40, 50), (45, 60), (15, 15))
    assert overlaps(x, windows).tolist() == [False, True, True, True, False, False, False, False]
    assert overlaps(x, iv()).tolist() == [False] * 8
    # the same in start order (one slice per window): before, touching, inside, zero-length inside,
    # spanning the gap, in the gap, touching the last's end, after
    x = iv((0, 10), (5, 11), (12, 13), (15, 15), (19, 31), (20, 30), (40, 50), (45, 60))
    assert overlaps(x, windows).tolist() == [False, True, True, False, True, False, False, False]


@SETTINGS
@given(_pairs, st.lists(st.sampled_from([0, 1, 7]), min_size=15, max_size=15), st.booleans())
def test_grouped_functions_equal_one_ungrouped_call_per_key(pairs: Pairs, key_pool: list[int], far: bool) -> None:
    x = iv(*pairs)
    # far-apart keys cannot be packed next to the times and take the lexsort path
    keys = np.array([k * 2**60 if far else k for k in key_pool[: len(pairs)]], dtype=np.int64)
    expected_keys: list[int] = []
    expected: Pairs = []
    expected_gap_keys: list[int] = []
    expected_gaps: Pairs = []
    for k in sorted(set(keys.tolist())):
        mine = iv(*[p for p, pk in zip(pairs, keys.tolist(), strict=True) if pk == k])
        expected_keys += [k] * len(merge(mine))
        expected += pairs_of(merge(mine))
        expected_gap_keys += [k] * len(gaps(mine))
        expected_gaps += pairs_of(gaps(mine))
    got_keys, got = merge_by_key(x, keys)
    assert (got_keys.tolist(), pairs_of(got)) == (expected_keys, expected)
    got_gap_keys, got_gaps = gaps_by_key(x, keys)
    assert (got_gap_keys.tolist(), pairs_of(got_gaps)) == (expected_gap_keys, expected_gaps)
    unique, ns = measure_by_key(x, keys)
    assert unique.tolist() == sorted(set(keys.tolist()))
    assert ns.tolist() == [
        measure(iv(*[p for p, pk in zip(pairs, keys.tolist(), strict=True) if pk == k])) for k in unique
    ]


@SETTINGS
@given(interval_sets, interval_sets, window_sets)
def test_results_do_not_change_when_everything_moves_to_1e18(a: Intervals, b: Intervals, windows: Intervals) -> None:
    def shift(x: Intervals) -> Intervals:
        return Intervals(x.start_ns + E18, x.end_ns + E18)

    assert merge(shift(a)) == shift(merge(a))
    assert intersect(shift(a), shift(b)) == shift(intersect(a, b))
    assert subtract(shift(a), shift(b)) == shift(subtract(a, b))
    assert gaps(shift(a)) == shift(gaps(a))
    assert complement(shift(a), E18 - 7, E18 + 150) == shift(complement(a, -7, 150))
    assert (measure_in_windows(shift(a), shift(windows)) == measure_in_windows(a, windows)).all()


@SETTINGS
@given(interval_sets, interval_sets, window_sets)
def test_inputs_are_never_mutated(a: Intervals, b: Intervals, windows: Intervals) -> None:
    arrays = [a.start_ns, a.end_ns, b.start_ns, b.end_ns, windows.start_ns, windows.end_ns]
    before = [arr.copy() for arr in arrays]
    outputs: Iterable[object] = [
        merge(a),
        union(a, b),
        intersect(a, b),
        subtract(a, b),
        complement(a, 10, 150),
        clip(a, 10, 150),
        gaps(a),
        measure(a),
        measure_in_windows(a, windows),
        overlap_with_windows(a, windows),
        merge_by_key(a, np.arange(len(a)) % 2),
    ]
    assert list(outputs)
    for arr, old in zip(arrays, before, strict=True):
        assert np.array_equal(arr, old)
    for out in [merge(a), intersect(a, b), subtract(a, b), gaps(a)]:
        assert not out.start_ns.flags.writeable
        assert not out.end_ns.flags.writeable


def test_construction_takes_read_only_views_and_leaves_the_callers_arrays_alone() -> None:
    start = np.array([5, 0], dtype=np.int64)
    end = np.array([9, 6], dtype=np.int64)
    x = Intervals(start, end)
    assert start.flags.writeable  # the caller's array keeps its flags
    with pytest.raises(ValueError, match="read-only"):
        x.start_ns[0] = 1
    frozen = np.array([0, 3], dtype=np.int64)
    frozen.flags.writeable = False
    assert merge(Intervals(frozen, frozen + 2)) == iv((0, 2), (3, 5))  # read-only input is fine


# --- beyond the tiny timeline: a vectorised reference at a size that takes the fast paths ------


def test_large_random_sets_agree_with_a_coverage_array() -> None:
    rng = np.random.default_rng(7)
    horizon, n = 5_000_000, 200_000  # sparse enough to merge into more than 2**16 intervals
    start = rng.integers(0, horizon - 10, n)
    x = Intervals(start, start + rng.integers(0, 10, n))
    delta = np.zeros(horizon + 1, np.int64)
    np.add.at(delta, x.start_ns, 1)
    np.add.at(delta, x.end_ns, -1)
    cells = np.cumsum(delta)[:horizon] > 0
    covered_before = np.concatenate(([0], np.cumsum(cells)))

    assert measure(x) == int(cells.sum())
    merged = merge(x)
    assert len(merged) > 2**16
    assert_normalised(merged)
    assert int(merged.lengths_ns().sum()) == int(cells.sum())

    # more than 2**16 windows in random order into more than 2**16 intervals: the paths that sort
    # the queries first, for window ends close to their starts and for ends anywhere
    w0 = rng.integers(0, horizon, 100_000)
    for w1 in (np.minimum(w0 + rng.integers(0, 5_000, w0.size), horizon), rng.integers(w0, horizon + 1)):
        expected = covered_before[w1] - covered_before[w0]
        assert np.array_equal(measure_in_windows(x, Intervals(w0, w1)), expected)
