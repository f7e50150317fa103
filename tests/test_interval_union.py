"""The union of intervals as arrays (``traceq.interval_union``): the compiled walk and NumPy's way.

Specification: for any intervals and any selection of them, both ways return the components of
the nanoseconds the selected intervals cover (the brute-force reference of ``test_intervals``),
sorted, non-empty, disjoint and not touching; intervals already merged come back as the arrays
given, and the arrays given are never written.  The kernel refuses buffers too short for the
intervals, and writes nothing where there is nothing to write.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceq import interval_union
from traceq.errors import InvalidArgumentError
from traceq.interval_union import COMPILED, union_arrays
from traceq.intervals import Intervals, merge, merge_where

from .test_intervals import SETTINGS, Pairs, _pairs, covered, iv, pairs_of, runs

BOTH_WAYS = pytest.mark.parametrize(
    "compiled",
    [pytest.param(True, marks=pytest.mark.skipif(not COMPILED, reason="traceq was built without its C kernel")), False],
    ids=["compiled", "numpy"],
)

sorted_sets = _pairs.map(lambda ps: iv(*sorted(ps, key=lambda p: p[0])))
"""Sorted by start (ties in any order of their ends): what the one-pass walk reads."""
any_sets = st.one_of(sorted_sets, _pairs.map(lambda ps: iv(*ps)), sorted_sets.map(merge))
"""Sorted, unsorted, or already merged."""


def _read_only(x: Intervals) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    return x.start_ns, x.end_ns  # (an Intervals' arrays are read-only views: a write would raise)


def _pairs_of(arrays: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]) -> Pairs:
    return pairs_of(Intervals(*arrays))


@BOTH_WAYS
@SETTINGS
@given(x=any_sets, data=st.data())
def test_the_union_of_the_selected_intervals_is_the_ns_they_cover(
    compiled: bool, x: Intervals, data: st.DataObject
) -> None:
    flags = np.array(data.draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x))), dtype=np.bool_)
    assert _pairs_of(union_arrays(*_read_only(x), compiled=compiled)) == runs(covered(x))
    assert _pairs_of(union_arrays(*_read_only(x), flags, compiled=compiled)) == runs(covered(x.where(flags)))


@BOTH_WAYS
@SETTINGS
@given(x=sorted_sets.map(merge))
def test_intervals_already_merged_come_back_as_given(compiled: bool, x: Intervals) -> None:
    start, end = union_arrays(x.start_ns, x.end_ns, compiled=compiled)
    assert start is x.start_ns and end is x.end_ns
    assert merge(x) is x


@SETTINGS
@given(x=any_sets, data=st.data())
def test_merge_where_is_merge_of_where(x: Intervals, data: st.DataObject) -> None:
    flags = np.array(data.draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x))), dtype=np.bool_)
    assert merge_where(x, flags) == merge(x.where(flags))


def test_merge_where_refuses_a_mask_of_another_length() -> None:
    with pytest.raises(InvalidArgumentError, match=r"a mask of shape \(1,\) for 2 intervals"):
        merge_where(iv((0, 5), (7, 9)), np.array([True]))


@BOTH_WAYS
def test_examples(compiled: bool) -> None:
    # touching and nested intervals fuse, empty ones vanish, a selection leaves the others out
    x = iv((0, 5), (5, 9), (6, 7), (10, 10), (11, 12), (20, 30), (25, 26))
    assert _pairs_of(union_arrays(*_read_only(x), compiled=compiled)) == [(0, 9), (11, 12), (20, 30)]
    flags = np.array([True, False, True, True, True, False, True])
    assert _pairs_of(union_arrays(*_read_only(x), flags, compiled=compiled)) == [(0, 5), (6, 7), (11, 12), (25, 26)]
    # unsorted starts: merged the unsorted way
    assert _pairs_of(union_arrays(*_read_only(iv((5, 9), (0, 6))), compiled=compiled)) == [(0, 9)]
    # nothing, nothing selected, nothing but empty intervals
    assert _pairs_of(union_arrays(*_read_only(Intervals.empty()), compiled=compiled)) == []
    assert _pairs_of(union_arrays(*_read_only(x), np.zeros(len(x), np.bool_), compiled=compiled)) == []
    assert _pairs_of(union_arrays(*_read_only(iv((3, 3), (4, 4))), compiled=compiled)) == []
    # the int64 range's ends
    low, high = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    assert _pairs_of(union_arrays(*_read_only(iv((low, 0), (0, high))), compiled=compiled)) == [(low, high)]


@pytest.mark.skipif(not COMPILED, reason="traceq was built without its C kernel")
class TestKernel:
    """``_interval_kernels.merge_sorted`` itself."""

    def setup_method(self) -> None:
        assert interval_union._interval_kernels is not None
        self.kernel = interval_union._interval_kernels

    def test_it_writes_nothing_when_there_is_nothing_to_write(self) -> None:
        start, end = np.array([0, 10, 20]), np.array([5, 15, 25])
        out_start, out_end = np.full(3, 7), np.full(3, 7)
        assert self.kernel.merge_sorted(start, end, None, out_start, out_end) == -2  # already merged
        assert self.kernel.merge_sorted(start[::-1].copy(), end[::-1].copy(), None, out_start, out_end) == -1
        assert out_start.tolist() == [7, 7, 7] and out_end.tolist() == [7, 7, 7]

    def test_it_writes_only_the_components(self) -> None:
        start, end = np.array([0, 3, 20, 30]), np.array([5, 8, 25, 30])
        out_start, out_end = np.full(4, 7), np.full(4, 7)
        assert self.kernel.merge_sorted(start, end, None, out_start, out_end) == 2
        assert out_start.tolist() == [0, 20, 7, 7] and out_end.tolist() == [8, 25, 7, 7]

    @pytest.mark.parametrize(
        "arguments",
        [
            lambda a, out: (a, a[:2], None, out, out),  # a short end
            lambda a, out: (a, a, np.ones(2, np.bool_), out, out),  # a short mask
            lambda a, out: (a, a, None, out[:2], out),  # a short output
            lambda a, out: (a.astype(np.int32), a, None, out, out),  # not int64
            lambda a, out: (a, a, np.ones(3, np.int64), out, out),  # a mask that is not bytes
        ],
        ids=["end", "mask", "output", "int32", "int64-mask"],
    )
    def test_it_refuses_buffers_that_do_not_fit(self, arguments: object) -> None:
        a, out = np.arange(3, dtype=np.int64), np.empty(3, np.int64)
        with pytest.raises(ValueError, match="items of"):
            self.kernel.merge_sorted(*arguments(a, out))  # type: ignore[operator]

    def test_it_refuses_an_output_it_may_not_write(self) -> None:
        a = np.arange(3, dtype=np.int64)
        with pytest.raises(ValueError, match="read-only"):
            self.kernel.merge_sorted(a, a, None, Intervals(a, a).start_ns, np.empty(3, np.int64))
