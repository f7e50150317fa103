"""Read-only access to an Nsight Systems SQLite export: which tables exist, their columns, their rows.

This module owns everything that touches SQLite for the nsys importer:

* opening the file through a ``file:...?mode=ro&immutable=1`` URI, so that nothing is ever written
  (not even a journal), and translating SQLite failures into :class:`~traceq.errors.CorruptTraceError`;
* resolving table names (``NAME`` exactly, else the highest ``NAME_V<n>``), and probing columns with
  ``PRAGMA table_info`` so callers select only what this export has;
* bulk reads of whole columns into polars frames, with no Python loop per row.  Two backends give
  the same frames: the ADBC SQLite driver (``adbc-driver-sqlite``, Arrow-native and about three
  times faster) when it is installed, else the standard library's ``sqlite3``;
* ``StringIds`` look-ups for only the ids a caller needs.

Callers describe a read as ``{column: polars dtype}``; columns the table lacks come back as nulls,
so the converters in :mod:`traceq.importers.nsys_sqlite` never branch on the nsys version to read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl
import pyarrow as pa

from traceq.errors import CorruptTraceError

ColumnSpec = Mapping[str, pl.DataType]
"""Columns to read: name -> the dtype the caller wants (``pl.Int64()`` or ``pl.String()``)."""

INT: Final = pl.Int64()
TEXT: Final = pl.String()

# One IN list per query; SQLite resolves each id through the INTEGER PRIMARY KEY, so the cost is
# proportional to the ids asked for, not to the size of StringIds (which can hold millions).
_STRING_CHUNK: Final = 50_000

# ADBC's SQLite driver infers each column's Arrow type from the first batch and fails when a later
# batch disagrees (a column that is NULL for the first rows, then text).  One batch for the whole
# result makes the inference see every value, so the types are always consistent.
_ADBC_BATCH_ROWS: Final = "1000000000"

_VERSIONED_NAME = re.compile(r"^(?P<base>.+)_V(?P<n>\d+)$", re.IGNORECASE)


def sqlite_uri(path: Path) -> str:
    """The read-only, immutable URI of ``path`` (percent-encoded, so any file name works)."""
    return path.resolve().as_uri() + "?mode=ro&immutable=1"


@dataclass
class ExportDb:
    """An open nsys export.  Use :func:`open_export`; close with :meth:`close`."""

    path: Path
    uri: str
    conn: sqlite3.Connection
    tables: frozenset[str]
    resolved: dict[str, str] = field(default_factory=dict)
    """Logical table name -> the ``_V<n>`` table that stood in for it (only where one did)."""
    _columns: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def close(self) -> None:
        self.conn.close()

    def table(self, name: str) -> str | None:
        """The table holding ``name``'s data: ``name`` itself, else its highest ``_V<n>``, else None."""
        if name in self.tables:
            return name
        best: tuple[int, str] | None = None
        for candidate in self.tables:
            match = _VERSIONED_NAME.match(candidate)
            if match and match["base"] == name:
                version = int(match["n"])
                if best is None or version > best[0]:
                    best = (version, candidate)
        if best is None:
            return None
        self.resolved[name] = best[1]
        return best[1]

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of ``table``, in declaration order."""
        if table not in self._columns:
            with _translating_errors(self.path):
                rows = self.conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
            self._columns[table] = tuple(str(row[1]) for row in rows)
        return self._columns[table]

    def count(self, table: str) -> int:
        with _translating_errors(self.path):
            (n,) = self.conn.execute(f"SELECT COUNT(*) FROM {_quote(table)}").fetchone()
        return int(n)

    def read(self, table: str, spec: ColumnSpec) -> pl.DataFrame:
        """All rows of ``table`` with the columns of ``spec``; those the table lacks are all-null."""
        present = set(self.columns(table))
        selected = {name: dtype for name, dtype in spec.items() if name in present}
        if selected:
            sql = f"SELECT {', '.join(_quote(c) for c in selected)} FROM {_quote(table)}"
            frame = self.query(sql, selected)
            height = frame.height
        else:
            # No wanted column exists; keep the row count so the caller still accounts for every row.
            frame = pl.DataFrame()
            height = self.count(table)
        missing = [pl.repeat(None, height, dtype=dtype).alias(n) for n, dtype in spec.items() if n not in present]
        if frame.width == 0:
            return pl.select(missing).select(list(spec)) if missing else frame
        return frame.with_columns(missing).select(list(spec))

    def query(self, sql: str, spec: ColumnSpec) -> pl.DataFrame:
        """Run ``sql`` (whose result columns are exactly ``spec``'s, in order) into a frame."""
        with _translating_errors(self.path):
            frame = _fetch_adbc(self.uri, sql, spec) if _adbc_available() else None
            if frame is None:
                frame = _fetch_sqlite3(self.conn, sql, spec)
        try:
            return frame.cast(pl.Schema(spec))
        except pl.exceptions.PolarsError as exc:
            raise CorruptTraceError(
                f"unexpected value types in SQLite result ({exc.__class__.__name__}: {str(exc).splitlines()[0]})",
                path=self.path,
                hint="the export may be damaged; export the report again with nsys",
            ) from exc

    def key_values(self, table: str, key: str = "name", value: str = "value") -> dict[str, str]:
        """A two-column table (``META_DATA_EXPORT``, ``TARGET_INFO_SYSTEM_ENV``...) as a dict; first key wins."""
        if not {key, value} <= set(self.columns(table)):
            return {}
        with _translating_errors(self.path):
            rows = self.conn.execute(f"SELECT {_quote(key)}, {_quote(value)} FROM {_quote(table)}").fetchall()
        out: dict[str, str] = {}
        for k, v in rows:
            if k is not None and str(k) not in out:
                out[str(k)] = "" if v is None else str(v)
        return out

    def rows(self, table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        """The (small) ``table`` as dicts of the listed columns that exist; for metadata tables only."""
        present = [c for c in columns if c in set(self.columns(table))]
        if not present:
            return []
        with _translating_errors(self.path):
            result = self.conn.execute(f"SELECT {', '.join(_quote(c) for c in present)} FROM {_quote(table)}")
            return [dict(zip(present, row, strict=True)) for row in result.fetchall()]

    def strings(self, ids: pl.Series) -> pl.DataFrame:
        """``StringIds`` rows for the distinct non-null ``ids``: columns ``id`` (Int64), ``value`` (String)."""
        spec: dict[str, pl.DataType] = {"id": INT, "value": TEXT}
        table = self.table("StringIds")
        wanted = ids.drop_nulls().unique().sort()
        if table is None or wanted.is_empty() or not {"id", "value"} <= set(self.columns(table)):
            return pl.DataFrame(schema=spec)
        parts = []
        for offset in range(0, wanted.len(), _STRING_CHUNK):
            chunk = wanted.slice(offset, _STRING_CHUNK).cast(pl.Int64)
            in_list = chunk.cast(pl.String).str.join(",").item()
            parts.append(self.query(f"SELECT id, value FROM {_quote(table)} WHERE id IN ({in_list})", spec))
        return pl.concat(parts).unique("id", keep="first")


def open_export(path: Path) -> ExportDb:
    """Open ``path`` read-only and list its tables; :class:`CorruptTraceError` if SQLite cannot read it."""
    uri = sqlite_uri(path)
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise _corrupt(path, exc) from exc
    # Exports can hold text that is not valid UTF-8 (observed in TARGET_INFO_SYSTEM_ENV of a 2022
    # export); one bad byte must not make the whole file unreadable.  The bulk reads switch to this
    # slower decoder only when the strict one fails (see _fetch_sqlite3).
    conn.text_factory = _decode_lossy
    try:
        with _translating_errors(path):
            names = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    except CorruptTraceError:
        conn.close()
        raise
    return ExportDb(path=path, uri=uri, conn=conn, tables=frozenset(str(n) for (n,) in names))


def reader_backend() -> str:
    """``adbc`` when the ADBC SQLite driver is importable (fast path), else ``sqlite3``."""
    return "adbc" if _adbc_available() else "sqlite3"


def _decode_lossy(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _corrupt(path: Path, exc: BaseException) -> CorruptTraceError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    return CorruptTraceError(
        f"cannot be read as SQLite ({first})",
        path=path,
        hint="the file is damaged or truncated; copy it again or re-export the report with nsys export --type sqlite",
    )


@contextmanager
def _translating_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise _corrupt(path, exc) from exc
    except Exception as exc:
        # The ADBC driver reports SQLite errors as its own DB-API errors, or as OSError from the
        # Arrow stream; only those are the file's fault, anything else is a traceq bug.
        if _is_adbc_error(exc) or isinstance(exc, OSError):
            raise _corrupt(path, exc) from exc
        raise


def _fetch_sqlite3(conn: sqlite3.Connection, sql: str, spec: ColumnSpec) -> pl.DataFrame:
    conn.text_factory = str  # strict C-level decoding: no Python call per text value
    try:
        rows = conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
        conn.text_factory = _decode_lossy
        rows = conn.execute(sql).fetchall()
    finally:
        conn.text_factory = _decode_lossy
    try:
        return pl.DataFrame(rows, schema=dict(spec), orient="row")
    except (TypeError, pl.exceptions.PolarsError) as exc:
        raise sqlite3.DatabaseError(f"unexpected value types: {exc}") from exc


_ADBC: dict[str, Any] = {}


def _adbc_available() -> bool:
    if "dbapi" not in _ADBC:
        try:
            import adbc_driver_sqlite.dbapi as dbapi  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            _ADBC["dbapi"] = None
        else:
            _ADBC["dbapi"] = dbapi
    return _ADBC["dbapi"] is not None


def _is_adbc_error(exc: BaseException) -> bool:
    dbapi = _ADBC.get("dbapi")
    return dbapi is not None and isinstance(exc, dbapi.Error)


def _fetch_adbc(uri: str, sql: str, spec: ColumnSpec) -> pl.DataFrame | None:
    """The result through ADBC, or None when it holds text that is not valid UTF-8.

    The driver passes SQLite's bytes into Arrow string arrays unchecked, and polars trusts Arrow;
    invalid UTF-8 would crash later, so text columns are validated and such a result is read again
    through ``sqlite3``, which decodes it lossily.
    """
    dbapi = _ADBC["dbapi"]
    with dbapi.connect(uri) as conn, conn.cursor() as cur:
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": _ADBC_BATCH_ROWS})
        cur.execute(sql)
        table = cur.fetch_arrow_table()
    for column in table.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                return None
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if frame.width != len(spec):
        raise AssertionError(f"ADBC returned {frame.columns} for {list(spec)}")
    # An empty result carries no types to infer from; the caller's cast fixes the dtypes.
    return frame.rename(dict(zip(frame.columns, spec, strict=True)))
