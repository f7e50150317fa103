"""Integer grouping keys: the as-of join they make is polars' own join, row for row."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses.asof import (
    group_numbers,
    integer_groups,
    join_asof_by,
    join_by,
    last_at_least,
    latest_at_or_before,
    latest_containing,
    one_group,
    packed_latest,
)
from traceq.literal_columns import with_literals

from ..test_literal_columns import held_bytes

SETTINGS = settings(deadline=None, max_examples=200)

SOURCES = st.sampled_from([["r0.json"], ["r0.json", "r1.json"], ["r1.json", "r0.json", None]])


def frame(draw: Any, sources: list[str | None], name: str) -> pl.DataFrame:
    n = draw(st.integers(0, 12))
    return pl.DataFrame(
        {
            "source": [draw(st.sampled_from(sources)) for _ in range(n)],
            "tid": [draw(st.integers(1, 3)) for _ in range(n)],
            "_t": sorted(draw(st.integers(0, 30)) for _ in range(n)),
            name: list(range(n)),
        },
        schema={"source": pl.String, "tid": pl.Int64, "_t": pl.Int64, name: pl.Int64},
    )


@st.composite
def sides(draw: Any) -> tuple[pl.DataFrame, pl.DataFrame]:
    sources = draw(SOURCES)
    return frame(draw, sources, "left_id"), frame(draw, sources, "right_id")


@SETTINGS
@given(sides(), st.sampled_from(["backward", "forward"]))
def test_the_join_is_the_one_polars_makes_by_the_string_keys(pair: tuple[pl.DataFrame, pl.DataFrame], how: str) -> None:
    left, right = pair
    options: dict[str, Any] = {"on": "_t", "strategy": how, "check_sortedness": False}
    want = left.join_asof(right, by=["source", "tid"], **options)
    assert join_asof_by(left, right, by=["source", "tid"], **options).equals(want)


def test_a_string_with_one_value_everywhere_is_no_grouping_key() -> None:
    a = pl.DataFrame({"source": ["r0", "r0"], "tid": [1, 2]})
    b = pl.DataFrame({"source": ["r0"], "tid": [1]})
    (a2, b2), keys, codes = integer_groups([a, b], ["source", "tid"])
    assert (keys, codes) == (["tid"], [])
    assert a2.equals(a) and b2.equals(b)


def test_literal_columns_group_as_the_strings_they_hold() -> None:
    """A one-source frame's source is a literal column (traceq.analyses.host_state.cpu_rows)."""
    tid = pl.DataFrame({"tid": [1, 2]})
    same = [tid.select(pl.lit("r0").alias("source"), "tid"), tid.head(1).select(pl.lit("r0").alias("source"), "tid")]
    (_, _), keys, codes = integer_groups(same, ["source", "tid"])
    assert (keys, codes) == (["tid"], [])
    apart = [same[0], tid.select(pl.lit("r1").alias("source"), "tid")]
    (a2, b2), keys, codes = integer_groups(apart, ["source", "tid"])
    assert (keys, codes) == (["_code_source", "tid"], ["_code_source"])
    assert a2.get_column("_code_source").to_list() == [0, 0] and b2.get_column("_code_source").to_list() == [1, 1]


def test_codes_follow_the_strings_sort_order() -> None:
    a = pl.DataFrame({"source": ["rank10", "rank2"]})
    b = pl.DataFrame({"source": ["rank1"]})
    (a2, b2), keys, codes = integer_groups([a, b], ["source"])
    assert keys == codes == ["_code_source"]
    both = pl.concat([a2, b2])
    assert (
        both.sort("_code_source").get_column("source").to_list() == both.sort("source").get_column("source").to_list()
    )


