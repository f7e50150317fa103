"""Integer grouping keys: the as-of join they make is polars' own join, row for row."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses.asof import integer_groups, join_asof_by

SETTINGS = settings(deadline=None, max_examples=200)

SOURCES = st.sampled_from([["r0.json"], ["r0.json", "r1.json"], ["r1.json", "r0.json", None]])


def frame(draw: Any, sources: list[str | None], name: str) -> pl.DataFrame:
    n = draw(st.integers(0, 12))
    return pl.DataFrame(
        {
            "source": [draw(st.sampled_from(sources)) for _ in range(n)],
            "tid": [draw(st.integers(1, 2)) for _ in range(n)],
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


def test_codes_follow_the_strings_sort_order() -> None:
    a = pl.DataFrame({"source": ["rank10", "rank2"]})
    b = pl.DataFrame({"source": ["rank1"]})
    (a2, b2), keys, codes = integer_groups([a, b], ["source"])
    assert keys == codes == ["_code_source"]
    both = pl.concat([a2, b2])
    assert (
        both.sort("_code_source").get_column("source").to_list() == both.sort("source").get_column("source").to_list()
    )
