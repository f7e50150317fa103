"""Importers: one subpackage per source family, each entry point a function ``path -> ImportResult``.

* :mod:`traceq.importers.kineto` -- PyTorch profiler / Chrome-trace JSON
  (``kineto.importer.read_kineto``);
* :mod:`traceq.importers.nsys` -- Nsight Systems SQLite exports and ``.nsys-rep`` reports
  (``nsys.sqlite_importer.read_nsys_sqlite``, ``nsys.rep_importer.read_nsys_rep``).

What both share lies here: :class:`ImportResult` (``result``), the last step that conforms,
sorts and validates the rows (``event_rows``, over ``time_sort``), per-row look-ups
(``lookups``), Arrow buffers into polars (``arrow_capsule``) and the compiled readers' buffer pool
(``_buffers.h``).  :func:`detect_format` sniffs the first bytes (gzip, SQLite, Parquet and JSON
magic) and falls back on the suffix only for ``.nsys-rep``/``.qdrep``, whose container is opaque;
:func:`read_file` dispatches.  Importers know nothing of analyses.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Literal

from traceq.errors import CorruptTraceError, InputNotFoundError, UnsupportedFormatError
from traceq.importers.result import ImportResult

Format = Literal["nsys-sqlite", "nsys-rep", "kineto-json", "parquet"]
FORMATS: tuple[Format, ...] = ("nsys-sqlite", "nsys-rep", "kineto-json", "parquet")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_REP_SUFFIXES = (".nsys-rep", ".qdrep")


def detect_format(path: Path) -> Format:
    """The format of ``path``, from its content (and, for nsys reports, its suffix)."""
    if not path.exists():
        raise InputNotFoundError("no such file or directory", path=path, hint="check the path")
    if path.is_dir():
        raise UnsupportedFormatError("is a directory", path=path, hint="pass the trace files inside it")
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path, hint="check permissions") from exc
    if path.suffix.lower() in _REP_SUFFIXES:
        return "nsys-rep"
    if head.startswith(_SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    if head.startswith(_GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as fh:
                inner = fh.read(64)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptTraceError(
                f"gzip stream is damaged ({exc})", path=path, hint="the file is truncated or not gzip; copy it again"
            ) from exc
        if inner.lstrip()[:1] in (b"{", b"["):
            return "kineto-json"
        raise UnsupportedFormatError(
            "gzip file does not hold JSON", path=path, hint="traceq reads Kineto .json.gz, nsys .sqlite/.nsys-rep"
        )
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        return "kineto-json"
    if not head:
        raise UnsupportedFormatError("file is empty", path=path, hint="the capture produced no data; profile again")
    raise UnsupportedFormatError(
        "not a trace format traceq knows",
        path=path,
        hint="traceq reads nsys .sqlite/.nsys-rep exports, PyTorch profiler .json/.json.gz and traceq .parquet",
    )


def read_file(path: Path, fmt: Format | None = None) -> ImportResult:
    """Import one source file; ``fmt`` overrides detection.

    traceq's own Parquet files are not sources (they hold an already-imported table with its
    statistics); :func:`traceq.loading.load` reads them.
    """
    fmt = fmt or detect_format(path)
    if fmt == "parquet":
        raise UnsupportedFormatError(
            "is a traceq Parquet table, not a source trace", path=path, hint="open it with traceq.load()"
        )
    if fmt == "nsys-sqlite":
        from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite

        return read_nsys_sqlite(path)
    if fmt == "nsys-rep":
        from traceq.importers.nsys.rep_importer import read_nsys_rep

        return read_nsys_rep(path)
    from traceq.importers.kineto.importer import read_kineto

    return read_kineto(path)


__all__ = ["FORMATS", "Format", "ImportResult", "detect_format", "read_file"]
