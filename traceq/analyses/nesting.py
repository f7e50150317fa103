"""Nested CPU ranges on a thread: which one is innermost at a point, and each one's chain of parents.

The operator and module attribution (:mod:`traceq.analyses.operators`) and the phases
(:mod:`traceq.analyses.phases`) ask, for many points ``t`` on a thread, which of a set of
half-open ranges ``[start_ns, end_ns)`` recorded on it is the **innermost open at t**
(``start_ns <= t < end_ns``; zero-length ranges contain nothing), and for each range the names of
the ranges around it, outermost first.  Everything is a few sorts, searches and joins, never a
loop per row.

How: with the ranges of one thread sorted by (start, end descending, position), a range's
**depth** is its position ``k`` minus the number of ranges that ended by its start; at ``t`` the
number of open ranges is ``#(start <= t) − #(end <= t)`` = ``D``, and on a properly nested thread
the innermost open one is the latest-starting range of depth ``D − 1`` that started by ``t``
(ranges of one depth are disjoint).  A thread whose ranges are not properly nested (NVTX
start/end ranges may overlap) can break that; every answer is therefore checked (the range must
contain ``t``) and the points it fails are answered by the latest-starting range that contains
them, which is the innermost one wherever ranges nest.

:func:`innermost_at` asks that of millions of points (every launching call of a 20 M-row trace),
where the ranges are a few hundred thousand: the rule is then asked once per segment between two
consecutive bounds of a thread's ranges (the same ranges are open throughout one), and each point
is one search for its segment.  The counts, the look-up by depth and :func:`prepared`'s depths
are binary searches (numpy) in the ranges' sorted keys (:func:`traceq.analyses.asof.group_numbers`
numbers the threads), where a key is (group, time) or (group, depth, time) packed into one int64:
``group × width + t − t_min`` with ``width`` the span of every time involved, so that the groups
do not mix.  Where the packing would not fit in 62 bits, or a group column holds a null, the same
rule runs as polars as-of joins instead; both give the same answer.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from traceq.analyses.asof import (
    PACKED_LIMIT,
    Array,
    group_numbers,
    int64_of,
    integer_groups,
    join_asof_by,
    latest_containing,
    one_group,
    packed_latest,
)
from traceq.analyses.launch_link import as_index
from traceq.analyses.memo import new_slot
from traceq.sorted_search import distinct, searchsorted

_IDX = "_range"


def prepared(ranges: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """``ranges`` (``by`` columns, start_ns, end_ns, ...) without zero-length rows, with a dense
    ``_range`` index (UInt32, its position in the result) and its ``_depth`` (UInt32) among the
    ranges of its ``by`` group; sorted by ``by``, start_ns, end_ns descending, original position."""
    (ranges,), by, codes = integer_groups([ranges], by)
    keyed = (
        ranges.filter(pl.col("end_ns") > pl.col("start_ns"))
        .with_row_index("_pos")
        .sort([*by, "start_ns", "end_ns", "_pos"], descending=[False] * len(by) + [False, True, False])
        .drop("_pos")
        .with_row_index(_IDX)
    )
    searched = _depths_by_search(keyed, by)
    if searched is not None:
        return keyed.with_columns(pl.Series("_depth", searched, dtype=pl.UInt32)).drop(codes)
    k = pl.int_range(pl.len()).over(by) if by else pl.int_range(pl.len())
    ended = _count_ended(keyed, keyed.select(*by, _IDX, pl.col("start_ns").alias("_t")), by)
    depth = keyed.with_columns(k.alias("_k")).join(ended, on=_IDX, how="left")
    return depth.with_columns((pl.col("_k") - pl.col("_ended")).cast(pl.UInt32).alias("_depth")).drop(
        "_k", "_ended", *codes
    )


def _depths_by_search(keyed: pl.DataFrame, by: Sequence[str]) -> Array | None:
    """The ``_depth`` of every range of ``keyed`` (sorted as :func:`prepared` sorts; ``by``: integer
    columns) by one binary search in packed (group, end) keys: the ranges before a range in that
    order are those of the earlier groups and its group's earlier ones, and of those, the ones that
    ended by its start are all of the earlier groups' and the ended ones of its own, so its depth is
    its position minus how many packed ends lie at or before its packed start.  ``None`` where the
    keys do not pack."""
    groups = group_numbers(keyed, keyed, by)
    if groups is None:
        return None
    group = groups[0]
    if not len(group):
        return np.zeros(0, np.int64)
    start = int64_of(keyed, "start_ns")
    end = int64_of(keyed, "end_ns")
    low = int(start.min())
    width = int(end.max()) - low + 1
    if (int(group.max()) + 1) * width >= PACKED_LIMIT:
        return None
    ends = np.sort(group * width + (end - low), kind="stable")  # (nearly sorted: see _innermost_by_search)
    return np.arange(len(start), dtype=np.int64) - np.searchsorted(ends, group * width + (start - low), "right")


def _count_ended(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Per point (``by``, ``_range`` or ``_point`` id, ``_t``): how many ``ranges`` of its group
    ended by ``_t`` (``end_ns <= _t``), as ``_ended``."""
    return _count_at_or_before(ranges, "end_ns", points, by, "_ended")


