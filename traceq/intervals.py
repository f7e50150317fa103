"""The interval engine: pure, vectorised set algebra on half-open int64 nanosecond intervals.

Everything that asks "when was something running" (busy time, idle gaps, overlap of compute and
communication, the step breakdown) reduces to the few functions here.  They know nothing of
traces, tables or analyses.

Calling convention (one for the whole module)
---------------------------------------------
* **Intervals in, intervals out.**  An :class:`Intervals` holds two equal-length, 1-D, read-only
  int64 numpy arrays, ``start_ns`` and ``end_ns``.  Interval ``i`` covers the nanoseconds ``t``
  with ``start_ns[i] <= t < end_ns[i]`` (half-open), and ``start_ns[i] <= end_ns[i]`` always holds.
  A zero-length interval (``start_ns == end_ns``) is allowed and covers nothing.
* **Any input is accepted**: unsorted, overlapping, nested, touching, zero-length.  The set
  functions (:func:`merge`, :func:`union`, :func:`intersect`, :func:`subtract`, :func:`complement`,
  :func:`clip`, :func:`gaps`, :func:`measure`) read an input as *the set of nanoseconds it covers*.
* **Every Intervals a function returns is normalised**: sorted by start, non-empty, disjoint and
  not touching (``end_ns[i] < start_ns[i + 1]``), so ``[0, 5) + [5, 9)`` comes back as ``[0, 9)``.
  A set of nanoseconds has exactly one normalised form, so ``merge(a) == merge(b)`` is set
  equality; ``==`` on two Intervals compares their arrays.
* **Per-window answers are arrays aligned with their argument**: :func:`measure_in_windows` returns
  one int64 per window, :func:`overlap_with_windows` one per interval, in the order given (those
  arguments are *not* merged: windows may be unsorted, overlap one another or be zero-length).
  A single window is passed as two ints, ``window_start_ns, window_end_ns``.
* **Grouped variants** (``*_by_key``) take an int64 ``key`` per interval (a device, a stream) and
  return ``(key, Intervals)`` sorted by key and then start, or ``(unique keys, values)``.
* **Pure**: inputs are never mutated, arrays are never copied needlessly, and a function may hand
  back its own (immutable) input when that already is the answer.  Normalised input is recognised
  in O(n) and never re-sorted, so chaining calls is cheap.
* **Vectorised**: no Python loop per interval or window; O(n log n) for unsorted input (two
  ``np.sort``), O(n) sorted by start, O((n + w) log n) per window (searches: :mod:`traceq.sorted_search`).
* All times are int64 ns.  The span from the earliest start to the latest end must fit in int64
  (always true for non-negative timestamps).  Malformed input raises
  :class:`~traceq.errors.InvalidArgumentError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceq import window_slices
from traceq.errors import InvalidArgumentError
from traceq.interval_union import components, union_arrays
from traceq.sorted_search import Positions, distinct, is_sorted, searchsorted, searchsorted_from

Int64Array = npt.NDArray[np.int64]

_INT64_MIN: Final = int(np.iinfo(np.int64).min)
_INT64_MAX: Final = int(np.iinfo(np.int64).max)

# Above this many queries into this many intervals, binary searches in random order miss the
# cache at every step (measured: 15 s for 1e7 random queries into 1e7 intervals); ordering the
# queries first costs one argsort (~1.3 s) and turns the searches into a near-linear scan.
_SORT_QUERIES_ABOVE: Final = 1 << 16
# ... unless consecutive queries land near each other (the ends of windows sorted by start):
# then the searches stay in cache and the argsort would cost more than it saves.  "Near" is a
# mean jump of at most this many intervals (measured: 0.6 s direct vs 1.0 s sorted at 1e7).
_NEAR_JUMP_INTERVALS: Final = 4096


@dataclass(frozen=True, eq=False, slots=True)
class Intervals:
    """A collection of half-open intervals ``[start_ns[i], end_ns[i])``, in int64 nanoseconds.

    Constructing one checks the arrays (1-D, equal length, integer, ``start_ns <= end_ns``) and
    stores read-only *views* of them: no copy is made, so do not write to the arrays you handed
    over.  Equality compares the arrays; use ``merge(a) == merge(b)`` to compare covered sets.
    """

    start_ns: Int64Array
    end_ns: Int64Array

    def __post_init__(self) -> None:
        start = _as_int64(self.start_ns, "start_ns")
        end = _as_int64(self.end_ns, "end_ns")
        if start.shape != end.shape:
            raise InvalidArgumentError(
                f"start_ns has {start.size} values but end_ns has {end.size}",
                hint="pass one start and one end per interval",
            )
        backwards = np.flatnonzero(end < start)
        if backwards.size:
            i = int(backwards[0])
            raise InvalidArgumentError(
                f"{backwards.size} interval(s) end before they start (first: index {i}, "
                f"[{int(start[i])}, {int(end[i])}))",
                hint="intervals are [start_ns, end_ns) with start_ns <= end_ns",
            )
        object.__setattr__(self, "start_ns", start)
        object.__setattr__(self, "end_ns", end)

    @classmethod
    def from_arrays(cls, start_ns: npt.ArrayLike, end_ns: npt.ArrayLike) -> Intervals:
        """Intervals from any integer array-likes (lists, numpy arrays of any int dtype), in ns."""
        return cls(_as_int64(start_ns, "start_ns"), _as_int64(end_ns, "end_ns"))

    @classmethod
    def from_polars(cls, start_ns: pl.Series, end_ns: pl.Series) -> Intervals:
        """Intervals from two integer polars Series of ns (zero-copy when they are null-free Int64)."""
        for name, series in (("start_ns", start_ns), ("end_ns", end_ns)):
            if series.null_count():
                raise InvalidArgumentError(
                    f"{name} has {series.null_count()} null value(s)", hint="Drop or fill them first"
                )
        return cls.from_arrays(start_ns.to_numpy(), end_ns.to_numpy())

    @classmethod
    def from_frame(cls, frame: pl.DataFrame, start_col: str = "start_ns", end_col: str = "end_ns") -> Intervals:
        """Intervals from two integer ns columns of a polars DataFrame (one interval per row)."""
        return cls.from_polars(frame.get_column(start_col), frame.get_column(end_col))

    @classmethod
    def empty(cls) -> Intervals:
        """No intervals at all (normalised, covers nothing)."""
        return cls._trusted(np.empty(0, np.int64), np.empty(0, np.int64))

    @classmethod
    def _trusted(cls, start_ns: Int64Array, end_ns: Int64Array) -> Intervals:
        # The engine's own results are valid by construction; skipping the O(n) checks keeps
        # chained calls at the cost of the work itself.
        obj = object.__new__(cls)
        object.__setattr__(obj, "start_ns", _read_only(start_ns))
        object.__setattr__(obj, "end_ns", _read_only(end_ns))
        return obj

    def to_frame(self) -> pl.DataFrame:
        """A polars DataFrame with Int64 columns ``start_ns`` and ``end_ns``, one row per interval."""
        return pl.DataFrame({"start_ns": self.start_ns, "end_ns": self.end_ns})

    def where(self, mask: npt.NDArray[np.bool_]) -> Intervals:
        """The intervals that ``mask`` (one flag each) selects, in order; taken by position (a Boolean
        index of each array costs up to four times as much where the flags are mixed)."""
        self._check_mask(mask)
        picked = np.flatnonzero(mask)
        return Intervals._trusted(self.start_ns[picked], self.end_ns[picked])

    def _check_mask(self, mask: npt.NDArray[np.bool_]) -> None:
        """Raise unless ``mask`` holds one flag per interval."""
        if mask.shape != self.start_ns.shape:
            raise InvalidArgumentError(f"a mask of shape {mask.shape} for {len(self)} intervals")

    def lengths_ns(self) -> Int64Array:
        """``end_ns - start_ns`` per interval, in ns (a new array)."""
        return self.end_ns - self.start_ns

    def is_normalised(self) -> bool:
        """True when sorted by start, non-empty, disjoint and not touching (what :func:`merge` returns)."""
        return bool(np.all(self.start_ns < self.end_ns) and np.all(self.end_ns[:-1] < self.start_ns[1:]))

    def __len__(self) -> int:
        return int(self.start_ns.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Intervals):
            return NotImplemented
        return np.array_equal(self.start_ns, other.start_ns) and np.array_equal(self.end_ns, other.end_ns)

    __hash__ = None  # type: ignore[assignment]  # equality is by value and the arrays are not hashable

    def __repr__(self) -> str:
        shown = [f"[{s}, {e})" for s, e in zip(self.start_ns[:4].tolist(), self.end_ns[:4].tolist(), strict=True)]
        return f"Intervals(n={len(self)}: {', '.join(shown)}{', ...' if len(self) > 4 else ''})"


# --- set operations -------------------------------------------------------------------------


def merge(iv: Intervals) -> Intervals:
    """The normalised form of ``iv``: the union of its intervals, in ns.

    Overlapping, nested and touching intervals fuse (``[0, 5) + [5, 9) -> [0, 9)``); zero-length
    ones vanish.  Returns ``iv`` itself when it is already normalised.  O(n) when ``iv`` is sorted
    by start (one pass), else O(n log n) (:mod:`traceq.interval_union`).
    """
    start, end = union_arrays(iv.start_ns, iv.end_ns)
    return iv if start is iv.start_ns else Intervals._trusted(start, end)


def merge_where(iv: Intervals, mask: npt.NDArray[np.bool_]) -> Intervals:
    """``merge(iv.where(mask))``: where the selected intervals are sorted by start, without their copy."""
    iv._check_mask(mask)
    return Intervals._trusted(*union_arrays(iv.start_ns, iv.end_ns, mask))


def union(first: Intervals, *rest: Intervals) -> Intervals:
    """The ns covered by any of the arguments, normalised."""
    if not rest:
        return merge(first)
    sets = (first, *rest)
    return merge(
        Intervals._trusted(
            np.concatenate([s.start_ns for s in sets]),
            np.concatenate([s.end_ns for s in sets]),
        )
    )


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """The ns covered by both ``a`` and ``b``, normalised.  O((n + m) log(n + m) + output)."""
    a, b = merge(a), merge(b)
    if len(a) > len(b):
        a, b = b, a  # search with the smaller set; the normalised answer does not depend on order
    if len(a) == 0:
        return a
    # The b-intervals overlapping one a-interval form a contiguous run [lo, hi) because b is
    # sorted and disjoint: those ending after its start and starting before its end.
    lo = searchsorted(b.end_ns, a.start_ns, side="right")
    hi = searchsorted(b.start_ns, a.end_ns, side="left")
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return Intervals.empty()
    run_offset = np.cumsum(counts) - counts
    ib = np.arange(total) + np.repeat(lo - run_offset, counts)
    # Pieces come out ordered by a and then by b; both are sorted and disjoint, and a piece can
    # only touch the next where a or b itself touches, so the result is already normalised.
    start = np.maximum(np.repeat(a.start_ns, counts), b.start_ns[ib])
    end = np.minimum(np.repeat(a.end_ns, counts), b.end_ns[ib])
    return Intervals._trusted(start, end)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The ns covered by ``a`` but not by ``b`` (``a − b``), normalised."""
    a = merge(a)
    if len(a) == 0:
        return a
    b = merge(b)
    if len(b) == 0:
        return a
    return intersect(a, complement(b, int(a.start_ns[0]), int(a.end_ns[-1])))


