"""The innermost range open at a point: the binary-search path (asked per point, or per segment
between the ranges' bounds), the as-of-join path and the definition (the latest-starting range of
the point's thread that contains it) agree."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses import memo, nesting
from traceq.analyses.nesting import innermost_at, prepared

SETTINGS = settings(deadline=None, max_examples=300)
BY = ("source", "pid", "tid")
THREADS = [("r0.json", 1, 1), ("r0.json", 1, 2), ("r1.json", 1, 1), ("r1.json", 7, 3)]


def _nested(draw: Any, lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
    """Properly nested ranges inside [lo, hi): siblings side by side, each with its own children."""
    out: list[tuple[int, int]] = []
    at = lo
    while depth and at < hi and draw(st.booleans()):
        start = draw(st.integers(at, hi - 1))
        end = draw(st.integers(start + 1, hi))
        out.append((start, end))
        out.extend(_nested(draw, start, end, depth - 1))
        at = end
    return out


@st.composite
def nested_case(draw: Any) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Ranges that nest properly on each thread, and points on known and unknown threads; or, one
    time in two, every range and point on one thread (the usual part: no group numbers)."""
    rows = []
    one = draw(st.booleans())
    threads = THREADS[:1] if one else draw(st.lists(st.sampled_from(THREADS), max_size=3, unique=True))
    for source, pid, tid in threads:
        rows += [(source, pid, tid, s, e) for s, e in _nested(draw, 0, 40, 4)]
    return _ranges(rows), _points(draw, THREADS[:1] if one else None)


@st.composite
def any_case(draw: Any) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Ranges that may overlap without nesting (NVTX start/end ranges), zero-length ones included;
    one time in two all on one thread, with the points."""
    rows = []
    threads = THREADS[:1] if draw(st.booleans()) else THREADS
    for _ in range(draw(st.integers(0, 14))):
        source, pid, tid = draw(st.sampled_from(threads))
        start = draw(st.integers(0, 40))
        rows.append((source, pid, tid, start, start + draw(st.integers(0, 12))))
    return _ranges(rows), _points(draw, threads if len(threads) == 1 else None)


def _ranges(rows: list[tuple[str, int, int, int, int]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        rows,
        schema={"source": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
        orient="row",
    )
    return prepared(frame, BY)


def _points(draw: Any, only: list[tuple[str, int, int]] | None = None) -> pl.DataFrame:
    threads = only or [*THREADS, ("r2.json", 1, 1)]  # (one thread without ranges)
    n = draw(st.integers(0, 16))
    # (ids in falling order: an answer in id order is not one in the points' order)
    rows = [(*draw(st.sampled_from(threads)), n - i, draw(st.integers(-1, 54))) for i in range(n)]
    return pl.DataFrame(
        rows,
        schema={"source": pl.String, "pid": pl.Int64, "tid": pl.Int64, "_point": pl.UInt32, "_t": pl.Int64},
        orient="row",
    )


def _by_joins(ranges: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nesting, "_innermost_by_search", lambda *_: None)
        return innermost_at(ranges, points, BY)


def _searched(ranges: pl.DataFrame, points: pl.DataFrame, *, per_segment: bool) -> pl.DataFrame:
    """The binary-search path, asked once per segment or once per point whatever the counts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nesting, "SEGMENT_RATIO", 0 if per_segment else 1 << 40)
        return innermost_at(ranges, points, BY)


def _answers(found: pl.DataFrame, points: pl.DataFrame) -> dict[int, int | None]:
    """The answer per point, checked to come one row per point in the points' order."""
    assert found.get_column("_range").dtype == pl.UInt32
    assert found.get_column("_point").to_list() == points.get_column("_point").to_list()
    return dict(found.select("_point", "_range").iter_rows())


def _latest_starting_containing(ranges: pl.DataFrame, points: pl.DataFrame) -> dict[int, int | None]:
    """The definition, range by range: of the ranges of the point's thread with start <= t < end, the
    latest-starting (then the shorter: the last in ``prepared`` order)."""
    out: dict[int, int | None] = {}
    table = ranges.rows(named=True)
    for point in points.rows(named=True):
        inside = [
            r["_range"]
            for r in table
            if (r["source"], r["pid"], r["tid"]) == (point["source"], point["pid"], point["tid"])
            and r["start_ns"] <= point["_t"] < r["end_ns"]
        ]
        out[point["_point"]] = max(inside) if inside else None
    return out