def _count_at_or_before(
    ranges: pl.DataFrame, column: str, points: pl.DataFrame, by: Sequence[str], alias: str
) -> pl.DataFrame:
    ident = [c for c in points.columns if c not in (*by, "_t")]
    table = (
        ranges.select(*by, pl.col(column).alias("_t"))
        .sort([*by, "_t"])
        .with_columns((pl.int_range(pl.len()).over(by) if by else pl.int_range(pl.len())).alias("_n") + 1)
        .unique(subset=[*by, "_t"], keep="last", maintain_order=True)
    )
    found = join_asof_by(points.sort("_t"), table, on="_t", by=by, strategy="backward", check_sortedness=False)
    return found.select(*ident, pl.col("_n").fill_null(0).cast(pl.Int64).alias(alias))


def innermost_at(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """For each point (``points``: ``by`` columns, ``_point`` id, ``_t`` ns), the ``_range`` index
    of the innermost range of :func:`prepared` ``ranges`` open at ``_t`` (null where none is).

    Columns: _point, _range; one row per point, in the order of ``points``."""
    (ranges, points), by, _ = integer_groups([ranges, points], by)
    pts = points.select(*by, "_point", "_t")
    searched = _innermost_by_search(ranges, pts, by)
    if searched is not None:
        return searched
    started = _count_at_or_before(ranges, "start_ns", pts, by, "_started")
    ended = _count_ended(ranges, pts, by)
    depth = (
        pts.join(started, on="_point")
        .join(ended, on="_point")
        .with_columns((pl.col("_started") - pl.col("_ended") - 1).alias("_want"))
    )
    open_ = depth.filter(pl.col("_want") >= 0).with_columns(pl.col("_want").cast(pl.UInt32).alias("_depth"))
    right = ranges.select(*by, "_depth", pl.col("start_ns").alias("_t"), _IDX, "end_ns").sort("_t")
    found = join_asof_by(
        open_.sort("_t"), right, on="_t", by=[*by, "_depth"], strategy="backward", check_sortedness=False
    ).with_columns(pl.when(pl.col("end_ns") > pl.col("_t")).then(pl.col(_IDX)).alias(_IDX))
    failed = found.filter(pl.col(_IDX).is_null()).select(*by, "_point", "_t")
    answered = found.filter(pl.col(_IDX).is_not_null()).select("_point", _IDX)
    if failed.height:
        answered = pl.concat([answered, _latest_containing(ranges, failed, by)])
    return pts.select("_point").join(answered, on="_point", how="left", maintain_order="left")


def innermost_of(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str], *, made_of: object) -> pl.DataFrame:
    """:func:`innermost_at`, for ``points`` made of the object ``made_of`` (the same points, in the
    same order, whenever it is the same object: a table's launching calls).  The last answer is
    kept, and a caller asking about the points of the same object and ranges of the same content
    (each ``_range``'s ``by`` columns, bounds and depth) reads it instead of asking again: on a
    trace whose processes record no operator, their operators are their plain ranges, which are
    the phase ranges too, so the operators and the phases ask the same question of every launch."""
    key = (tuple(by), points.height, ranges.select(_IDX, *by, "start_ns", "end_ns", "_depth").sort(_IDX))
    with _LAST_LOCK:
        if _LAST and _LAST[0][0]() is made_of and _same_key(_LAST[0][1], key):
            return _LAST[0][2]
    found = innermost_at(ranges, points, by)
    with _LAST_LOCK:
        _LAST[:] = [(weakref.ref(made_of), key, found)]
    return found