def complement(iv: Intervals, window_start_ns: int, window_end_ns: int) -> Intervals:
    """The ns of ``[window_start_ns, window_end_ns)`` not covered by ``iv`` (the idle time), normalised.

    ``measure(clip(iv, w0, w1)) + measure(complement(iv, w0, w1)) == w1 - w0``.
    """
    clipped = clip(iv, window_start_ns, window_end_ns)
    start = np.concatenate((np.array([window_start_ns], np.int64), clipped.end_ns))
    end = np.concatenate((clipped.start_ns, np.array([window_end_ns], np.int64)))
    # Only the hole before the first and the one after the last interval can be empty: the
    # inner ones are non-empty because normalised intervals never touch.
    return Intervals._trusted(*_drop_empty(start, end))


def clip(iv: Intervals, window_start_ns: int, window_end_ns: int) -> Intervals:
    """The ns of ``iv`` inside ``[window_start_ns, window_end_ns)``, normalised (empty for a zero-length window).

    To clip to several windows, ``intersect(iv, windows)``.  O(log n + output) for normalised input.
    """
    _check_window(window_start_ns, window_end_ns)
    m = merge(iv)
    first = int(np.searchsorted(m.end_ns, window_start_ns, side="right"))
    stop = int(np.searchsorted(m.start_ns, window_end_ns, side="left"))
    if first >= stop or window_start_ns == window_end_ns:
        return Intervals.empty()
    if first == 0 and stop == len(m) and m.start_ns[0] >= window_start_ns and m.end_ns[-1] <= window_end_ns:
        return m
    start = np.maximum(m.start_ns[first:stop], np.int64(window_start_ns))
    end = np.minimum(m.end_ns[first:stop], np.int64(window_end_ns))
    return Intervals._trusted(start, end)


