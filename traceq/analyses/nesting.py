"""Nested CPU ranges on a thread: which one is innermost at a point, and each one's chain of parents.

The operator and module attribution (:mod:`traceq.analyses.operators`) and the phases
(:mod:`traceq.analyses.phases`) ask, for many points ``t`` on a thread, which of a set of
half-open ranges ``[start_ns, end_ns)`` recorded on it is the **innermost open at t**
(``start_ns <= t < end_ns``; zero-length ranges contain nothing), and for each range the names of
the ranges around it, outermost first.  Everything is a few sorted joins, never a loop per row.

How: with the ranges of one thread sorted by (start, end descending, position), a range's
**depth** is its position ``k`` minus the number of ranges that ended by its start; at ``t`` the
number of open ranges is ``#(start <= t) − #(end <= t)`` = ``D``, and on a properly nested thread
the innermost open one is the latest-starting range of depth ``D − 1`` that started by ``t``
(ranges of one depth are disjoint).  A thread whose ranges are not properly nested (NVTX
start/end ranges may overlap) can break that; every answer is therefore checked (the range must
contain ``t``) and the points it fails are answered by the latest-starting range that contains
them, which is the innermost one wherever ranges nest.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceq.analyses.asof import integer_groups, join_asof_by

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
    k = pl.int_range(pl.len()).over(by) if by else pl.int_range(pl.len())
    ended = _count_ended(keyed, keyed.select(*by, _IDX, pl.col("start_ns").alias("_t")), by)
    depth = keyed.with_columns(k.alias("_k")).join(ended, on=_IDX, how="left")
    return depth.with_columns((pl.col("_k") - pl.col("_ended")).cast(pl.UInt32).alias("_depth")).drop(
        "_k", "_ended", *codes
    )


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

    Columns: _point, _range; one row per point."""
    (ranges, points), by, _ = integer_groups([ranges, points], by)
    pts = points.select(*by, "_point", "_t")
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
    return pts.select("_point").join(answered, on="_point", how="left")


def _latest_containing(ranges: pl.DataFrame, points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """The latest-starting range of each point's group that contains it (the points the depth rule
    could not answer: improperly nested ranges; few)."""
    right = ranges.select(*by, _IDX, "start_ns", "end_ns")
    joined = points.join(right, on=list(by), how="inner") if by else points.join(right, how="cross")
    inside = joined.filter((pl.col("start_ns") <= pl.col("_t")) & (pl.col("_t") < pl.col("end_ns")))
    best = inside.sort("start_ns", _IDX).group_by("_point").agg(pl.col(_IDX).last())
    return best.select("_point", pl.col(_IDX).cast(pl.UInt32))


def paths(ranges: pl.DataFrame, by: Sequence[str], label: str, sep: str = "/") -> pl.DataFrame:
    """Per range of :func:`prepared` ``ranges``: ``_path``, the ``label`` column of every range
    around it and its own, outermost first, joined by ``sep`` (String).  Columns: _range, _path."""
    parents = innermost_parent(ranges, by)
    table = ranges.select(_IDX, pl.col(label).cast(pl.String).alias("_path")).join(parents, on=_IDX, how="left")
    # Each pass prefixes one more ancestor; a thread nests a few dozen deep at most.
    current = table.with_columns(pl.col("_parent").alias("_up"))
    labels = table.select(
        pl.col(_IDX).alias("_up"), pl.col("_path").alias("_up_label"), pl.col("_parent").alias("_next")
    )
    while current.get_column("_up").is_not_null().any():
        current = (
            current.join(labels, on="_up", how="left")
            .with_columns(
                pl.when(pl.col("_up").is_not_null())
                .then(pl.concat_str(pl.col("_up_label"), pl.lit(sep), pl.col("_path")))
                .otherwise(pl.col("_path"))
                .alias("_path"),
                pl.col("_next").alias("_up"),
            )
            .drop("_up_label", "_next")
        )
    return current.select(_IDX, "_path")


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