_LAST: Final[list[tuple[weakref.ref[object], tuple[tuple[str, ...], int, pl.DataFrame], pl.DataFrame]]] = new_slot()
"""The last answer of :func:`innermost_of` (emptied with the memos once a report is done)."""
_LAST_LOCK: Final = threading.Lock()


def _same_key(
    kept: tuple[tuple[str, ...], int, pl.DataFrame], asked: tuple[tuple[str, ...], int, pl.DataFrame]
) -> bool:
    return kept[:2] == asked[:2] and kept[2].schema == asked[2].schema and kept[2].equals(asked[2])


def _innermost_by_search(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame | None:
    """:func:`innermost_at` by binary search in packed keys (the module's docstring); ``None`` where
    the keys do not pack (the caller joins instead).  ``by``: integer columns (:func:`integer_groups`).

    Where the points outnumber the ranges' bounds :data:`SEGMENT_RATIO` times over, the rule is
    asked once per **segment** instead: between two consecutive bounds (starts and ends) of a
    group's ranges, the same ranges have started and ended, so every point of the segment has the
    answer of its first ns, and each point is then one search for its segment and one look-up."""
    if one_group(ranges, points, by):  # (one thread's ranges and points, the usual part: no numbers)
        range_group: Array = np.zeros(ranges.height, np.int64)
        point_group: Array | int = 0
    elif (groups := group_numbers(ranges, points, by)) is not None:
        range_group, point_group = groups
    else:
        return None
    point_ids = points.get_column("_point")
    if ranges.is_empty() or points.is_empty():
        return points.select("_point", pl.lit(None, dtype=pl.UInt32).alias(_IDX))
    t = int64_of(points, "_t")
    rule = _DepthRule.of(ranges, range_group, int(t.min()), int(t.max()))
    if rule is None:
        return None
    keys = rule.keys(point_group, t)  # (a point of no group: below every bound, so inside no range)
    if len(keys) < SEGMENT_RATIO * 2 * len(rule.starts):
        answer = rule.answer(keys)
        return None if answer is None else pl.DataFrame([point_ids, _range_ids(answer)])
    bounds = distinct(np.concatenate([rule.starts, rule.ends]), runs=True)  # (two sorted runs)
    per_segment = rule.answer(bounds)
    if per_segment is None:
        return None
    # Index 0 of the look-up answers a point before every bound (or of no group): no range.
    look_up = _range_ids(np.concatenate(([-1], per_segment)))
    segment = pl.Series(searchsorted(bounds, keys, "right"))
    return pl.DataFrame([point_ids, look_up.gather(segment)])


def _range_ids(answer: Array) -> pl.Series:
    """``_range`` ids (−1: none) as the UInt32 column :func:`innermost_at` answers with (null: none)."""
    return as_index(answer).cast(pl.UInt32).alias(_IDX)


SEGMENT_RATIO: Final = 2
""":func:`_innermost_by_search` answers per segment where there are this many points per bound."""


@dataclass(frozen=True)
class _DepthRule:
    """The ranges of :func:`prepared` (in their rows' order) with their (group, time) keys packed, and
    the rule that answers a packed point key (the module's docstring)."""

    ranges: pl.DataFrame
    group: Array
    start: Array
    end: Array
    depth: Array
    low: int
    width: int
    starts: Array
    """Every range's packed start, sorted."""
    ends: Array
    """Every range's packed end, sorted."""

    @classmethod
    def of(cls, ranges: pl.DataFrame, group: Array, t_min: int, t_max: int) -> _DepthRule | None:
        """The rule for ``ranges`` (``group``: each one's group number) and points between ``t_min``
        and ``t_max``; ``None`` where the keys do not pack."""
        start = int64_of(ranges, "start_ns")
        end = int64_of(ranges, "end_ns")
        low = min(int(start.min()), t_min)
        width = max(int(end.max()), t_max) - low + 1
        if (int(group.max()) + 1) * width >= PACKED_LIMIT:
            return None
        # The ranges come sorted by (group, start) and their ends nearly so: NumPy's merge sort finds
        # those runs (its default sort does not).
        starts = np.sort(group * width + (start - low), kind="stable")
        ends = np.sort(group * width + (end - low), kind="stable")
        return cls(ranges, group, start, end, int64_of(ranges, "_depth"), low, width, starts, ends)

    def keys(self, group: Array | int, t: Array) -> Array:
        """Points' packed keys (``group``: each point's, −1 below every range's key, or the one
        group of every point)."""
        keys = t - self.low
        if not isinstance(group, int) or group:
            keys += group * self.width  # (in place: no third array of the points' size)
        return keys

    def answer(self, keys: Array) -> Array | None:
        """Per packed key, the ``_range`` of the innermost range open there, −1 where none; ``None``
        where the (group, depth) keys do not pack."""
        # Open at t: started by t minus ended by t (each range counts in its own group only).
        open_n = searchsorted(self.starts, keys, "right") - searchsorted(self.ends, keys, "right")
        asked = np.flatnonzero(open_n > 0)
        group = keys[asked] // self.width
        t = keys[asked] - group * self.width + self.low
        # The latest-starting range of depth D - 1 that started by t, in the point's group: the
        # groups of that search are (group, depth).
        depths_n = int(self.depth.max()) + 1
        at = packed_latest(self.group * depths_n + self.depth, self.start, group * depths_n + open_n[asked] - 1, t)
        if at is None:
            return None
        candidate = np.maximum(at, 0)
        hit = (at >= 0) & (self.end[candidate] > t)
        ids = self.ranges.get_column(_IDX).to_numpy()
        answer = np.full(len(keys), -1, np.int64)
        answer[asked[hit]] = ids[candidate[hit]]
        failed = np.flatnonzero(~hit)
        if len(failed):
            # A thread whose ranges do not nest: the latest-starting range that contains the point.
            queries = pl.DataFrame({"_g": group[failed], "_point": failed, "_t": t[failed]})
            rest = _latest_containing(self.ranges.with_columns(pl.Series("_g", self.group)), queries, ["_g"])
            answer[asked[rest.get_column("_point").to_numpy()]] = rest.get_column(_IDX).to_numpy()
        return answer


def _latest_containing(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """The latest-starting range of each point's group that contains it, of equal starts the last in
    ``_range`` order (the innermost): the points the depth rule could not answer, on threads whose
    ranges do not nest.  A point ``t`` is the interval ``[t, t + 1)``
    (:func:`~traceq.analyses.asof.latest_containing`), so that however many points fail, no point
    is paired with every range of its thread.  Points inside no range are left out."""
    right = ranges.sort(_IDX).select(*by, _IDX, "start_ns", "end_ns")
    left = points.select(*by, "_point", pl.col("_t").alias("start_ns"), (pl.col("_t") + 1).alias("end_ns"))
    at = latest_containing(left, right, by=by)
    found = pl.Series(at >= 0)
    return pl.DataFrame(
        [left.get_column("_point").filter(found), right.get_column(_IDX).gather(pl.Series(at).filter(found))]
    ).with_columns(pl.col(_IDX).cast(pl.UInt32))


def paths(ranges: pl.DataFrame, by: Sequence[str], label: str, sep: str = "/") -> pl.DataFrame:
    """Per range of :func:`prepared` ``ranges``: ``_path``, the ``label`` column of every range
    around it and its own, outermost first, joined by ``sep`` (String).  Columns: _range, _path.

    Built top-down, one depth at a time: a range's parent (:func:`innermost_parent`) is one level
    up, so its path is made already, and each path is written once (not once per ancestor)."""
    parents = innermost_parent(ranges, by)
    table = ranges.select(_IDX, "_depth", pl.col(label).cast(pl.String).alias("_label")).join(
        parents, on=_IDX, how="left"
    )
    n = table.height
    if not n:
        return table.select(_IDX, pl.col("_label").alias("_path"))
    ids = table.get_column(_IDX).cast(pl.Int64).to_numpy()
    place = np.full(int(ids.max()) + 1, -1, np.int64)  # a range's row in ``table``
    place[ids] = np.arange(n)
    parent_ids = table.get_column("_parent").cast(pl.Int64).fill_null(-1).to_numpy()
    parent = np.where(parent_ids >= 0, place[np.maximum(parent_ids, 0)], -1)  # the parent's row
    depth = table.get_column("_depth").cast(pl.Int64).to_numpy()
    order = np.argsort(depth, kind="stable")  # the rows, one depth after the other
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    within = np.empty(n, np.int64)  # a row's place among the rows of its depth
    within[order] = np.arange(n) - bounds[depth[order]]
    own = table.get_column("_label")
    levels: list[pl.Series] = []
    for d in range(len(bounds) - 1):
        rows = order[bounds[d] : bounds[d + 1]]
        up = parent[rows]  # (innermost_parent looks one depth up: their paths are the last level's)
        if not levels or not (up >= 0).any():
            levels.append(own.gather(rows))
            continue
        frame = pl.DataFrame(
            {
                "_up": levels[-1].gather(as_index(np.where(up >= 0, within[np.maximum(up, 0)], -1))),
                "_own": own.gather(rows),
            }
        )
        levels.append(
            frame.select(
                pl.when(pl.col("_up").is_not_null())
                .then(pl.concat_str(pl.col("_up"), pl.lit(sep), pl.col("_own")))
                .otherwise(pl.col("_own"))
            ).to_series()
        )
    by_depth = pl.concat(levels)
    at = np.empty(n, np.int64)
    at[order] = np.arange(n)
    return pl.DataFrame({_IDX: table.get_column(_IDX), "_path": by_depth.gather(pl.Series(at))})


def innermost_parent(ranges: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Per range of :func:`prepared` ``ranges``, the innermost other range around it (``_parent``,
    null at the top): the latest-starting range one level up that started by its start and
    contains it.  Columns: _range, _parent."""
    (ranges,), by, _ = integer_groups([ranges], by)
    inner = ranges.filter(pl.col("_depth") > 0).select(
        *by, _IDX, (pl.col("_depth") - 1).cast(pl.UInt32).alias("_depth"), pl.col("start_ns").alias("_t"), "end_ns"
    )
    right = ranges.select(
        *by, "_depth", pl.col("start_ns").alias("_t"), pl.col(_IDX).alias("_parent"), pl.col("end_ns").alias("_pe")
    ).sort("_t")
    found = join_asof_by(
        inner.sort("_t"), right, on="_t", by=[*by, "_depth"], strategy="backward", check_sortedness=False
    ).with_columns(pl.when(pl.col("_pe") >= pl.col("end_ns")).then(pl.col("_parent")).alias("_parent"))
    return ranges.select(_IDX).join(found.select(_IDX, "_parent"), on=_IDX, how="left")