def gaps(iv: Intervals) -> Intervals:
    """The maximal uncovered runs between the first start and the last end of ``iv``, normalised.

    Equals ``complement(iv, first start, last end)``; empty when ``iv`` merges into fewer than two
    intervals.
    """
    m = merge(iv)
    return Intervals._trusted(m.end_ns[:-1], m.start_ns[1:])


def measure(iv: Intervals) -> int:
    """The number of ns covered by ``iv`` (overlaps counted once)."""
    m = merge(iv)
    return int(np.sum(m.end_ns - m.start_ns))


# --- per-window measures --------------------------------------------------------------------


def measure_in_windows(iv: Intervals, windows: Intervals) -> Int64Array:
    """For each window ``[windows.start_ns[j], windows.end_ns[j])``, the ns of it covered by ``iv``.

    Returns an int64 array aligned with ``windows``, which is not merged: windows may overlap,
    repeat, be unsorted or zero-length (which measure 0).  ``windows.lengths_ns()`` minus the
    result is the idle ns of each window.  O((n + w) log n): a prefix sum of covered length, read
    at each window edge by binary search (windows in start order, few intervals: :mod:`traceq.window_slices`).
    """
    m = merge(iv)
    if len(m) == 0 or len(windows) == 0:
        return np.zeros(len(windows), np.int64)
    covered_before = np.concatenate((np.zeros(1, np.int64), np.cumsum(m.end_ns - m.start_ns)))

    def searched(start: Int64Array, end: Int64Array) -> Int64Array:
        order = np.argsort(start) if _queries_jump_far(m, start) else None
        if order is not None:
            # Once windows are in start order, each end's search starts at its start's answer.
            start, end = start[order], end[order]
        at_start = searchsorted(m.start_ns, start, side="right")  # intervals starting at or before each edge
        at_end = searchsorted_from(m.start_ns, end, at_start, side="right")  # (an end is never before its start)
        covered = _covered_up_to(m, covered_before, end, at_end) - _covered_up_to(m, covered_before, start, at_start)
        if order is None:
            return covered
        in_given_order = np.empty_like(covered)
        in_given_order[order] = covered
        return in_given_order

    if window_slices.applies(windows.start_ns, len(m)):
        return window_slices.inside_ns(windows.start_ns, windows.end_ns, m.start_ns, m.end_ns, searched)
    return searched(windows.start_ns, windows.end_ns)


