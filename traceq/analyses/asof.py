"""Grouping by integer keys: as-of joins, sorts and windows over the analyses' (source, pid, tid).

polars groups by a String column several times more slowly than by an integer one (an as-of join of
2.5 M rows by (source, pid, tid, depth): 2.7 s, against 0.43 s without the String).  The analyses
group by ``source`` (a file name) nearly everywhere, so :func:`integer_groups` gives frames that
are grouped together an integer code per String ``by`` column, shared by all of them and in the
Strings' sort order (a sort by the code is the sort by the String), or leaves the column out of the
grouping where it holds one value in every frame (a one-rank part, the common case).
:func:`join_asof_by` is ``join_asof`` grouped that way; its result is the one polars returns.

Where one side is millions of rows and the other a few thousand, or where the answer is only a
row position, a binary search beats any join: :func:`group_numbers` numbers the groups densely in
key order, a (group, time) key packs into one int64 (``group × width + t − t_min``, ``width`` the
span of the times, so that groups never mix), and :func:`latest_at_or_before` finds in those keys
the row a backward as-of join matches (:mod:`traceq.analyses.nesting` searches the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import polars as pl

PACKED_LIMIT: Final = 1 << 62
"""Packed (group, time) keys stay below this (int64 with room for a search's arithmetic)."""

Array = np.ndarray[Any, np.dtype[np.int64]]


def integer_groups(
    frames: Sequence[pl.DataFrame], by: Sequence[str]
) -> tuple[list[pl.DataFrame], list[str], list[str]]:
    """``frames`` grouped by ``by`` the integer way: the frames (with a ``_code_<column>`` column
    added for each String column of ``by`` that holds several values), the columns to group on in
    place of ``by`` (same groups, same sort order), and the code columns added.  A String column
    with nulls stays as it is."""
    out = list(frames)
    keys: list[str] = []
    codes: list[str] = []
    for column in by:
        series = [f.get_column(column) for f in out]
        if any(s.dtype != pl.String or s.null_count() for s in series):
            keys.append(column)
            continue
        values = pl.concat([s.unique() for s in series]).unique().sort()
        if len(values) <= 1:
            continue  # one value everywhere: grouping by it changes nothing
        code = f"_code_{column}"
        kind = pl.Enum(values)
        out = [f.with_columns(pl.col(column).cast(kind).to_physical().alias(code)) for f in out]
        keys.append(code)
        codes.append(code)
    return out, keys, codes


def join_asof_by(left: pl.DataFrame, right: pl.DataFrame, *, by: Sequence[str], **options: Any) -> pl.DataFrame:
    """``left.join_asof(right, by=list(by), **options)``, grouped by :func:`integer_groups` keys
    (columns and rows as that join returns them)."""
    (lhs, rhs), keys, codes = integer_groups([left, right], by)
    grouped_away = [c for c in by if c not in keys]
    joined = lhs.join_asof(rhs.drop(grouped_away), by=keys or None, **options)
    return joined.drop(codes) if codes else joined


def group_numbers(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> tuple[Array, Array] | None:
    """Per row of ``ranges`` and of ``points``, its ``by`` group's number: dense, in the sort order of
    the ``by`` values (integer columns), over the groups ``ranges`` holds (−1: a point whose group
    holds no range row); ``None`` where a ``by`` column is no integer column or holds a null, or the
    numbers would not fit.  A column with one value in both frames splits nothing and costs a min
    and a max."""
    range_group = np.zeros(ranges.height, np.int64)
    point_group = np.zeros(points.height, np.int64)
    span = 1
    for column in by:
        columns = (ranges.get_column(column), points.get_column(column))
        if any(not c.dtype.is_integer() or c.null_count() for c in columns):
            return None
        in_ranges, at_points = (c.cast(pl.Int64).to_numpy() for c in columns)
        one = len(in_ranges) and in_ranges.min() == in_ranges.max()
        if one and (not len(at_points) or at_points.min() == at_points.max() == in_ranges[0]):
            continue  # one value everywhere: it splits nothing
        values = _sorted_distinct(columns[0])
        span *= max(len(values), 1)
        if span >= PACKED_LIMIT:
            return None
        code = np.searchsorted(values, at_points)
        known = code < len(values)
        known[known] = values[code[known]] == at_points[known]
        point_group = np.where(known & (point_group >= 0), point_group * len(values) + code, -1)
        range_group = range_group * len(values) + np.searchsorted(values, in_ranges)
    numbers = _sorted_distinct(pl.Series(range_group))
    dense = np.searchsorted(numbers, point_group)
    known = (point_group >= 0) & (dense < len(numbers))
    known[known] = numbers[dense[known]] == point_group[known]
    return np.searchsorted(numbers, range_group), np.where(known, dense, -1)


def _sorted_distinct(values: pl.Series) -> Array:
    """The distinct values, sorted (polars' hash-based unique: NumPy 2.4's ``np.unique`` is slow)."""
    return values.cast(pl.Int64).unique().sort().to_numpy()


def int64_of(frame: pl.DataFrame, column: str) -> Array:
    """``column`` of ``frame`` as an int64 array."""
    return frame.get_column(column).cast(pl.Int64).to_numpy()


def latest_at_or_before(left: pl.DataFrame, right: pl.DataFrame, *, on: str, by: Sequence[str]) -> Array | None:
    """Per row of ``left``, the position in ``right`` of the row a backward :func:`join_asof_by`
    matches (``on`` and ``by``: columns of both; of equal keys, the last in ``right``'s order), or
    −1 where none; by one binary search in packed (group, ``on``) keys, with no sort where ``right``
    is in key order already.  ``None`` where the keys do not pack (a null in a key, a span too wide):
    the caller joins instead."""
    if left.get_column(on).null_count() or right.get_column(on).null_count():
        return None
    (lhs, rhs), keys, _ = integer_groups([left, right], by)
    groups = group_numbers(rhs, lhs, keys)
    if groups is None:
        return None
    right_group, left_group = groups
    if not right.height or not left.height:
        return np.full(left.height, -1, np.int64)
    right_t = int64_of(right, on)
    left_t = int64_of(left, on)
    low = min(int(right_t.min()), int(left_t.min()))
    width = max(int(right_t.max()), int(left_t.max())) - low + 1
    if (int(right_group.max()) + 1) * width >= PACKED_LIMIT:
        return None
    packed = right_group * width + (right_t - low)
    order = None if bool(np.all(packed[1:] >= packed[:-1])) else np.argsort(packed, kind="stable")
    if order is not None:
        packed = packed[order]
    floor = left_group * width
    at = np.searchsorted(packed, floor + (left_t - low), "right") - 1
    hit = (left_group >= 0) & (at >= 0) & (packed[np.maximum(at, 0)] >= floor)
    place = at if order is None else order[np.maximum(at, 0)]
    return np.where(hit, place, -1)


__all__ = ["PACKED_LIMIT", "group_numbers", "int64_of", "integer_groups", "join_asof_by", "latest_at_or_before"]
