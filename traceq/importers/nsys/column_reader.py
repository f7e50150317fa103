"""The nsys importer's compiled column reader (C, ``_column_reader.c``), seen from Python.

The C module steps an SQLite query whose columns are all integers straight into Arrow buffers; it
needs no SQLite header or library at build time, so this module finds the library at run time --
the one Python's own ``sqlite3`` module uses, else the system's ``libsqlite3`` -- and hands the C
module the addresses of the functions it calls (:func:`sqlite_functions`).  It also says whether
the reader may be used (:func:`compiled_reader_available`, :data:`COMPILED_READER_ENV`), turns its
buffers into a polars frame (:func:`compiled_frame`) and recognises its errors
(:func:`is_compiled_error`).  Which chunks it reads is :mod:`traceq.importers.nsys.export_db`'s
business.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Final

import polars as pl
import pyarrow as pa

from traceq.importers.arrow_capsule import series_of

try:
    from traceq.importers.nsys import _column_reader
except ImportError:  # a source tree imported without its compiled module (pip install . builds it)
    _column_reader = None  # type: ignore[assignment]


COMPILED_READER_ENV: Final = "TRACEQ_NSYS_COMPILED_READER"
"""Environment variable: ``0`` turns the compiled reader off, so that every chunk is read through
ADBC, as where it is not built; read at each
:meth:`~traceq.importers.nsys.export_db.ExportDb.read_chunks` call."""


def compiled_reader_available() -> bool:
    """Whether the compiled reader is built, has an SQLite library (:func:`sqlite_functions`) and is
    not turned off by :data:`COMPILED_READER_ENV`."""
    return os.environ.get(COMPILED_READER_ENV, "1").strip() != "0" and sqlite_functions() is not None


@functools.cache
def sqlite_functions() -> tuple[int, ...] | None:
    """Addresses of the SQLite C functions the compiled reader calls (``_column_reader.FUNCTIONS``), in the
    library that Python's ``sqlite3`` module uses (else the system's ``libsqlite3``); None where the
    reader is not built or no thread-safe SQLite library is found."""
    if _column_reader is None:
        return None
    for candidate in _sqlite_libraries():
        try:
            library = ctypes.CDLL(candidate)
            if not library.sqlite3_threadsafe():  # reader threads beside the sqlite3 module need a safe build
                continue
            names = _column_reader.FUNCTIONS
            addresses = [ctypes.cast(getattr(library, name), ctypes.c_void_p).value for name in names]
        except (OSError, AttributeError):
            continue
        found = [address for address in addresses if address]
        if len(found) == len(addresses):
            return tuple(found)
    return None


def _sqlite_libraries() -> Iterator[str]:
    """Files to look up SQLite's functions in, best first.  Through ``_sqlite3``'s own handle they
    resolve to the SQLite it is linked with (or, where it holds SQLite itself, to that copy when it
    exports them); else the system's ``libsqlite3`` (``find_library`` runs a subprocess: only then)."""
    own = getattr(sys.modules.get("_sqlite3"), "__file__", None)
    if isinstance(own, str):
        yield own
    system = ctypes.util.find_library("sqlite3")
    if system is not None:
        yield system


def is_compiled_error(exc: BaseException) -> bool:
    return _column_reader is not None and isinstance(exc, _column_reader.SQLiteError)


def compiled_frame(result: tuple[int, list[_column_reader.Column]], spec: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """The compiled reader's buffers as Int64 columns named after ``spec``, without a copy."""
    rows, columns = result
    series = []
    for name, (values, validity, nulls) in zip(spec, columns, strict=True):
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
        array = pa.Array.from_buffers(pa.int64(), rows, buffers, null_count=nulls)
        series.append(series_of(name, array))
    return pl.DataFrame(series)


def connect(uri: str) -> _column_reader.Connection:
    """A compiled-reader connection to the export at ``uri`` (read-only); only where
    :func:`compiled_reader_available`."""
    functions = sqlite_functions()
    assert _column_reader is not None and functions is not None
    return _column_reader.Connection(uri, functions)


def trim() -> None:
    """Free the buffers the compiled reader keeps for its next read (once an export is read)."""
    if _column_reader is not None:
        _column_reader.trim()
