"""Columns added to a frame cut into the frame's own chunks, so that the frame is never copied whole.

A polars frame made by a lazy query comes out in chunks (one per piece of work), every column cut
alike.  A column made outside the query -- from a NumPy array, a literal, a gather -- is one chunk,
and once a frame's columns are chunked apart, polars copies every column of the frame to line them
up again at its next eager ``select``, ``filter`` or ``with_columns`` (on a 10 M-row activity
frame, a gigabyte of fresh memory, which costs more than the work it serves).
:func:`column_like` cuts such a column into the frame's chunks first; slicing a polars Series and
concatenating the slices without a rechunk copies no value.
"""

from __future__ import annotations

import polars as pl

from traceq.analyses.column_arrays import Arrays, derived_from, known_arrays
from traceq.literal_columns import chunk_counts


def column_like(frame: pl.DataFrame, column: pl.Series) -> pl.Series:
    """``column`` (one value per row of ``frame``) cut into the chunks of ``frame``'s columns."""
    if column.len() != frame.height:
        raise ValueError(f"a column of {column.len()} values for a frame of {frame.height} rows")
    if frame.width == 0:
        return column
    # (the most chunked column's cuts: a literal column -- one value for every row -- is one chunk
    # that lines up with any other, and a column cut as it is would be copied whole)
    counts = chunk_counts(frame)
    if max(counts) == 1:
        return column.rechunk() if column.n_chunks() > 1 else column
    lengths = frame.to_series(counts.index(max(counts))).chunk_lengths()  # (of many chunks: no literal)
    whole = column.rechunk() if column.n_chunks() > 1 else column
    pieces, offset = [], 0
    for length in lengths:
        pieces.append(whole.slice(offset, length))
        offset += length
    return pl.concat(pieces, rechunk=False) if pieces else whole


def with_columns_like(frame: pl.DataFrame, *columns: pl.Series) -> pl.DataFrame:
    """``frame`` with ``columns`` added (or replaced, by name) at the end, each cut into its chunks.

    The frame returned reads ``frame``'s NumPy arrays of its other columns
    (:func:`~traceq.analyses.column_arrays.column_array`), and each numeric column added in one
    chunk without nulls by the view of its values (no copy is made of it to read it back)."""
    out = frame.clone()  # (a shallow copy: insert_column and replace_column work in place)
    for column in columns:
        cut = column_like(frame, column)
        if column.name in out.columns:
            out.replace_column(out.columns.index(column.name), cut)
        else:
            out.insert_column(out.width, cut)
    added = {column.name for column in columns}
    derived_from(out, frame, [name for name in frame.columns if name not in added])
    views: Arrays = {
        (column.name, None): column.to_numpy()  # (a view: one chunk, no nulls)
        for column in columns
        if column.n_chunks() == 1 and not column.null_count() and column.dtype.is_numeric()
    }
    return known_arrays(out, views) if views else out


__all__ = ["column_like", "with_columns_like"]
