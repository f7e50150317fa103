"""A frame's columns as NumPy arrays, copied once per frame: the values of ``to_numpy``, read-only,
shared by the frames made of the same columns, and let go of with the frame or at ``forget``."""

from __future__ import annotations

import gc
import threading

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceq.analyses import column_arrays as ca
from traceq.analyses import memo
from traceq.analyses.chunks import with_columns_like


@pytest.fixture(autouse=True)
def _forgotten() -> None:
    ca.forget()


def _chunked(values: list[int | None], cut: int) -> pl.DataFrame:
    """One Int64 column ``t`` (and a Boolean ``b``) in pieces of ``cut`` rows, as an imported table is."""
    pieces = [
        pl.DataFrame(
            {"t": values[i : i + cut], "b": [v is not None and v > 0 for v in values[i : i + cut]]},
            schema={"t": pl.Int64, "b": pl.Boolean},
        )
        for i in range(0, len(values), cut)
    ]
    return pl.concat(pieces, rechunk=False)


@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=1, max_size=60),
    cut=st.integers(1, 9),
)
def test_a_column_reads_as_to_numpy_reads_it_and_a_second_read_is_the_same_array(
    values: list[int | None], cut: int
) -> None:
    frame = _chunked(values, cut)
    got = ca.column_array(frame, "t", -1)
    assert got.tolist() == [-1 if v is None else v for v in values]
    assert ca.column_array(frame, "t", -1) is got  # (not copied again)
    plain = ca.column_array(frame, "t")
    np.testing.assert_array_equal(plain, frame.get_column("t").to_numpy())  # (nulls as to_numpy gives them)
    assert plain is not got
    assert ca.column_array(frame, "b").tolist() == frame.get_column("b").to_list()


def test_an_array_is_read_only_so_that_no_reader_changes_anothers() -> None:
    frame = _chunked([1, 2, 3, 4], 2)
    with pytest.raises(ValueError, match="read-only"):
        ca.column_array(frame, "t")[0] = 9


def test_an_array_the_caller_made_the_column_of_is_read_back_without_a_copy() -> None:
    made = np.array([5, -1, 7], dtype=np.int64)
    frame = pl.DataFrame({"call": pl.Series([5, None, 7], dtype=pl.Int64)})
    assert ca.known_arrays(frame, {("call", -1): made}) is frame
    assert ca.column_array(frame, "call", -1) is made
    assert not made.flags.writeable
    with pytest.raises(ValueError, match=r"\(2,\) values of 'call' for a frame of 3 rows"):
        ca.known_arrays(frame, {("call", None): np.zeros(2, np.int64)})


def test_frames_made_of_the_same_columns_share_one_array_whichever_asks_first() -> None:
    frame = _chunked(list(range(10)), 3)
    narrow = ca.selected(frame, "t")
    first = ca.column_array(narrow, "t")  # (the derived frame first: made for both)
    assert ca.column_array(frame, "t") is first
    wider = with_columns_like(frame, pl.Series("k", np.arange(10, dtype=np.int64) * 2))
    assert ca.column_array(wider, "t") is first
    # A column added in one chunk without nulls is read as the view of its values.
    assert ca.column_array(wider, "k").tolist() == list(range(0, 20, 2))


def test_a_derived_frame_reads_its_sources_array_after_the_source_is_gone() -> None:
    frame = _chunked(list(range(6)), 4)
    narrow = ca.selected(frame, "t")
    made = ca.column_array(frame, "t")
    del frame
    gc.collect()
    assert ca.column_array(narrow, "t") is made


def test_a_column_made_anew_is_not_read_through_its_namesake() -> None:
    frame = _chunked([1, 2, 3], 2)
    ca.column_array(frame, "t")
    replaced = with_columns_like(frame, pl.Series("t", [7, 8, 9], dtype=pl.Int64))
    assert ca.column_array(replaced, "t").tolist() == [7, 8, 9]
    equal = frame.clone()  # (an equal frame, not the same one: its arrays are its own)
    assert ca.column_array(equal, "t") is not ca.column_array(frame, "t")


def test_forget_lets_go_of_every_array_and_a_dead_frames_entry_goes_with_it() -> None:
    frame = _chunked([1, 2, 3], 2)
    before = ca.column_array(frame, "t")
    ca.forget()
    again = ca.column_array(frame, "t")
    assert again is not before
    memo.forget()  # (what the pipeline calls once a report is done: the arrays too)
    assert ca.column_array(frame, "t") is not again
    entries = len(ca._ENTRIES)
    del frame
    gc.collect()
    assert len(ca._ENTRIES) == entries - 1


def test_threads_that_ask_at_once_all_read_one_array() -> None:
    frame = _chunked(list(range(200_000)), 1000)
    start = threading.Barrier(4)
    got: list[np.ndarray] = []

    def read() -> None:
        start.wait()
        got.append(ca.column_array(frame, "t"))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 4 and all(array is ca.column_array(frame, "t") for array in got)
