"""Read-only access to an Nsight Systems SQLite export: which tables exist, their columns, their rows.

This module owns everything that touches SQLite for the nsys importer:

* opening the file through a ``file:...?mode=ro&immutable=1`` URI, so that nothing is ever written
  (not even a journal), a WAL-mode file with uncheckpointed frames through a private checkpointed
  copy (:mod:`traceq.importers.nsys.wal`), and translating SQLite failures (and error messages
  that quote bytes which are not UTF-8) into :class:`~traceq.errors.CorruptTraceError`;
* resolving table names (``NAME`` exactly, else the highest ``NAME_V<n>``), and probing columns with
  ``PRAGMA table_info`` so callers select only what this export has;
* bulk reads of whole columns into polars frames, with no Python loop per row, by two backends
  that give the same frames: for integer columns the compiled reader
  (:mod:`traceq.importers.nsys.column_reader`, which steps SQLite straight into Arrow buffers, about
  twice as fast as ADBC), for everything else the ADBC SQLite driver (``adbc-driver-sqlite``, a
  dependency: Arrow-native and about three times faster than ``sqlite3``).  The standard library's
  ``sqlite3`` reads only a result that holds text that is not valid UTF-8 (which it decodes
  lossily, each bad byte a U+FFFD, counted in :attr:`ExportDb.invalid_utf8`; ADBC would hand it to
  polars unchecked), and the small metadata reads;
* :meth:`ExportDb.read_chunks`: a large table as consecutive ``rowid`` ranges, read ahead on a few
  threads (both backends release the GIL, so they run on separate cores) and handed over in file
  order, so that a caller converts one chunk while the next ones are read and no table is ever held
  whole in its raw form.  A chunk whose columns are all integers is read by the compiled reader;
  where it is not built, no SQLite library is found for it, ``TRACEQ_NSYS_COMPILED_READER`` is
  ``0``, or the chunk holds a value that is not an integer or NULL (the reader then declines; it
  never converts), the chunk is read through ADBC;
* ``StringIds`` look-ups for only the ids a caller needs.

The reads themselves -- a query through ADBC, the threads that read chunks ahead -- are
:mod:`traceq.importers.nsys.query_reads`'.

Callers describe a read as ``{column: polars dtype}``; columns the table lacks come back as nulls,
so the converters (:mod:`traceq.importers.nsys.convert`) never branch on the nsys version to read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from traceq.errors import CorruptTraceError
from traceq.importers.nsys import column_reader
from traceq.importers.nsys.column_reader import (
    compiled_reader_available,
    is_compiled_error,
)
from traceq.importers.nsys.query_reads import ChunkReaders, ColumnSpec, fetch_adbc, is_adbc_error
from traceq.importers.nsys.wal import CheckpointedCopy, checkpointed_copy

INT: Final = pl.Int64()
TEXT: Final = pl.String()

# One IN list per query; SQLite resolves each id through the INTEGER PRIMARY KEY, so the cost is
# proportional to the ids asked for, not to the size of StringIds (which can hold millions).
_STRING_CHUNK: Final = 50_000

CHUNK_ROWS: Final = 131_072
"""Rows per :meth:`ExportDb.read_chunks` query: large enough that the per-query cost is noise,
small enough that a few raw chunks in flight stay a small fraction of the imported table."""

_MAX_CHUNKS: Final = 1 << 16

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
    declined: list[str] = field(default_factory=list)
    """Why the compiled reader declined chunks (each was read through ADBC instead)."""
    lossy: _LossyDecoder = field(default_factory=lambda: _LossyDecoder())
    """Its ``replaced``: text values read so far that were not valid UTF-8."""
    copy: CheckpointedCopy | None = None
    """The checkpointed copy read instead of a WAL-mode file with frames not yet in it (else None)."""
    _columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)  # (a read-only file: counted once)
    _readers: ChunkReaders | None = None

    def close(self) -> None:
        self.done_reading()
        self.conn.close()
        if self.copy is not None:
            self.copy.close()

    def done_reading(self) -> None:
        """Stop the read-ahead threads and free what the compiled reader keeps for its next read
        (the bulk reads are over; metadata reads still work)."""
        if self._readers is not None:
            self._readers.close()
            self._readers = None
            column_reader.trim()

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
        if table not in self._counts:
            with _translating_errors(self.path):
                self._counts[table] = int(self.conn.execute(f"SELECT COUNT(*) FROM {_quote(table)}").fetchone()[0])
        return self._counts[table]

    def row_span(self, table: str) -> int:
        """How many rows ``table`` holds at most, for a progress line: its rowid span (its count
        where the rowids are dense, as nsys writes them; ``COUNT(*)`` reads every page: 0.36 s for
        ten million kernels), or its count where it has no rowid (a view, ``WITHOUT ROWID``)."""
        ends = self._rowid_range(table)
        return ends[1] - ends[0] + 1 if ends is not None else self.count(table)

    def _rowid_range(self, table: str) -> tuple[int, int] | None:
        """``(min, max)`` rowid of ``table``; None without rowids (a view, ``WITHOUT ROWID``) or rows."""
        try:  # one aggregate per query: SQLite answers each from one end of the b-tree, not a scan
            (lo,) = self.conn.execute(f"SELECT MIN(rowid) FROM {_quote(table)}").fetchone()
            (hi,) = self.conn.execute(f"SELECT MAX(rowid) FROM {_quote(table)}").fetchone()
        except (sqlite3.Error, UnicodeDecodeError):
            return None
        return (lo, hi) if isinstance(lo, int) and isinstance(hi, int) else None

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

    def read_chunks(self, table: str, spec: ColumnSpec, chunk_rows: int | None = None) -> Iterator[pl.DataFrame]:
        """:meth:`read` in consecutive pieces of at most ``chunk_rows`` (default :data:`CHUNK_ROWS`)
        rows, in file order.

        Pieces are ``rowid`` ranges, read ahead in parallel: all-integer ones by the compiled reader,
        others (and those it declines) through ADBC.  A table without usable rowids (a view,
        ``WITHOUT ROWID``, very sparse ids) is one piece.  Concatenated, the pieces equal
        :meth:`read`'s frame.
        """
        chunk_rows = chunk_rows or CHUNK_ROWS
        present = set(self.columns(table))
        selected = {name: dtype for name, dtype in spec.items() if name in present}
        compiled = bool(selected) and all(d == INT for d in selected.values()) and compiled_reader_available()
        bounds = self._rowid_bounds(table, chunk_rows) if selected else None
        if bounds is None and not compiled:
            yield self.read(table, spec)
            return
        head = f"SELECT {', '.join(_quote(c) for c in selected)} FROM {_quote(table)}"
        if bounds is None:  # no usable rowids, or fewer rows than a chunk: one piece
            sqls = [head]
        else:
            firsts = range(bounds[0], bounds[1] + 1, chunk_rows)
            sqls = [f"{head} WHERE rowid BETWEEN {lo} AND {min(lo + chunk_rows - 1, bounds[1])}" for lo in firsts]
        missing = [pl.lit(None, dtype=dtype).alias(n) for n, dtype in spec.items() if n not in present]
        if self._readers is None:
            self._readers = ChunkReaders(self.uri, self.declined)
        pieces = self._readers.fetch(sqls, selected, compiled=compiled, rows_hint=chunk_rows if bounds else 0)
        for sql in sqls:
            with _translating_errors(self.path):
                frame = next(pieces)
                if frame is None:  # text that is not valid UTF-8
                    frame = _fetch_sqlite3(self.conn, sql, selected, self.lossy)
            yield self._typed(frame, selected).with_columns(missing).select(list(spec))

    def _rowid_bounds(self, table: str, chunk_rows: int) -> tuple[int, int] | None:
        """``(min, max)`` rowid of ``table`` when it spans several chunks, else None (read it whole)."""
        ends = self._rowid_range(table)
        if ends is None or ends[1] - ends[0] < chunk_rows:
            return None
        if (ends[1] - ends[0]) // chunk_rows > _MAX_CHUNKS:  # rowids far sparser than any export writes
            return None
        return ends

    def query(self, sql: str, spec: ColumnSpec) -> pl.DataFrame:
        """Run ``sql`` (whose result columns are exactly ``spec``'s, in order) into a frame."""
        with _translating_errors(self.path):
            frame = fetch_adbc(self.uri, sql, spec)
            if frame is None:  # text that is not valid UTF-8
                frame = _fetch_sqlite3(self.conn, sql, spec, self.lossy)
        return self._typed(frame, spec)

    def _typed(self, frame: pl.DataFrame, spec: ColumnSpec) -> pl.DataFrame:
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
    """Open ``path`` read-only and list its tables; :class:`CorruptTraceError` if SQLite cannot read it.

    A WAL-mode file with frames not yet checkpointed is read from a checkpointed copy (see
    :mod:`traceq.importers.nsys.wal`); errors still name ``path``."""
    try:
        with _translating_errors(path):
            copy = checkpointed_copy(path)
    except OSError as exc:
        raise _corrupt(path, exc) from exc
    uri = sqlite_uri(copy.path if copy is not None else path)
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        if copy is not None:
            copy.close()
        raise _corrupt(path, exc) from exc
    # Exports can hold text that is not valid UTF-8 (observed in TARGET_INFO_SYSTEM_ENV of a 2022
    # export); one bad byte must not make the whole file unreadable.  The bulk reads switch to this
    # slower decoder only when the strict one fails (see _fetch_sqlite3).
    lossy = _LossyDecoder()
    conn.text_factory = lossy
    try:
        with _translating_errors(path):
            names = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    except CorruptTraceError:
        conn.close()
        if copy is not None:
            copy.close()
        raise
    tables = frozenset(str(n) for (n,) in names)
    return ExportDb(path=path, uri=uri, conn=conn, tables=tables, lossy=lossy, copy=copy)


def reader_backend() -> str:
    """How :meth:`ExportDb.read_chunks` reads integer columns: ``compiled`` (see
    :func:`~traceq.importers.nsys.column_reader.compiled_reader_available`), else ``adbc``.  Text
    columns, declined chunks and the other bulk reads use ADBC."""
    return "compiled" if compiled_reader_available() else "adbc"


class _LossyDecoder:
    """``sqlite3``'s text factory for text that may not be UTF-8: each bad byte becomes U+FFFD, and
    the values that held one are counted."""

    def __init__(self) -> None:
        self.replaced = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced += 1
            return raw.decode("utf-8", errors="replace")


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _corrupt(path: Path, exc: BaseException) -> CorruptTraceError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    if isinstance(exc, UnicodeDecodeError):
        first = "its schema is damaged: SQLite's error quotes bytes that are not UTF-8"
    return CorruptTraceError(
        f"cannot be read as SQLite ({first})",
        path=path,
        hint="the file is damaged or truncated; copy it again or re-export the report with nsys export --type sqlite",
    )


@contextmanager
def _translating_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        # UnicodeDecodeError: SQLite's message quoted bytes of a damaged schema that are not UTF-8.
        raise _corrupt(path, exc) from exc
    except Exception as exc:
        # The ADBC driver reports SQLite errors as its own DB-API errors, or as OSError from the
        # Arrow stream, the compiled reader as SQLiteError; only those are the file's fault,
        # anything else is a traceq bug.
        if is_adbc_error(exc) or isinstance(exc, OSError) or is_compiled_error(exc):
            raise _corrupt(path, exc) from exc
        raise


def _fetch_sqlite3(conn: sqlite3.Connection, sql: str, spec: ColumnSpec, lossy: _LossyDecoder) -> pl.DataFrame:
    conn.text_factory = str  # strict C-level decoding: no Python call per text value
    try:
        rows = conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
        conn.text_factory = lossy
        rows = conn.execute(sql).fetchall()
    finally:
        conn.text_factory = lossy
    try:
        return pl.DataFrame(rows, schema=dict(spec), orient="row")
    except (TypeError, pl.exceptions.PolarsError) as exc:
        raise sqlite3.DatabaseError(f"unexpected value types: {exc}") from exc
