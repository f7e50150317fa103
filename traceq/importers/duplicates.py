"""Exact duplicate events: GPU work or API calls recorded twice, of which one is kept.

An event recorded twice -- a profiler buffer flushed twice, two traces of one process merged into
one file, a row copied in an export -- would count its time twice.  Where the event table holds
all that tells two events apart, a row equal to another in every column is that other event
again: GPU activity (kernels, memcpys, memsets; a stream runs one at a time, so two on one stream
with the same start and end are one) and API calls with a correlation id (which names one call).
The first stays a row; each later copy is skipped as :data:`SKIP_DUPLICATE` in the import
statistics (``events == rows + skipped`` holds).  Other rows are kept even when equal in every
column: what tells them apart may be what the table does not keep (the ``args`` of two Kineto
``[memory]`` instants of one thread and microsecond).

:func:`drop_exact_duplicates` finds them in a table sorted by ``start_ns`` then ``end_ns``, where
equal rows are neighbours in time: only rows whose times tie with the next or previous row's are
compared in full, so the cost on a table without ties is two comparisons of two columns.
:func:`count_duplicates` moves what it dropped from ``rows`` to ``skipped`` in the statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import polars as pl

from traceq.schema import GPU_ACTIVITY_KINDS
from traceq.stats import SKIP_DUPLICATE, CategoryCount


def drop_exact_duplicates(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``table`` (sorted by ``start_ns`` then ``end_ns``) without the later copies of GPU activity and
    correlated API rows equal in every column, in its order, and the copies dropped (their
    ``category`` and ``kind``: what the importers need to count them)."""
    start, end = pl.col("start_ns"), pl.col("end_ns")
    tie = (start == start.shift(1)) & (end == end.shift(1))
    kind = pl.col("kind")
    identified = kind.is_in(GPU_ACTIVITY_KINDS) | ((kind == "cuda_api") & pl.col("correlation").is_not_null())
    candidate = (tie | tie.shift(-1)).fill_null(False) & identified
    if not table.select(candidate.any()).item():
        return table, table.clear().select("category", "kind")
    positions = table.with_row_index("_position").filter(candidate)
    later = positions.filter(~pl.struct(table.columns).is_first_distinct())
    if later.is_empty():
        return table, table.clear().select("category", "kind")
    kept = table.with_row_index("_position").filter(~pl.col("_position").is_in(later["_position"].implode()))
    return kept.drop("_position"), later.select("category", "kind")


def count_duplicates(counts: Sequence[CategoryCount], dropped: Mapping[str, int]) -> tuple[CategoryCount, ...]:
    """``counts`` with ``dropped[category]`` rows of each category moved to ``skipped`` as
    :data:`SKIP_DUPLICATE`."""
    out = []
    for count in counts:
        n = dropped.get(count.category, 0)
        if n:
            count = replace(count, rows=count.rows - n, skipped={**count.skipped, SKIP_DUPLICATE: n})
        out.append(count)
    return tuple(out)


__all__ = ["SKIP_DUPLICATE", "count_duplicates", "drop_exact_duplicates"]
