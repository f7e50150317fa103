"""Per-row look-ups of a value worked out once per distinct key: :func:`by_int_key`.

The importers work out what a name, a pid or a correlation id means once per distinct value (a few
thousand) and then need it on every row (millions).  ``replace_strict`` hashes every row's key;
where the keys are small non-negative integers -- categorical codes, correlation ids -- a table
indexed by the key answers with two gathers, 1.5 to 6 times faster (2.5 M rows on one core).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from traceq.importers.arrow_capsule import series_of_numpy

MAX_DENSE_KEY: Final = 1 << 22
"""Keys up to this are looked up through a table indexed by the key (4 bytes an entry); larger
keys fall back to ``replace_strict``."""


def by_int_key(key: pl.Expr, keys: pl.Series, values: pl.Series, dtype: pl.DataType) -> pl.Expr:
    """Per row, ``values[i]`` where the row's integer ``key`` equals ``keys[i]``; null where it
    equals none of them (or is null).  ``keys`` must be distinct and non-null."""
    values = values.cast(dtype)
    if keys.is_empty():
        return pl.repeat(None, pl.len(), dtype=dtype)  # a column of nulls, not a scalar
    low, high = keys.min(), keys.max()
    assert isinstance(low, int) and isinstance(high, int)
    if low < 0 or high >= MAX_DENSE_KEY:
        return key.replace_strict(keys, values, default=None, return_dtype=dtype)
    # position[k] = i where keys[i] == k, else len(values): one past the end, a null value.
    position = np.full(high + 1, len(values), dtype=np.uint32)
    position[keys.to_numpy()] = np.arange(len(values), dtype=np.uint32)
    padded = values.extend_constant(None, 1)
    in_table = pl.when(key.is_between(0, high)).then(key.cast(pl.Int64))
    return pl.lit(padded).gather(pl.lit(series_of_numpy("", position)).gather(in_table))
