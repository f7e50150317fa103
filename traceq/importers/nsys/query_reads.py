"""Query results read into polars frames: through the ADBC SQLite driver, and on a few threads that
read ahead of their consumer (the compiled reader where a query's columns are all integers).

:mod:`traceq.importers.nsys.export_db` decides what to read; this module only reads it.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

import polars as pl
import pyarrow as pa

from traceq.importers.nsys import column_reader
from traceq.importers.nsys.column_reader import compiled_frame

ColumnSpec = Mapping[str, pl.DataType]
"""Columns to read: name -> the dtype the caller wants (``pl.Int64()`` or ``pl.String()``)."""

# ADBC's SQLite driver infers each column's Arrow type from the first batch and fails when a later
# batch disagrees (a column that is NULL for the first rows, then text).  One batch for the whole
# result makes the inference see every value, so the types are always consistent.
_ADBC_BATCH_ROWS: Final = "1000000000"

_MAX_READ_THREADS: Final = 4


class ChunkReaders:
    """A few threads, each with its own connections (compiled reader, ADBC), that read queries
    ahead of their consumer."""

    def __init__(self, uri: str, declined: list[str]) -> None:
        self.uri = uri
        self.declined = declined
        self.threads = max(1, min(_MAX_READ_THREADS, _usable_cpus()))
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="traceq-nsys")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[Any] = []

    def fetch(
        self, sqls: list[str], spec: ColumnSpec, *, compiled: bool, rows_hint: int
    ) -> Iterator[pl.DataFrame | None]:
        """Each query's frame, in order: by the compiled reader where ``compiled`` (its first
        allocation sized for ``rows_hint`` rows) and it does not decline, else through ADBC; None
        where the caller must read it through ``sqlite3`` (text that is not valid UTF-8).
        At most ``threads + 1`` results wait in memory at a time."""
        pending: deque[Future[pl.DataFrame | None]] = deque()
        try:
            for sql in sqls:
                pending.append(self._pool.submit(self._read, sql, spec, compiled, rows_hint))
                if len(pending) > self.threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()

    def _read(self, sql: str, spec: ColumnSpec, compiled: bool, rows_hint: int) -> pl.DataFrame | None:
        if compiled:
            reader = self._connection("compiled", lambda: column_reader.connect(self.uri))
            result = reader.read(sql, rows_hint)
            if not isinstance(result, str):
                return compiled_frame(result, spec)
            self.declined.append(f"{result}: {sql}")
        return fetch_adbc(self.uri, sql, spec, self._connection("adbc", lambda: adbc().connect(self.uri)))

    def _connection(self, kind: str, connect: Callable[[], Any]) -> Any:
        """This thread's connection of ``kind``, opened on first use."""
        conn = getattr(self._local, kind, None)
        if conn is None:
            conn = connect()
            setattr(self._local, kind, conn)
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for conn in self._connections:
            conn.close()


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@functools.cache
def adbc() -> Any:
    """The ADBC SQLite driver's DB-API module, imported on first use: it costs an import that a file
    turned away before any bulk read (not an nsys export) need not pay."""
    import adbc_driver_sqlite.dbapi as dbapi  # type: ignore[import-not-found, unused-ignore]

    return dbapi


def is_adbc_error(exc: BaseException) -> bool:
    # Only an imported driver can have raised it, so the check never imports the driver.
    dbapi = sys.modules.get("adbc_driver_sqlite.dbapi")
    return dbapi is not None and isinstance(exc, dbapi.Error)


def fetch_adbc(uri: str, sql: str, spec: ColumnSpec, connection: Any = None) -> pl.DataFrame | None:
    """The result through ADBC, or None when it holds text that is not valid UTF-8.

    The driver passes SQLite's bytes into Arrow string arrays unchecked, and polars trusts Arrow;
    invalid UTF-8 would crash later, so text columns are validated and such a result is read again
    through ``sqlite3``, which decodes it lossily.
    """
    if connection is None:
        with adbc().connect(uri) as conn:
            return fetch_adbc(uri, sql, spec, conn)
    with connection.cursor() as cur:
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


__all__ = ["ChunkReaders", "ColumnSpec", "adbc", "fetch_adbc", "is_adbc_error"]
