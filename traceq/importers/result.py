"""What every importer returns."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from traceq.meta import SourceMeta
from traceq.stats import ImportStats


@dataclass(frozen=True)
class ImportResult:
    """One source file, imported.

    ``events`` has exactly the columns of :mod:`traceq.schema` (built with ``schema.conform`` and
    checked with ``schema.validate``), sorted by ``start_ns`` then ``end_ns``; ``stats`` accounts
    for every source event; ``meta`` holds what the file says about itself.
    """

    events: pa.Table
    stats: ImportStats
    meta: SourceMeta
