"""Writing Arrow tables into a new SQLite file: one transaction, ADBC's bulk ingest, views and indexes.

:func:`write_sqlite` is the one way traceq writes SQLite (``Trace.to_sqlite``, ``traceq convert -o
x.db``).  Each table goes in through ADBC's ingest (``adbc-driver-sqlite``: Arrow columns bound
in C, no Python object per value; dictionary columns become TEXT, booleans INTEGER 0/1, nulls
NULL), all of them in one transaction, then the views and the indexes, then one commit.

The file is written with ``journal_mode=OFF`` and ``synchronous=OFF``: no rollback journal and no
fsync per page.  That is safe here because the file is always a fresh temporary one that
:func:`traceq.outputs.write_output` renames over the output only once it is complete; a crash
leaves the temporary file, never a half-written output.  The finished file is an ordinary
SQLite database (rollback-journal mode) that ``sqlite3`` and Datasette open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa


def write_sqlite(
    path: Path,
    tables: Mapping[str, pa.Table],
    *,
    views: Mapping[str, str] | None = None,
    indexes: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Write ``tables`` (name -> Arrow table) into the new, empty SQLite file ``path``, then the
    ``views`` (name -> SELECT) and one index per column named in ``indexes`` (table -> columns).

    Raises :class:`sqlite3.Error` (which :func:`~traceq.outputs.write_output` reports as an
    unwritable output) when SQLite cannot write the file."""
    import adbc_driver_manager
    import adbc_driver_sqlite.dbapi as adbc

    try:
        conn = adbc.connect(str(path), autocommit=True)
    except adbc_driver_manager.Error as exc:
        raise sqlite3.OperationalError(str(exc).splitlines()[0]) from exc
    try:
        with conn.cursor() as cur:
            cur.execute("PRAGMA journal_mode=OFF")
            cur.execute("PRAGMA synchronous=OFF")
            cur.execute("BEGIN")
            for name, table in tables.items():
                cur.adbc_ingest(name, table.replace_schema_metadata(None), mode="create")
            for name, select in (views or {}).items():
                cur.execute(f"CREATE VIEW {_ident(name)} AS {select}")
            for name, columns in (indexes or {}).items():
                for column in columns:
                    cur.execute(f"CREATE INDEX {_ident(f'{name}_{column}')} ON {_ident(name)} ({_ident(column)})")
            cur.execute("COMMIT")
            # Back to the ordinary rollback journal, so that a reader writing to the file is safe.
            cur.execute("PRAGMA journal_mode=DELETE")
    except adbc_driver_manager.Error as exc:
        raise sqlite3.OperationalError(str(exc).splitlines()[0]) from exc
    finally:
        conn.close()


def _ident(name: str) -> str:
    """An SQL identifier, quoted (the names are traceq's own, but quoting costs nothing)."""
    return '"' + name.replace('"', '""') + '"'
