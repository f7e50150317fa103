"""The SQLite file of ``traceq convert -o x.db``: the named tables of :mod:`traceq.exports.tables`.

``events`` is a table (indexed by ``start_ns``, ``kind`` and ``name``); ``kernels``, ``api``, ``ranges`` and
``gpu_ranges`` are views over it (the same rows as ``traceq sql``'s tables, no second copy); ``gaps``,
``steps``, ``devices``, ``import_stats`` and ``sources`` are tables.  Written by
:func:`traceq.sqlite_ingest.write_sqlite`: one transaction, ADBC ingest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pyarrow as pa

from traceq.exports.tables import TABLES, Tables, event_view_filters
from traceq.sqlite_ingest import write_sqlite

INDEXES: Final = {"events": ("start_ns", "kind", "name"), "gaps": ("start_ns",)}


def write_tables(path: Path, tables: Tables) -> None:
    """Write every named table of ``tables`` into the new SQLite file ``path``."""
    views = {name: f"SELECT * FROM events WHERE {where}" for name, where in event_view_filters().items()}
    frames: dict[str, pa.Table] = {"events": tables.events_with_step().collect().to_arrow()}
    for name in TABLES:
        if name not in frames and name not in views:
            frames[name] = tables.frame(name).to_arrow()
    write_sqlite(path, frames, views=views, indexes=INDEXES)