def overlap_with_windows(iv: Intervals, windows: Intervals) -> Int64Array:
    """Per interval of ``iv`` (given order, not merged), its ns inside the union of ``windows``: an
    int64 array aligned with ``iv`` (e.g. how much of each idle gap falls inside a step)."""
    return measure_in_windows(windows, iv)


def overlaps(iv: Intervals, windows: Intervals) -> npt.NDArray[np.bool_]:
    """Per interval of ``iv`` (given order), whether it shares a ns with ``windows`` (an overlap > 0):
    of the merged windows only the first that ends after an interval's start can be one it meets,
    so one search answers (in start order against few windows: :mod:`traceq.window_slices`)."""
    m = merge(windows)
    if len(m) == 0:
        return np.zeros(len(iv), np.bool_)
    if window_slices.applies(iv.start_ns, len(m)):
        return window_slices.overlaps(iv.start_ns, iv.end_ns, m.start_ns, m.end_ns)
    first = searchsorted(m.end_ns, iv.start_ns, side="right")
    meets = m.start_ns[np.minimum(first, len(m) - 1)] < iv.end_ns
    return (first < len(m)) & (iv.start_ns < iv.end_ns) & meets


# --- grouped variants -----------------------------------------------------------------------


def merge_by_key(iv: Intervals, key: npt.ArrayLike) -> tuple[Int64Array, Intervals]:
    """:func:`merge` within each group of intervals that share a ``key`` (e.g. a device id).

    Returns ``(key per output interval, intervals)``, sorted by key and then start; each key's
    intervals are normalised.  Keys with only zero-length intervals do not appear.
    """
    keys = _as_int64(key, "key")
    if keys.shape != iv.start_ns.shape:
        raise InvalidArgumentError(
            f"key has {keys.size} values for {len(iv)} intervals", hint="pass one key per interval"
        )
    start, end = iv.start_ns, iv.end_ns
    if start.size == 0:
        return np.empty(0, np.int64), Intervals.empty()
    key_min, t_min = int(keys.min()), int(start.min())
    span = int(end.max()) - t_min + 1
    if (int(keys.max()) - key_min + 1) * span - 1 <= _INT64_MAX:
        # Pack (key, time) into one int64, key_rank * span + (t - t_min), so that the plain SIMD sort
        # orders by key then time and one ungrouped merge does all groups (and drops zero-length
        # intervals): a key's packed ends stay below the next key's packed starts, so groups can
        # neither overlap nor touch.
        base = (keys - key_min) * span
        packed = merge(Intervals._trusted(base + (start - t_min), base + (end - t_min)))
        rank = packed.start_ns // span
        offset = rank * span - t_min
        return rank + key_min, Intervals._trusted(packed.start_ns - offset, packed.end_ns - offset)
    # Keys or times too far apart to pack (rare): sort by (key, start) and (key, end) instead.
    nonempty = start < end
    start, end, keys = start[nonempty], end[nonempty], keys[nonempty]
    if start.size == 0:
        return np.empty(0, np.int64), Intervals.empty()
    by_start = np.lexsort((start, keys))
    keys, start, end = keys[by_start], start[by_start], end[np.lexsort((end, keys))]
    boundary = np.flatnonzero((keys[:-1] != keys[1:]) | (end[:-1] < start[1:]))
    first = np.concatenate(([0], boundary + 1))
    return keys[first], Intervals._trusted(*components(start, end, boundary))


