"""The timeline excerpt's downsampling: which rows a "longest first" cut can keep.

A window of a long trace holds hundreds of thousands of bars, gaps or CPU spans, of which the
excerpt draws the longest few thousand: sorted by length (then by their other keys) and cut.  Only
the rows at least as long as the n-th longest can survive such a cut, so those are kept before the
sort (one selection pass instead of sorting every row by several keys).
"""

from __future__ import annotations

import polars as pl


def at_least_nth_longest(rows: pl.DataFrame, n: int, length: pl.Expr) -> pl.DataFrame:
    """The rows of ``rows`` whose ``length`` is at least the ``n``-th largest (ties included), in
    their order: all of them where there are ``n`` or fewer.  Sorting the result by ``length``
    descending, then by any other keys, and taking ``n`` rows takes the same rows as doing so with
    all of ``rows``."""
    if n < 1:
        raise ValueError("n must be at least 1")
    if rows.height <= n:
        return rows
    floor = rows.select(length.top_k(n).min()).item()
    return rows.filter(length >= floor)


__all__ = ["at_least_nth_longest"]