@SETTINGS
@given(sides())
def test_the_keyed_join_is_the_one_polars_makes_by_the_string_keys(pair: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    left, right = pair
    options: dict[str, Any] = {"how": "left", "nulls_equal": False, "maintain_order": "left"}
    want = left.join(right, on=["source", "tid", "_t"], **options)
    assert join_by(left, right, by=["source"], on=["tid", "_t"], **options).equals(want)


@SETTINGS
@given(sides())
def test_the_binary_search_finds_the_row_the_backward_join_matches(pair: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    """Ties included (the last of equal keys in the right frame's order), groups the right frame
    lacks, String and integer keys."""
    left, right = pair
    if any(f.get_column("source").null_count() for f in pair):
        assert latest_at_or_before(left, right, on="_t", by=["source", "tid"]) is None
        return
    found = latest_at_or_before(left, right, on="_t", by=["source", "tid"])
    assert found is not None
    ids = right.get_column("right_id").to_list()
    got = [ids[i] if i >= 0 else None for i in found.tolist()]
    want = left.join_asof(right, on="_t", by=["source", "tid"], strategy="backward", check_sortedness=False)
    assert got == want.get_column("right_id").to_list()


def test_the_search_reads_a_right_frame_out_of_key_order_as_the_join_reads_it_sorted() -> None:
    right = pl.DataFrame({"g": [1, 1, 2, 1], "_t": [9, 2, 5, 4], "right_id": [0, 1, 2, 3]})
    left = pl.DataFrame({"g": [1, 1, 2, 3], "_t": [3, 10, 4, 9]})
    found = latest_at_or_before(left, right, on="_t", by=["g"])
    assert found is not None and found.tolist() == [1, 0, -1, -1]


def test_groups_are_numbered_in_key_order_over_the_ranges_groups() -> None:
    ranges = pl.DataFrame({"a": [2, 1, 2], "b": [7, 7, 5]})
    points = pl.DataFrame({"a": [1, 2, 3], "b": [7, 5, 7]})
    numbered = group_numbers(ranges, points, ["a", "b"])
    assert numbered is not None
    assert numbered[0].tolist() == [2, 0, 1] and numbered[1].tolist() == [0, 1, -1]
    assert group_numbers(ranges.with_columns(pl.col("a").cast(pl.String)), points, ["a"]) is None


def test_a_column_of_one_value_splits_nothing_unless_a_query_holds_another() -> None:
    ranges = pl.DataFrame({"a": [4, 4, 4], "b": [7, 7, 5]})
    same = group_numbers(ranges, pl.DataFrame({"a": [4, 4], "b": [5, 7]}), ["a", "b"])
    assert same is not None and same[0].tolist() == [1, 1, 0] and same[1].tolist() == [0, 1]
    # A query of another a, or of a b beside the one value, is in no group of the ranges.
    other = group_numbers(ranges, pl.DataFrame({"a": [4, 3, 5], "b": [7, 7, 7]}), ["a", "b"])
    assert other is not None and other[0].tolist() == [1, 1, 0] and other[1].tolist() == [1, -1, -1]
    empty = group_numbers(ranges.head(0), pl.DataFrame({"a": [4], "b": [7]}), ["a", "b"])
    assert empty is not None and empty[0].tolist() == [] and empty[1].tolist() == [-1]


@SETTINGS
@given(
    ranges=st.lists(st.tuples(st.sampled_from([4, 4, 5, None]), st.sampled_from([7, 7, 8])), min_size=0, max_size=6),
    points=st.lists(st.tuples(st.sampled_from([4, 4, 5, None]), st.sampled_from([7, 7, 8])), min_size=0, max_size=6),
)
def test_one_group_says_whether_every_row_of_both_frames_holds_the_same_keys(
    ranges: list[tuple[int | None, int]], points: list[tuple[int | None, int]]
) -> None:
    def of(rows: list[tuple[int | None, int]]) -> pl.DataFrame:
        return pl.DataFrame(
            {"a": [a for a, _ in rows], "b": [b for _, b in rows]}, schema={"a": pl.Int64, "b": pl.Int64}
        )

    keys = set(ranges) | set(points)
    want = bool(ranges) and bool(points) and len(keys) == 1 and None not in next(iter(keys))
    assert one_group(of(ranges), of(points), ["a", "b"]) is want
    if want:  # then every row of both is group 0, as the numbers say
        numbered = group_numbers(of(ranges), of(points), ["a", "b"])
        assert numbered is not None and {*numbered[0].tolist(), *numbered[1].tolist()} == {0}
    assert one_group(of(ranges), of(points), []) is (bool(ranges) and bool(points))


def test_one_group_reads_literal_columns_without_making_them_arrays() -> None:
    dtypes = {"pid": pl.Int64(), "b": pl.Int64()}
    ranges = with_literals(pl.DataFrame({"b": [7]}), {"pid": 42}, dtypes, ["pid", "b"])
    points = with_literals(pl.DataFrame({"b": [7, 7, 7]}), {"pid": 42}, dtypes, ["pid", "b"])
    assert one_group(ranges, points, ["pid", "b"])
    assert not one_group(ranges, with_literals(pl.DataFrame({"b": [7]}), {"pid": 41}, dtypes, ["pid", "b"]), ["pid"])
    assert not one_group(ranges.with_columns(pl.col("b").cast(pl.String)), points, ["b"])  # no integer key
    assert held_bytes(points, "pid") < 64


def test_literal_columns_are_numbered_as_their_arrays_and_never_made_arrays() -> None:
    # A one-process part's pid is a literal column (one value, no rows held): counting its nulls
    # or finding that it splits nothing must not make it an array of the frame's height.
    ranges = pl.DataFrame({"b": [7, 7, 5, 9]})
    points = pl.DataFrame({"b": [5, 7, 8]})
    dtypes = {"pid": pl.Int64(), "b": pl.Int64()}
    lit_ranges = with_literals(ranges, {"pid": 42}, dtypes, ["pid", "b"])
    lit_points = with_literals(points, {"pid": 42}, dtypes, ["pid", "b"])
    numbered = group_numbers(lit_ranges, lit_points, ["pid", "b"])
    as_arrays = group_numbers(ranges.with_columns(pid=42), points.with_columns(pid=42), ["pid", "b"])
    assert numbered is not None and as_arrays is not None
    assert [a.tolist() for a in numbered] == [a.tolist() for a in as_arrays] == [[1, 1, 0, 2], [0, 1, -1]]
    assert held_bytes(lit_ranges, "pid") < 64 and held_bytes(lit_points, "pid") < 64
    nulls = with_literals(ranges, {"pid": None}, dtypes, ["pid", "b"])
    assert group_numbers(nulls, lit_points, ["pid", "b"]) is None  # a null key groups nothing
    assert held_bytes(nulls, "pid") < 64


@SETTINGS
@given(
    right=st.lists(st.integers(0, 30), max_size=12).map(sorted),
    left=st.lists(st.tuples(st.sampled_from([0, 0, -1]), st.integers(-2, 33)), max_size=10),
    shuffled=st.booleans(),
)
def test_one_groups_search_finds_the_last_right_entry_at_or_before_each_time(
    right: list[int], left: list[tuple[int, int]], shuffled: bool
) -> None:
    """One group (its times the keys, searched as they are where they come in order) against the
    definition: the last right entry, in the right entries' order, at or before the left time."""
    right_t = np.array(right[::-1] if shuffled else right, np.int64)
    left_group = np.array([g for g, _ in left], np.int64)
    left_t = np.array([t for _, t in left], np.int64)
    found = packed_latest(np.zeros(len(right_t), np.int64), right_t, left_group, left_t)
    assert found is not None
    want = [
        max((j for j, r in enumerate(right_t.tolist()) if r <= t), key=lambda j: (right_t[j], j), default=-1)
        if g == 0
        else -1
        for g, t in left
    ]
    assert found.tolist() == want


@SETTINGS
@given(
    values=st.lists(st.integers(-5, 20), max_size=40),
    asked=st.lists(st.tuples(st.integers(-1, 45), st.integers(-6, 22)), max_size=30),
)
def test_the_last_value_reaching_a_bound_is_the_last_one_a_scan_back_finds(
    values: list[int], asked: list[tuple[int, int]]
) -> None:
    """Per query, the largest position at or before ``at`` whose value is at least the bound, as a
    scan from ``at`` back to the start finds it (−1: none, or ``at`` is −1)."""
    asked = [(min(at, len(values) - 1), least) for at, least in asked]
    found = last_at_least(
        np.array(values, np.int64),
        np.array([at for at, _ in asked], np.int64),
        np.array([least for _, least in asked], np.int64),
    )
    want = [next((i for i in range(at, -1, -1) if values[i] >= least), -1) for at, least in asked]
    assert found.tolist() == want


def test_the_walk_crosses_every_level_of_the_tree() -> None:
    """A value reached only at the first position, asked from the last of 1,000: the walk climbs to
    the root's child and descends again (and a bound nothing reaches answers −1)."""
    values = np.zeros(1000, np.int64)
    values[0] = 7
    found = last_at_least(values, np.array([999, 999, 0, -1]), np.array([7, 8, 7, 0]))
    assert found.tolist() == [0, -1, 0, -1]


@st.composite
def intervals(draw: Any, *, keys: list[Any]) -> pl.DataFrame:
    n = draw(st.integers(0, 12))
    starts = [draw(st.integers(0, 20)) for _ in range(n)]
    return pl.DataFrame(
        {
            "source": [draw(st.sampled_from(keys)) for _ in range(n)],
            "tid": [draw(st.sampled_from([1, 2, None])) for _ in range(n)],
            "start_ns": starts,
            "end_ns": [s + draw(st.integers(0, 8)) for s in starts],
        },
        schema={"source": pl.String, "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )


def contained_by_definition(left: pl.DataFrame, right: pl.DataFrame) -> list[int]:
    """The latest-starting right row of the left row's group containing it (of equal starts the
    last one; keys with a null group nothing), by a scan of every pair."""
    out = []
    for row in left.iter_rows(named=True):
        best, best_start = -1, None
        for j, other in enumerate(right.iter_rows(named=True)):
            key = (other["source"], other["tid"])
            if None in key or key != (row["source"], row["tid"]):
                continue
            inside = other["start_ns"] <= row["start_ns"] and row["end_ns"] <= other["end_ns"]
            if inside and (best_start is None or other["start_ns"] >= best_start):
                best, best_start = j, other["start_ns"]
        out.append(best)
    return out


@SETTINGS
@given(st.data(), st.sampled_from([["r0.json"], ["r0.json", "r1.json"], ["r1.json", "r0.json", None]]))
def test_the_latest_containing_interval_is_the_latest_starting_one_around_it(data: Any, keys: list[Any]) -> None:
    """An interval that started later but ended already is passed over for one that started earlier
    and still runs: the answer is the latest-starting right row that contains the left one, as a
    scan of every pair finds it, by numbered groups and by the join of a Categorical key alike."""
    left, right = data.draw(intervals(keys=keys)), data.draw(intervals(keys=keys))
    want = contained_by_definition(left, right)
    assert latest_containing(left, right, by=("source", "tid")).tolist() == want
    as_categories = [f.with_columns(pl.col("source").cast(pl.Categorical)) for f in (left, right)]
    assert latest_containing(*as_categories, by=("source", "tid")).tolist() == want


def test_a_child_that_ended_before_the_call_leaves_the_parent_around_it() -> None:
    """The seed of this function: a call at [2, 3) after a child range [1, 2) inside a parent [0, 3)
    is inside the parent, not in nothing."""
    right = pl.DataFrame({"tid": [1, 1], "start_ns": [0, 1], "end_ns": [3, 2]})
    left = pl.DataFrame({"tid": [1], "start_ns": [2], "end_ns": [3]})
    assert latest_containing(left, right, by=("tid",)).tolist() == [0]


def test_times_too_far_apart_to_pack_are_searched_group_by_group() -> None:
    """Groups whose (group, time) keys would not fit in 62 bits are searched one at a time."""
    far = 1 << 61
    right = pl.DataFrame({"tid": [1, 2, 2], "start_ns": [0, 5, far], "end_ns": [far, far + 1, far + 2]})
    left = pl.DataFrame({"tid": [1, 2, 2, 3], "start_ns": [far - 1, far, 6, 0], "end_ns": [far, far + 1, far, 1]})
    assert latest_containing(left, right, by=("tid",)).tolist() == [0, 2, 1, -1]
