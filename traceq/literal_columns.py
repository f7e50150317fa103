"""Columns that hold one value in every row, kept as literal columns.

A polars *literal column* (``pl.lit(value)`` put in a frame by ``with_columns``) holds its value
once for any height: filters, gathers, slices, eager sorts and concatenations of equal literals
carry it without copying a row, and it becomes an array only where something reads its values
(``get_column``, NumPy, a comparison of frames; the frame then keeps that array) or counts its
chunks (polars' ``n_chunks("all")``, for the count: :func:`chunk_counts` does not).  A query --
``frame.select(pl.col(c).min())``, a null count -- reads its one value.  Most
tables have several such columns -- the one source of a file, its one rank, one process's pid, the
NVTX domain and graph id an export never fills -- a quarter of a 20 M-row nsys export's bytes and
a seventh of a Kineto trace's.  The importers make them literal columns when they sort the table
(:mod:`traceq.importers.time_sort`), a cache hit makes them from the values its entry names
instead of decoding them (:mod:`traceq.cache`), and the analyses take rows with them as literals
(:mod:`traceq.analyses.host_state`, :mod:`traceq.analyses.steps`).  A literal column equals the
array of its value: the values, the dtype and every result computed from them are the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl


def one_valued(rows: pl.DataFrame | pl.LazyFrame, columns: Sequence[str]) -> dict[str, Any]:
    """Of ``columns``, those whose rows (at least one) all hold one value, or are all null, each
    with that value (``None``: all null), read in one query (a Categorical or Enum compared by its
    codes: no string per row; its value is its string)."""
    if not columns:
        return {}
    stats = (
        rows.lazy()
        .select(
            pl.len().alias("rows"),
            *(
                e
                for c in columns
                for v in [pl.col(c).to_physical()]
                for e in (
                    pl.col(c).null_count().alias(f"{c} nulls"),
                    v.min().alias(f"{c} min"),
                    v.max().alias(f"{c} max"),
                    pl.col(c).drop_nulls().first().alias(f"{c} value"),
                )
            ),
        )
        .collect()
        .row(0, named=True)
    )
    n = stats["rows"]
    return {
        c: stats[f"{c} value"]
        for c in columns
        if n and (stats[f"{c} nulls"] == n or (stats[f"{c} nulls"] == 0 and stats[f"{c} min"] == stats[f"{c} max"]))
    }


def chunk_counts(frame: pl.DataFrame) -> list[int]:
    """The number of chunks of each column of ``frame``, in order (a literal column's is 1),
    without making any literal column's array: polars' ``n_chunks("all")`` makes the array of each
    literal column to count it (86 ms and 153 MiB for two Int64 columns of ten million rows)."""
    return [frame.select(name).n_chunks() for name in frame.columns]


def with_literals(
    frame: pl.DataFrame, values: Mapping[str, Any], dtypes: Mapping[str, pl.DataType], order: Sequence[str]
) -> pl.DataFrame:
    """``frame`` with a literal column for each of ``values`` (name to value; ``None``: all null)
    in its dtype of ``dtypes``, the columns in ``order``.  ``frame`` keeps at least one column of
    its own: a frame of literals alone has no height."""
    literals = [pl.lit(value, dtype=dtypes[name]).alias(name) for name, value in values.items()]
    # with_columns, not select: a select of literals alone makes one row, whatever the height.
    return frame.with_columns(literals).select(order)


def literal_values(frame: pl.DataFrame) -> dict[str, Any]:
    """The columns of ``frame`` that can be literal columns, each with its value (``None``: all
    null): those of one value or only nulls, save one column when every column is (a frame of
    literals alone has no height); none in a frame of fewer than two rows (nothing to save)."""
    if frame.height < 2:
        return {}
    values = one_valued(frame, frame.columns)
    if len(values) == frame.width:
        del values[frame.columns[0]]
    return values


def as_literals(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each column of :func:`literal_values` a literal column, in place."""
    values = literal_values(frame)
    return with_literals(frame.drop(values), values, frame.schema, frame.columns) if values else frame


__all__ = ["as_literals", "chunk_counts", "literal_values", "one_valued", "with_literals"]
