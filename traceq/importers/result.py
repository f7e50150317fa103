"""What every importer returns."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import polars as pl
import pyarrow as pa

from traceq.meta import SourceMeta
from traceq.stats import ImportStats


@dataclass(frozen=True)
class ImportResult:
    """One source file, imported.

    ``frame`` has exactly the columns of :mod:`traceq.schema` (built with ``schema.conform`` and
    checked with ``schema.validate``), sorted by ``start_ns`` then ``end_ns``; ``stats`` accounts
    for every source event; ``meta`` holds what the file says about itself.
    """

    frame: pl.DataFrame
    stats: ImportStats
    meta: SourceMeta

    @cached_property
    def events(self) -> pa.Table:
        """``frame`` as an Arrow table, with one dictionary per column for all chunks (polars writes
        each chunk's own), as Arrow consumers such as the IPC file format expect.  Made when asked
        for: traceq itself reads ``frame`` (the conversion there and back cost 0.9 s at 20 M rows)."""
        return self.frame.to_arrow().unify_dictionaries()
