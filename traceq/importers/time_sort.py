"""The importers' last step: every converted piece, as one table sorted by time.

The pieces come in a deterministic order -- the nsys importer's table by table (kernels, graph
launches, memcpys, memsets, API calls, syncs, NVTX), the Kineto importer's in file order -- and
:func:`sort_by_time` makes one table of them sorted by ``start_ns`` then ``end_ns``, stable, so
ties keep that order, without holding a sorted copy of the whole table beside the unsorted
pieces: see its docstring.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from traceq.importers.arrow_capsule import series_of_numpy
from traceq.literal_columns import literal_values, with_literals

# Ties keep their order of appearance (tables in a fixed order, rows in file order), which is
# deterministic for a given file; more sort keys cost a third of the import time on large files.
_SORT_KEYS: Final = ("start_ns", "end_ns")
CHUNK_ROWS: Final = 131_072
"""Rows per chunk of the sorted columns (the nsys importer passes the size of its pieces)."""


def sort_by_time(parts: list[pl.DataFrame], *, chunk_rows: int = CHUNK_ROWS) -> pl.DataFrame:
    """The frames of ``parts`` (emptied) as one frame sorted by start then end, stable.

    Built one column at a time: a column's unsorted pieces are freed before its sorted copy is
    written, in chunks of ``chunk_rows`` rows (the size of the pieces just freed, which lets the
    allocator reuse some of them), so the sorted table is not built beside the whole
    unsorted one.  The gathered columns share that chunk layout, so the Arrow export copies none
    of them.  A column that holds one value in every row (or only nulls) is the same in any order:
    it becomes a literal column (:mod:`traceq.literal_columns`), never gathered.
    """
    names = parts[0].columns
    height = sum(p.height for p in parts)
    keys = [np.concatenate([p.get_column(k).to_numpy() for p in parts]) for k in reversed(_SORT_KEYS)]
    # A stable lexicographic argsort (numpy's lexsort) is ~3x faster than polars' multi-key one.
    order = series_of_numpy("", np.lexsort(keys).astype(np.uint32 if height < 1 << 32 else np.uint64))
    del keys
    chunk = chunk_rows
    bounds = [(lo, min(chunk, height - lo)) for lo in range(0, max(height, 1), chunk)]
    # A column of one value (or all nulls) is the same in any order: a literal column, no rows.
    literals = literal_values(pl.concat(parts, how="vertical", rechunk=False))
    dtypes = parts[0].schema
    # (not the literals' pieces: a piece's own literal column would be made an array to be taken)
    unsorted = {name: [p.get_column(name) for p in parts] for name in names if name not in literals}
    parts.clear()
    columns = []
    for name in names:
        if name in literals:
            continue
        pieces = unsorted.pop(name)
        # One contiguous array: gathering from a chunked one is about three times slower.
        # (pl.concat leaves a single Series' chunks as they are, hence rechunk() for one part.)
        whole = pl.concat(pieces, rechunk=True) if len(pieces) > 1 else pieces[0].rechunk()
        del pieces  # this column's unsorted pieces are free now
        pieces = _gather_in_chunks(whole, order, bounds)
        del whole
        columns.append(pl.concat(pieces, rechunk=False))
        del pieces
    return with_literals(pl.DataFrame(columns), literals, dtypes, names)


def _gather_in_chunks(column: pl.Series, order: pl.Series, bounds: list[tuple[int, int]]) -> list[pl.Series]:
    """``column.gather(order)`` as pieces at ``bounds``: the equal-length pieces in one select (one
    call, run in parallel), the shorter last one on its own."""
    full = [(lo, n) for lo, n in bounds if n == bounds[0][1]]
    frame = column.to_frame()
    gathered = frame.select(
        pl.col(column.name).gather(order.slice(lo, n)).alias(str(i)) for i, (lo, n) in enumerate(full)
    )
    pieces = [piece.alias(column.name) for piece in gathered.get_columns()]
    pieces += [column.gather(order.slice(lo, n)) for lo, n in bounds[len(full) :]]
    return pieces