def measure_by_key(iv: Intervals, key: npt.ArrayLike) -> tuple[Int64Array, Int64Array]:
    """For each distinct ``key``, the ns covered by its intervals.

    Returns ``(sorted unique keys, covered ns)``; a key whose intervals are all zero-length gets 0.
    """
    keys = _as_int64(key, "key")
    unique_keys = distinct(keys)
    merged_keys, merged = merge_by_key(iv, keys)
    covered = np.zeros(unique_keys.size, np.int64)
    if merged_keys.size:
        first = np.flatnonzero(np.concatenate(([True], merged_keys[1:] != merged_keys[:-1])))
        covered[np.searchsorted(unique_keys, merged_keys[first])] = np.add.reduceat(merged.lengths_ns(), first)
    return unique_keys, covered


def gaps_by_key(iv: Intervals, key: npt.ArrayLike) -> tuple[Int64Array, Intervals]:
    """:func:`gaps` within each key: ``(key per gap, gaps)``, sorted by key and then start."""
    merged_keys, merged = merge_by_key(iv, key)
    same_key = merged_keys[:-1] == merged_keys[1:]
    return merged_keys[1:][same_key], Intervals._trusted(merged.end_ns[:-1][same_key], merged.start_ns[1:][same_key])


# --- helpers --------------------------------------------------------------------------------


