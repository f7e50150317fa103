"""Per-row answers for rows in start order against a few disjoint windows: a slice of rows per window.

Rows sorted by start fall into consecutive slices by the first window that ends after their start;
within its slice a row meets at most that one window before the window's end, so one comparison
per row answers, and only the rows that reach past their window's end need the windows after it
(few: a kernel is short beside the gaps between steps).  :mod:`traceq.intervals` takes this path
where it applies (:func:`applies`) instead of a binary search per row; both give the same answer.

Arrays in, arrays out: int64 ns, half-open ``[start, end)``; the windows sorted, disjoint and
non-empty (a merged set).  The rows are taken :data:`CHUNK_ROWS` at a time, so that the
temporaries are small, stay in cache and are reused, instead of arrays of every row's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from traceq.sorted_search import is_sorted

Int64Array = npt.NDArray[np.int64]

MAX_WINDOWS: Final = 1024
"""Above this many windows, the step per window (a few µs of Python) costs more than it saves."""

CHUNK_ROWS: Final = 1 << 16
"""Rows compared at a time."""


def applies(start_ns: npt.NDArray[Any], n_windows: int) -> bool:
    """Whether rows with these starts are read a slice per window: few windows, starts in order."""
    return n_windows <= MAX_WINDOWS and is_sorted(start_ns)


def overlaps(
    start_ns: Int64Array, end_ns: Int64Array, win_start_ns: Int64Array, win_end_ns: Int64Array
) -> npt.NDArray[np.bool_]:
    """Per row, whether it shares a ns with a window: it ends after both its own start and the
    start of the first window that ends after its start."""
    out = np.zeros(start_ns.size, np.bool_)
    for k, lo, hi in _slices(start_ns, win_end_ns):
        np.greater(end_ns[lo:hi], np.maximum(start_ns[lo:hi], win_start_ns[k]), out=out[lo:hi])
    return out


def inside_ns(
    start_ns: Int64Array,
    end_ns: Int64Array,
    win_start_ns: Int64Array,
    win_end_ns: Int64Array,
    beyond: Callable[[Int64Array, Int64Array], Int64Array],
) -> Int64Array:
    """Per row, its ns inside the windows: inside the first window that ends after its start, plus,
    for a row that ends past that window's end, what ``beyond`` measures of the rest
    (``beyond(starts, ends)``: per interval, its ns inside the windows; the starts are window ends)."""
    out = np.zeros(start_ns.size, np.int64)
    past: list[tuple[int, npt.NDArray[np.intp]]] = []
    for k, lo, hi in _slices(start_ns, win_end_ns):
        ends, window_end = end_ns[lo:hi], win_end_ns[k]
        mine = out[lo:hi]
        np.minimum(ends, window_end, out=mine)
        mine -= np.maximum(start_ns[lo:hi], win_start_ns[k])
        np.maximum(mine, 0, out=mine)
        reach = np.flatnonzero(ends > window_end)
        if reach.size:
            past.append((k, reach + lo))
    for k, rows in past:
        out[rows] += beyond(np.full(rows.size, win_end_ns[k], np.int64), end_ns[rows])
    return out


def _slices(start_ns: Int64Array, win_end_ns: Int64Array) -> Iterator[tuple[int, int, int]]:
    """``(k, lo, hi)``: rows ``lo:hi`` start at or after window k-1's end and before window k's (at
    most :data:`CHUNK_ROWS` of them; rows that start after the last window's end are in none)."""
    lo = 0
    for k, hi in enumerate(np.searchsorted(start_ns, win_end_ns).tolist()):
        for first in range(lo, hi, CHUNK_ROWS):
            yield k, first, min(first + CHUNK_ROWS, hi)
        lo = hi


__all__ = ["CHUNK_ROWS", "MAX_WINDOWS", "applies", "inside_ns", "overlaps"]