@SETTINGS
@given(nested_case())
def test_on_nested_ranges_the_innermost_is_the_latest_starting_range_that_contains_the_point(
    case: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    ranges, points = case
    want = _latest_starting_containing(ranges, points)
    assert _answers(innermost_at(ranges, points, BY), points) == want
    assert _answers(_searched(ranges, points, per_segment=True), points) == want
    assert _answers(_searched(ranges, points, per_segment=False), points) == want
    assert _answers(_by_joins(ranges, points), points) == want


@SETTINGS
@given(any_case())
def test_on_any_ranges_both_paths_give_one_answer_and_it_contains_the_point(
    case: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    ranges, points = case
    searched = _answers(_searched(ranges, points, per_segment=True), points)
    assert searched == _answers(_searched(ranges, points, per_segment=False), points)
    assert searched == _answers(_by_joins(ranges, points), points)
    containing = _latest_starting_containing(ranges, points)
    by_range = {r["_range"]: r for r in ranges.rows(named=True)}
    for point in points.rows(named=True):
        found = searched[point["_point"]]
        assert (found is None) == (containing[point["_point"]] is None)
        if found is not None:
            assert by_range[found]["start_ns"] <= point["_t"] < by_range[found]["end_ns"]


@SETTINGS
@given(any_case())
def test_points_the_depth_rule_cannot_answer_get_the_latest_starting_range_that_contains_them(
    case: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    """What answers the points of threads whose ranges do not nest, asked of every point: the
    definition's range, and no row for a point inside none."""
    ranges, points = case
    found = nesting._latest_containing(ranges, points, BY)
    assert found.get_column("_range").dtype == pl.UInt32
    want = {p: r for p, r in _latest_starting_containing(ranges, points).items() if r is not None}
    assert dict(found.select("_point", "_range").iter_rows()) == want


def test_times_too_wide_to_pack_take_the_join_path_with_the_same_answer() -> None:
    base = 1 << 62
    ranges = _ranges([("r0.json", 1, 1, 0, base), ("r0.json", 1, 1, 5, 9), ("r0.json", 1, 2, base - 9, base)])
    points = pl.DataFrame(
        {"source": ["r0.json"] * 3, "pid": [1] * 3, "tid": [1, 1, 2], "_point": [0, 1, 2], "_t": [6, 10, base - 1]},
        schema_overrides={"_point": pl.UInt32},
    )
    assert nesting._innermost_by_search(ranges, points, ["tid"]) is None  # (source, pid: one value)
    assert _answers(innermost_at(ranges, points, BY), points) == {0: 1, 1: 0, 2: 2}


def test_a_null_group_key_takes_the_join_path() -> None:
    ranges = pl.DataFrame(
        {"source": ["r0.json"], "pid": [None], "tid": [1], "start_ns": [0], "end_ns": [10]},
        schema_overrides={"pid": pl.Int64},
    )
    ranges = prepared(ranges, BY)
    points = pl.DataFrame(
        {"source": ["r0.json"], "pid": [None], "tid": [1], "_point": [0], "_t": [5]},
        schema_overrides={"pid": pl.Int64, "_point": pl.UInt32},
    )
    assert nesting._innermost_by_search(ranges, points, ["pid", "tid"]) is None
    assert _answers(innermost_at(ranges, points, BY), points) == _answers(_by_joins(ranges, points), points)


@SETTINGS
@given(any_case())
def test_a_ranges_depth_counts_the_earlier_ranges_of_its_thread_still_open_at_its_start(
    case: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    """``prepared``'s depth, by the search and by the joins: of the ranges before it in (start, end
    descending) order on its thread, those that end after it starts."""
    ranges, _ = case
    rows = ranges.rows(named=True)
    want = [
        sum(
            1
            for j in rows[: r["_range"]]
            if (j["source"], j["pid"], j["tid"]) == (r["source"], r["pid"], r["tid"]) and j["end_ns"] > r["start_ns"]
        )
        for r in rows
    ]
    assert ranges.get_column("_range").to_list() == list(range(len(rows)))
    assert ranges.get_column("_depth").to_list() == want
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nesting, "_depths_by_search", lambda *_: None)
        raw = ranges.select("source", "pid", "tid", "start_ns", "end_ns")
        assert prepared(raw, BY).get_column("_depth").to_list() == want


class _Calls:
    """What the points are made of (a table's launching calls, in the analyses)."""


def _counting_innermost(patch: pytest.MonkeyPatch) -> list[int]:
    asked: list[int] = []
    real = nesting.innermost_at

    def counted(ranges: pl.DataFrame, points: pl.DataFrame, by: Any) -> pl.DataFrame:
        asked.append(points.height)
        return real(ranges, points, by)

    patch.setattr(nesting, "innermost_at", counted)
    return asked


def test_the_same_points_and_ranges_of_the_same_content_are_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operators and the phases of a trace without operators: the same ranges, in other frames
    (other columns beside them, another row order), asked about the very same launching calls."""
    memo.forget()
    asked = _counting_innermost(monkeypatch)
    ranges = _ranges([("r0.json", 1, 1, 0, 30), ("r0.json", 1, 1, 5, 9), ("r0.json", 1, 2, 3, 20)])
    points = pl.DataFrame(
        {"source": ["r0.json", "r0.json", "r0.json"], "pid": [1, 1, 1], "tid": [1, 1, 2], "_t": [6, 12, 4]}
    ).with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_point"))
    calls = _Calls()
    first = nesting.innermost_of(ranges, points, BY, made_of=calls)
    same = ranges.with_columns(pl.lit("x").alias("name")).reverse()
    assert nesting.innermost_of(same, points.select("_point", *BY, "_t"), BY, made_of=calls) is first
    assert asked == [3]
    assert _answers(first, points) == _latest_starting_containing(ranges, points)
    # Other points (another object), or ranges that differ in one bound: asked again, and answered.
    other = nesting.innermost_of(ranges, points, BY, made_of=_Calls())
    assert other is not first and asked == [3, 3]
    moved = ranges.with_columns(pl.when(pl.col("_range") == 1).then(7).otherwise(pl.col("start_ns")).alias("start_ns"))
    found = nesting.innermost_of(moved, points, BY, made_of=calls)
    assert asked == [3, 3, 3] and _answers(found, points) == _latest_starting_containing(moved, points)
    memo.forget()  # (once a report is done: nothing is kept)
    nesting.innermost_of(moved, points, BY, made_of=calls)
    assert asked == [3, 3, 3, 3]
