"""The excerpt's downsampling: the rows at least as long as the n-th longest are exactly those a
"longest first, then by other keys" cut of all the rows can take."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from traceq.analyses.longest import at_least_nth_longest

LENGTH = pl.col("end_ns") - pl.col("start_ns")


def _cut(rows: pl.DataFrame, n: int) -> pl.DataFrame:
    """The excerpt's cut: longest first, then earliest start, then name; the first ``n``."""
    ordered = rows.with_columns(LENGTH.alias("_len")).sort(
        ["_len", "start_ns", "name"], descending=[True, False, False], maintain_order=True
    )
    return ordered.head(n).drop("_len")


@settings(deadline=None, max_examples=200)
@given(
    spans=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6), st.sampled_from("abc")), max_size=40),
    n=st.integers(1, 45),
)
def test_the_longest_rows_kept_give_the_same_cut_as_all_rows(spans: list[tuple[int, int, str]], n: int) -> None:
    rows = pl.DataFrame(
        [(s, s + d, name) for s, d, name in spans],
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String},
        orient="row",
    )
    kept = at_least_nth_longest(rows, n, LENGTH)
    assert_frame_equal(_cut(kept, n), _cut(rows, n))
    # every row kept is at least as long as every row left out, and the order is the rows' own
    lengths = rows.select(LENGTH).to_series().to_list()
    kept_lengths = kept.select(LENGTH).to_series().to_list()
    assert kept.height >= min(n, rows.height)
    assert sorted(lengths, reverse=True)[: kept.height] == sorted(kept_lengths, reverse=True)
    assert_frame_equal(kept, rows.join(kept.unique(), on=rows.columns, how="semi", maintain_order="left"))


def test_n_or_fewer_rows_are_all_kept_and_n_below_one_is_refused() -> None:
    rows = pl.DataFrame({"start_ns": [0, 5], "end_ns": [3, 6], "name": ["a", "b"]})
    assert at_least_nth_longest(rows, 2, LENGTH) is rows
    assert at_least_nth_longest(rows, 1, LENGTH).get_column("name").to_list() == ["a"]
    with pytest.raises(ValueError, match="at least 1"):
        at_least_nth_longest(rows, 0, LENGTH)
