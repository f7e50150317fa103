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
:func:`latest_containing` goes one step further: the latest-starting interval of a group that
contains another interval, which is not always the latest one to start (an interval that started
later may have ended already), found from that row in a tree of maxima of the ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import polars as pl

from traceq.sorted_search import is_sorted, searchsorted

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
        # Asked of each frame as a query, not of its Series: a literal column (the one source of
        # the CPU rows) answers without being written out row by row.
        if any(f.schema[column] != pl.String or f.select(pl.col(column).null_count()).item() for f in out):
            keys.append(column)
            continue
        values = pl.concat([f.select(pl.col(column).unique()).to_series() for f in out]).unique().sort()
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
    return _grouped(left, right, by, lambda lhs, rhs, keys: lhs.join_asof(rhs, by=keys or None, **options))


def join_by(
    left: pl.DataFrame, right: pl.DataFrame, *, by: Sequence[str], on: Sequence[str], **options: Any
) -> pl.DataFrame:
    """``left.join(right, on=[*by, *on], **options)``, the ``by`` columns grouped by
    :func:`integer_groups` keys (columns and rows as that join returns them; ``by``'s own columns
    are ``left``'s)."""
    return _grouped(left, right, by, lambda lhs, rhs, keys: lhs.join(rhs, on=[*keys, *on], **options))


def _grouped(
    left: pl.DataFrame,
    right: pl.DataFrame,
    by: Sequence[str],
    join: Callable[[pl.DataFrame, pl.DataFrame, list[str]], pl.DataFrame],
) -> pl.DataFrame:
    """``join(left, right, keys)`` of the two frames coded by :func:`integer_groups` on ``by``
    (``right`` without the ``by`` columns that group nothing), without the code columns."""
    (lhs, rhs), keys, codes = integer_groups([left, right], by)
    grouped_away = [c for c in by if c not in keys]
    joined = join(lhs, rhs.drop(grouped_away), keys)
    return joined.drop(codes) if codes else joined


def group_numbers(reference: pl.DataFrame, queries: pl.DataFrame, by: Sequence[str]) -> tuple[Array, Array] | None:
    """Per row of ``reference`` and of ``queries``, its ``by`` group's number: dense, in the sort
    order of the ``by`` values (integer columns), over the groups ``reference`` holds (−1: a query
    row whose group it does not hold); ``None`` where a ``by`` column is no integer column or holds
    a null, or the numbers would not fit.  A column with one value in both frames splits nothing and
    costs a min and a max."""
    if not _integer_keys((reference, queries), by):
        return None
    reference_group = np.zeros(reference.height, np.int64)
    query_group = np.zeros(queries.height, np.int64)
    span = 1
    single = _single_values(reference, queries, by)
    for column in by:
        if column in single:
            continue  # one value everywhere: it splits nothing
        columns = (reference.get_column(column), queries.get_column(column))
        in_reference, in_queries = (c.cast(pl.Int64).to_numpy() for c in columns)
        values = _sorted_distinct(columns[0])
        span *= max(len(values), 1)
        if span >= PACKED_LIMIT:
            return None
        code = np.searchsorted(values, in_queries)
        known = code < len(values)
        known[known] = values[code[known]] == in_queries[known]
        query_group = np.where(known & (query_group >= 0), query_group * len(values) + code, -1)
        reference_group = reference_group * len(values) + np.searchsorted(values, in_reference)
    if span == 1:
        return reference_group, query_group  # (one group: every reference row is in it, a query row in it or none)
    numbers = _sorted_distinct(pl.Series(reference_group))
    dense = np.searchsorted(numbers, query_group)
    known = (query_group >= 0) & (dense < len(numbers))
    known[known] = numbers[dense[known]] == query_group[known]
    return np.searchsorted(numbers, reference_group), np.where(known, dense, -1)


def one_group(reference: pl.DataFrame, queries: pl.DataFrame, by: Sequence[str]) -> bool:
    """Whether ``reference`` and ``queries`` (each at least one row) hold one and the same ``by``
    values (integer columns, no nulls) in every row: then :func:`group_numbers` would number every
    row 0, and its caller needs no numbers.  A null count, a min and a max of each column per frame."""
    if reference.is_empty() or queries.is_empty():
        return False
    if not by:
        return True
    return _integer_keys((reference, queries), by) and _single_values(reference, queries, by) == set(by)


def _integer_keys(frames: Sequence[pl.DataFrame], by: Sequence[str]) -> bool:
    """Whether every ``by`` column of ``frames`` is an integer column without a null (the keys that
    pack into numbers).  Nulls counted by a query: a literal column (one value in every row) is not
    made an array of its height to be counted."""
    if any(not frame.schema[column].is_integer() for frame in frames for column in by):
        return False
    return not (by and any(any(frame.select(pl.col(by).null_count()).row(0)) for frame in frames))


