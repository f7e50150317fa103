"""The importers' shared last step: converted rows in, the event table out (:class:`EventRows`).

Both importers convert their source piece by piece -- the nsys importer table by table and chunk
by chunk, the Kineto importer in one frame for the file -- and hand each piece to
:class:`EventRows`, which conforms it to :mod:`traceq.schema` as it comes
(:func:`traceq.schema.conform`: the schema's columns in order and in their declared dtypes, the
importer's helper columns dropped, missing nullable ones added as nulls), then makes one table of
the pieces sorted by time (:func:`~traceq.importers.time_sort.sort_by_time`) and checks it against
the contract (:func:`traceq.schema.validate`).  One place, so that both importers' tables are made
and checked the same way.
"""

from __future__ import annotations

import polars as pl

from traceq import schema
from traceq.importers.time_sort import CHUNK_ROWS, sort_by_time


class EventRows:
    """The converted rows of one import, conformed to the event table's schema piece by piece."""

    def __init__(self) -> None:
        self._pieces: list[pl.DataFrame] = []

    def add(self, rows: pl.DataFrame) -> None:
        """Keep ``rows`` (event-table columns plus any helper columns) conformed to the schema.

        Pass the only reference to ``rows``' columns (a frame made for the call), so that the
        sort can free each unsorted column as soon as its sorted copy is made.
        """
        self._pieces.append(schema.conform(rows))

    def sorted_table(self, *, chunk_rows: int = CHUNK_ROWS) -> pl.DataFrame:
        """Every row kept, sorted by ``start_ns`` then ``end_ns`` (ties in the order added, rows in
        their order within a piece), validated; an empty event table when nothing was added.
        Empties this collection (see :func:`~traceq.importers.time_sort.sort_by_time`)."""
        if not self._pieces:
            return schema.validate(schema.empty_frame())
        return schema.validate(sort_by_time(self._pieces, chunk_rows=chunk_rows))


__all__ = ["EventRows"]
