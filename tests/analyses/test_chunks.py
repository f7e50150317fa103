"""Columns added in the frame's own chunks: the same values as a plain with_columns, chunked alike."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceq.analyses.chunks import column_like, with_columns_like


def _chunked(lengths: list[int]) -> pl.DataFrame:
    """A frame of two columns made of ``lengths`` pieces, as a lazy query's result is."""
    pieces = [pl.DataFrame({"a": np.arange(n, dtype=np.int64) + i, "b": np.full(n, i)}) for i, n in enumerate(lengths)]
    return pl.concat(pieces, rechunk=False)


def _chunk_lengths(frame: pl.DataFrame) -> set[tuple[int, ...]]:
    return {tuple(s.chunk_lengths()) for s in frame.get_columns()}


@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=8), split=st.integers(1, 4), seed=st.integers(0, 99))
def test_added_columns_hold_their_values_in_the_frames_chunks(lengths: list[int], split: int, seed: int) -> None:
    frame = _chunked(lengths)
    values = np.random.default_rng(seed).integers(-5, 5, frame.height)
    # the new column may itself come in chunks of its own (here: ``split`` pieces)
    cuts = np.array_split(values, split)
    new = pl.concat([pl.Series("c", part, dtype=pl.Int64) for part in cuts], rechunk=False)
    with_nulls = pl.Series("d", values, dtype=pl.Int64).set(pl.Series(values < 0), None)
    got = with_columns_like(frame, new, with_nulls)
    want = frame.with_columns(new, with_nulls)
    assert got.equals(want)
    assert len(_chunk_lengths(got)) == 1  # every column chunked alike
    assert column_like(frame, new).chunk_lengths() == frame.get_column("a").chunk_lengths()


def test_a_column_of_the_frames_name_is_replaced_in_its_place() -> None:
    frame = _chunked([3, 2])
    got = with_columns_like(frame, pl.Series("a", [9, 8, 7, 6, 5]))
    assert got.columns == ["a", "b"] and got.get_column("a").to_list() == [9, 8, 7, 6, 5]
    assert frame.get_column("a").to_list() == [0, 1, 2, 1, 2]  # (the frame given is not changed)


def test_a_column_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="3 values for a frame of 5 rows"):
        column_like(_chunked([3, 2]), pl.Series("c", [1, 2, 3]))


def test_an_eager_filter_of_the_result_leaves_the_columns_chunked_alike() -> None:
    """What the alignment is for: with one column chunked apart, polars' eager filter returns
    every column rechunked (the whole frame copied first); chunked alike, it filters chunk by chunk."""
    frame = _chunked([4, 4, 4])
    apart = frame.with_columns(pl.Series("c", range(12)))
    assert len(_chunk_lengths(apart)) == 2
    assert _chunk_lengths(apart.filter(pl.col("a") >= 0)) == {(12,)}
    alike = with_columns_like(frame, pl.Series("c", range(12)))
    assert _chunk_lengths(alike.filter(pl.col("a") >= 0)) == {(4, 4, 4)}


def test_a_literal_column_in_front_does_not_set_the_cuts() -> None:
    """A literal column (one value for every row: a one-device frame's key) is one chunk that lines
    up with any other; the added column is cut like the chunked columns, so none is copied."""
    frame = _chunked([4, 4, 4]).select(pl.lit("gpu0").alias("key"), pl.all())
    assert frame.get_column("key").n_chunks() == 1
    got = with_columns_like(frame, pl.Series("c", range(12)))
    assert got.get_column("c").chunk_lengths() == [4, 4, 4]
    assert got.equals(frame.with_columns(pl.Series("c", range(12))))
    assert got.filter(pl.col("a") >= 0).get_column("a").chunk_lengths() == [4, 4, 4]