def _single_values(reference: pl.DataFrame, queries: pl.DataFrame, by: Sequence[str]) -> set[str]:
    """The ``by`` columns (null-free) whose reference holds one value (at least one row) that every
    query holds too: a min and a max of each column, in one query per frame."""
    if reference.is_empty():
        return set()
    held = _bounds(reference, by)
    one = [c for c, (low, high) in held.items() if low == high]
    if not one or queries.is_empty():
        return set(one)
    asked = _bounds(queries, one)
    return {c for c in one if asked[c] == held[c]}


def _bounds(frame: pl.DataFrame, columns: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """Each of ``columns``' (min, max), in one query (the columns' passes run side by side)."""
    lows = [pl.col(c).min().alias(f"min {c}") for c in columns]
    highs = [pl.col(c).max().alias(f"max {c}") for c in columns]
    row = frame.lazy().select(*lows, *highs).collect().row(0, named=True)
    return {c: (row[f"min {c}"], row[f"max {c}"]) for c in columns}


def _sorted_distinct(values: pl.Series) -> Array:
    """The distinct values, sorted (polars' hash-based unique: NumPy 2.4's ``np.unique`` is slow)."""
    return values.cast(pl.Int64).unique().sort().to_numpy()


def int64_of(frame: pl.DataFrame, column: str) -> Array:
    """``column`` of ``frame`` as an int64 array."""
    return frame.get_column(column).cast(pl.Int64).to_numpy()


def latest_at_or_before(left: pl.DataFrame, right: pl.DataFrame, *, on: str, by: Sequence[str]) -> Array | None:
    """Per row of ``left``, the position in ``right`` of the row a backward :func:`join_asof_by`
    matches (``on`` and ``by``: columns of both; of equal keys, the last in ``right``'s order), or
    −1 where none (:func:`packed_latest`).  ``None`` where the keys do not pack (a null in a key, a
    span too wide): the caller joins instead."""
    if left.get_column(on).null_count() or right.get_column(on).null_count():
        return None
    (lhs, rhs), keys, _ = integer_groups([left, right], by)
    groups = group_numbers(rhs, lhs, keys)
    if groups is None:
        return None
    right_group, left_group = groups
    return packed_latest(right_group, int64_of(right, on), left_group, int64_of(left, on))


def packed_latest(right_group: Array, right_t: Array, left_group: Array, left_t: Array) -> Array | None:
    """Per left entry, the position of the last right entry of its group (numbers as
    :func:`group_numbers` gives them; −1: a group with no right entry) whose time is at or before
    its own (of equal times, the last in the right entries' order), −1 where none; by one binary
    search in (group, time) keys packed into one int64, with no sort where the right entries are in
    key order.  ``None`` where the keys do not fit in :data:`PACKED_LIMIT`."""
    if not len(right_t) or not len(left_t):
        return np.full(len(left_t), -1, np.int64)
    low = min(int(right_t.min()), int(left_t.min()))
    width = max(int(right_t.max()), int(left_t.max())) - low + 1
    top = int(max(right_group.max(), left_group.max()))
    if (top + 1) * width >= PACKED_LIMIT:
        return None
    if top == 0 and is_sorted(right_t):  # one group in time order: its times are the keys, no array is packed
        at = searchsorted(right_t, left_t, "right") - 1
        return np.where((left_group >= 0) & (at >= 0), at, -1)
    packed = right_group * width + (right_t - low)
    order = None if is_sorted(packed) else np.argsort(packed, kind="stable")
    if order is not None:
        packed = packed[order]
    floor = left_group * width
    at = searchsorted(packed, floor + (left_t - low), "right") - 1
    hit = (left_group >= 0) & (at >= 0) & (packed[np.maximum(at, 0)] >= floor)
    place = at if order is None else order[np.maximum(at, 0)]
    return np.where(hit, place, -1)


def latest_containing(left: pl.DataFrame, right: pl.DataFrame, *, by: Sequence[str]) -> Array:
    """Per row of ``left``, the position in ``right`` of the latest-starting row of its ``by`` group
    whose interval contains the left row's (``right.start_ns <= left.start_ns`` and
    ``left.end_ns <= right.end_ns``; of equal starts, the last in ``right``'s order), −1 where none
    does.  ``start_ns`` and ``end_ns``: columns of both frames; a row with a null in them or in a
    ``by`` column contains, and is contained in, nothing.

    The latest row to start at or before the left start (:func:`packed_latest`) answers where it
    ends late enough; else the answer is the last row before it, in the order of (group, start),
    whose end reaches the left end (:func:`last_at_least`), if that row is of the same group."""
    answer = np.full(left.height, -1, np.int64)
    if left.is_empty() or right.is_empty():
        return answer
    keyed = [frame.with_row_index("_position").drop_nulls([*by, "start_ns", "end_ns"]) for frame in (left, right)]
    (lhs, rhs), keys, _ = integer_groups(keyed, by)
    if lhs.is_empty() or rhs.is_empty():
        return answer
    groups = group_numbers(rhs, lhs, keys)
    if groups is None:  # (a key that is no integer: every pair of a group compared)
        return _latest_containing_joined(lhs, rhs, keys, answer)
    right_group, left_group = groups
    start, end = int64_of(rhs, "start_ns"), int64_of(rhs, "end_ns")
    order = np.lexsort((start, right_group))  # (stable: of equal starts, right's order)
    right_group, start, end = right_group[order], start[order], end[order]
    at = packed_latest(right_group, start, left_group, int64_of(lhs, "start_ns"))
    if at is None:  # (times too far apart to pack with the groups: each group searched alone)
        at = _latest_per_group(right_group, start, left_group, int64_of(lhs, "start_ns"))
    found = last_at_least(end, at, int64_of(lhs, "end_ns"))
    same = (found >= 0) & (right_group[np.maximum(found, 0)] == left_group)
    positions = rhs.get_column("_position").cast(pl.Int64).to_numpy()
    answer[lhs.get_column("_position").to_numpy()] = np.where(same, positions[order[np.maximum(found, 0)]], -1)
    return answer


def _latest_containing_joined(lhs: pl.DataFrame, rhs: pl.DataFrame, keys: Sequence[str], answer: Array) -> Array:
    """:func:`latest_containing` by a join of every left row with every right row of its group."""
    right = rhs.select(
        *keys, pl.col("_position").alias("_at"), pl.col("start_ns").alias("_s"), pl.col("end_ns").alias("_e")
    )
    pairs = lhs.select(*keys, "_position", "start_ns", "end_ns").join(right, on=list(keys), how="inner")
    inside = pairs.filter((pl.col("_s") <= pl.col("start_ns")) & (pl.col("end_ns") <= pl.col("_e")))
    best = inside.sort("_s", "_at").group_by("_position").agg(pl.col("_at").last())
    answer[best.get_column("_position").to_numpy()] = best.get_column("_at").to_numpy()
    return answer


def _latest_per_group(right_group: Array, right_t: Array, left_group: Array, left_t: Array) -> Array:
    """:func:`packed_latest` of right entries sorted by (group, time), one group at a time."""
    at = np.full(len(left_t), -1, np.int64)
    bounds = np.searchsorted(right_group, np.arange(int(right_group[-1]) + 2))
    for group in np.unique(left_group[left_group >= 0]):
        lo, hi = int(bounds[group]), int(bounds[group + 1])
        asked = np.flatnonzero(left_group == group)
        found = np.searchsorted(right_t[lo:hi], left_t[asked], "right") - 1
        at[asked] = np.where(found >= 0, lo + found, -1)
    return at


def last_at_least(values: Array, at: Array, least: Array) -> Array:
    """Per query ``k``, the largest position ``i <= at[k]`` with ``values[i] >= least[k]``, −1 where
    there is none (or ``at[k]`` is −1).

    A query the value at ``at[k]`` answers costs one comparison; the others walk a tree of the
    values' maxima, all at once: up from their leaf until a left sibling holds a large enough value
    (every position between it and the leaf is then too small), down that sibling's rightmost
    large enough branch.  Two passes of the tree's height, each a few NumPy operations over the
    queries still walking."""
    answer = np.full(len(at), -1, np.int64)
    if not len(values) or not len(at):
        return answer
    start = np.maximum(at, 0)
    direct = (at >= 0) & (values[start] >= least)
    answer[direct] = at[direct]
    walking = np.flatnonzero((at >= 0) & ~direct)
    if not walking.size:
        return answer
    size = 1 << max(len(values) - 1, 1).bit_length()
    tree = np.full(2 * size, np.iinfo(np.int64).min, np.int64)  # (leaves past the values reach nothing)
    tree[size : size + len(values)] = values
    width = size
    while width > 1:
        width //= 2
        tree[width : 2 * width] = np.maximum(tree[2 * width : 4 * width : 2], tree[2 * width + 1 : 4 * width : 2])
    node = start[walking] + size
    need = least[walking]
    reached = np.zeros(walking.size, np.int64)  # (the subtree root that holds the answer; 0: none)
    climbing = np.arange(walking.size)
    while climbing.size:
        here = node[climbing]
        hit = ((here & 1) == 1) & (tree[here - 1] >= need[climbing])
        reached[climbing[hit]] = here[hit] - 1
        climbing = climbing[~hit]
        node[climbing] >>= 1
        climbing = climbing[node[climbing] > 1]  # (at the root: nothing to the left of the leaf)
    descending = np.flatnonzero(reached)
    node, need = reached[descending], need[descending]
    inner = np.flatnonzero(node < size)
    while inner.size:  # (the right child where it reaches: the largest position; else the left, which does)
        right = 2 * node[inner] + 1
        node[inner] = np.where(tree[right] >= need[inner], right, right - 1)
        inner = inner[node[inner] < size]
    answer[walking[descending]] = node - size
    return answer


__all__ = [
    "PACKED_LIMIT",
    "group_numbers",
    "int64_of",
    "integer_groups",
    "join_asof_by",
    "join_by",
    "last_at_least",
    "latest_at_or_before",
    "latest_containing",
    "packed_latest",
]
