"""Columns of one value as literal columns: the same values, no rows held."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from traceq.literal_columns import as_literals, chunk_counts, literal_values, one_valued, with_literals


def held_bytes(frame: pl.DataFrame, column: str) -> float:
    """The bytes ``column`` of ``frame`` holds (a literal column: its one value, a few bytes, until
    something reads its values, which makes and keeps its rows)."""
    return frame.select(column).estimated_size()


def test_one_valued_columns_are_those_with_one_value_or_only_nulls() -> None:
    frame = pl.DataFrame(
        {
            "same": [7, 7, 7],
            "varies": [1, 2, 1],
            "null": [None, None, None],
            "partly_null": [5, None, 5],
            "source": ["/a.json", "/a.json", "/a.json"],
            "sources": ["/a.json", "/b.json", "/a.json"],
        },
        schema_overrides={"null": pl.Int64, "source": pl.Categorical, "sources": pl.Categorical},
    )
    want = {"same": 7, "null": None, "source": "/a.json"}
    assert one_valued(frame, frame.columns) == want
    assert one_valued(frame.lazy(), frame.columns) == want
    assert one_valued(frame.head(1), ["varies", "partly_null"]) == {"varies": 1, "partly_null": 5}
    assert one_valued(frame.clear(), frame.columns) == {}  # (no row: no value to stand for them)
    assert one_valued(frame, []) == {}


def test_with_literals_puts_each_value_in_every_row_in_the_order_asked() -> None:
    frame = pl.DataFrame({"b": [1, 2, 3, 4]})
    dtypes: dict[str, pl.DataType] = {"a": pl.Enum(["kernel", "memcpy"]), "c": pl.Int32(), "d": pl.Categorical()}
    out = with_literals(frame, {"a": "memcpy", "c": None, "d": "/x.json"}, dtypes, ["a", "b", "c", "d"])
    want = pl.DataFrame(
        {"a": ["memcpy"] * 4, "b": [1, 2, 3, 4], "c": [None] * 4, "d": ["/x.json"] * 4},
        schema={"a": dtypes["a"], "b": pl.Int64, "c": pl.Int32, "d": pl.Categorical},
    )
    assert all(held_bytes(out, c) < 64 for c in "acd")  # held once, not per row (b: 32 bytes)
    assert_frame_equal(out, want)


def test_a_frame_of_one_valued_columns_keeps_its_first_and_its_height() -> None:
    frame = pl.DataFrame({"a": [1, 1, 1], "b": ["x", "x", "x"]})
    assert literal_values(frame) == {"b": "x"}
    assert_frame_equal(as_literals(frame), frame)
    assert literal_values(frame.head(1)) == {}  # one row: nothing to save
    assert_frame_equal(as_literals(frame.head(1)), frame.head(1))
    assert_frame_equal(as_literals(frame.clear()), frame.clear())


def test_chunk_counts_count_each_columns_chunks_a_literals_as_one() -> None:
    pieces = [pl.DataFrame({"a": [1, 2], "b": ["x", "y"]}), pl.DataFrame({"a": [3], "b": ["z"]})]
    frame = pl.concat(pieces, rechunk=False)
    frame.insert_column(2, pl.Series("c", [0, 0, 0]))  # (one chunk beside two: chunked apart)
    frame = frame.select("a", pl.lit(5, pl.Int64).alias("d"), "b", "c")
    assert held_bytes(frame, "d") < 64
    assert chunk_counts(frame) == [2, 1, 2, 1] == frame.n_chunks("all")  # (polars' count makes d's rows)
    assert chunk_counts(frame.clear()) == frame.clear().n_chunks("all")
    assert chunk_counts(pl.DataFrame()) == []


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_literal_columns_equal_the_columns_they_stand_for_through_every_operation(data: st.DataObject) -> None:
    height = data.draw(st.integers(2, 30))
    columns = {
        name: data.draw(
            st.one_of(
                st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=height, max_size=height),
                st.sampled_from([[None] * height, [1] * height]),
            )
        )
        for name in ("a", "b", "c")
    }
    frame = pl.DataFrame(columns, schema={"a": pl.Int64, "b": pl.Int32, "c": pl.Int64}).with_columns(
        pl.col("b").cast(pl.String).cast(pl.Categorical)
    )
    literal = as_literals(frame)
    values = literal_values(frame)
    assert all(held_bytes(literal, c) < 64 for c in values)  # held once (checked before a comparison reads them)
    assert_frame_equal(literal, frame)
    one = set(one_valued(frame, frame.columns))
    assert set(values) == (one - {"a"} if len(one) == 3 else one)  # the first kept when all are one-valued
    mask = pl.Series(data.draw(st.lists(st.booleans(), min_size=height, max_size=height)))
    order = pl.Series(data.draw(st.permutations(range(height))), dtype=pl.UInt32)
    assert_frame_equal(literal.filter(mask), frame.filter(mask))
    assert_frame_equal(literal[order], frame[order])
    assert_frame_equal(literal.sort("a", "c", maintain_order=True), frame.sort("a", "c", maintain_order=True))
    assert_frame_equal(pl.concat([literal, frame.head(2)]), pl.concat([frame, frame.head(2)]))
    assert_frame_equal(
        literal.group_by("a", maintain_order=True).agg(pl.col("b").first(), pl.col("c").max()),
        frame.group_by("a", maintain_order=True).agg(pl.col("b").first(), pl.col("c").max()),
    )