def _as_int64(values: npt.ArrayLike, name: str) -> Int64Array:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype != np.int64:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise InvalidArgumentError(f"{name} must hold integer ns, got dtype {arr.dtype}")
        if arr.size and arr.dtype == np.uint64 and int(arr.max()) > _INT64_MAX:
            raise InvalidArgumentError(f"{name} has values beyond the int64 range")
        arr = arr.astype(np.int64)
    return _read_only(arr)


def _read_only(arr: Int64Array) -> Int64Array:
    # A view, so the caller's own array keeps its flags; ours cannot be written through.
    view = arr.view()
    view.flags.writeable = False
    return view


def _check_window(window_start_ns: int, window_end_ns: int) -> None:
    for name, value in (("window_start_ns", window_start_ns), ("window_end_ns", window_end_ns)):
        if not isinstance(value, int | np.integer) or not _INT64_MIN <= int(value) <= _INT64_MAX:
            raise InvalidArgumentError(f"{name} must be an int64 number of ns, got {value!r}")
    if window_end_ns < window_start_ns:
        raise InvalidArgumentError(
            f"window [{window_start_ns}, {window_end_ns}) ends before it starts",
            hint="pass window_start_ns <= window_end_ns",
        )


def _drop_empty(start: Int64Array, end: Int64Array) -> tuple[Int64Array, Int64Array]:
    nonempty = start < end
    return (start, end) if nonempty.all() else (start[nonempty], end[nonempty])


def _covered_up_to(m: Intervals, covered_before: Int64Array, t: Int64Array, k: Positions) -> Int64Array:
    """The ns of normalised ``m`` before each time in ``t``: ``measure(m ∩ (-inf, t))``, where ``k``
    holds how many intervals of ``m`` start at or before each time (used up: changed in place)."""
    # Intervals 0..k-1 lie before t but the part of k-1 past t (in place: few fresh arrays).
    out, none_before = covered_before[k], k == 0
    overhang = m.end_ns[np.maximum(np.subtract(k, 1, out=k), 0, out=k)]
    np.maximum(np.subtract(overhang, t, out=overhang), 0, out=overhang)
    overhang[none_before] = 0
    return np.subtract(out, overhang, out=out)


def _queries_jump_far(m: Intervals, t: Int64Array) -> bool:
    """Whether binary searches of ``t`` into normalised ``m`` would thrash the cache."""
    if t.size <= _SORT_QUERIES_ABOVE or len(m) <= _SORT_QUERIES_ABOVE or is_sorted(t):
        return False
    # float64: differences of arbitrary int64 times can overflow int64, and only the scale matters
    mean_jump = float(np.abs(np.diff(t.astype(np.float64))).mean())
    mean_spacing = (float(m.end_ns[-1]) - float(m.start_ns[0])) / len(m)
    return mean_jump > _NEAR_JUMP_INTERVALS * mean_spacing
