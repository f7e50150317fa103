"""Importers: one subpackage per source family, each entry point a function ``path -> ImportResult``.

* :mod:`traceq.importers.kineto` -- PyTorch profiler / Chrome-trace JSON
  (``kineto.importer.read_kineto``);
* :mod:`traceq.importers.nsys` -- Nsight Systems SQLite exports and ``.nsys-rep`` reports
  (``nsys.sqlite_importer.read_nsys_sqlite``, ``nsys.rep_importer.read_nsys_rep``).

What both share lies here: :class:`ImportResult` (``result``), the last step that conforms,
sorts and validates the rows (``event_rows``, over ``time_sort``), exact duplicates kept once and
counted (``duplicates``), per-row look-ups
(``lookups``), Arrow buffers into polars (``arrow_capsule``) and the compiled readers' buffer pool
(``_buffers.h``).  :func:`detect_format` sniffs the first bytes (gzip, SQLite, Parquet and JSON
magic) and falls back on the suffix only for ``.nsys-rep``/``.qdrep``, whose container is opaque;
:func:`read_file` dispatches.  Both refuse what is not a regular file (a FIFO, a device, a
socket: :func:`check_regular_file`), before opening it, so that a pipe with no writer cannot block
them; :func:`traceq.loading.load` reads such an input when asked to.  Importers know nothing of
analyses.
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from typing import Final, Literal

from traceq.errors import CorruptTraceError, InputNotFoundError, NotARegularFileError, UnsupportedFormatError
from traceq.importers.compiled import warn_if_missing
from traceq.importers.result import ImportResult

Format = Literal["nsys-sqlite", "nsys-rep", "kineto-json", "parquet"]
FORMATS: tuple[Format, ...] = ("nsys-sqlite", "nsys-rep", "kineto-json", "parquet")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_REP_SUFFIXES = (".nsys-rep", ".qdrep")


SPECIAL_FILES_ENV: Final = "TRACEQ_READ_SPECIAL_FILES"
"""Set to 1 to have :func:`traceq.loading.load` read inputs that are not regular files."""

_SPECIAL_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file_kind(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a directory (``a FIFO (a named
    pipe)``, ``a character device``, ...), from its ``stat`` (it is not opened); else None.
    Raises ``InputNotFoundError`` for a path that does not exist."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError as exc:
        raise InputNotFoundError("no such file or directory", path=path, hint="check the path") from exc
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path, hint="check the path") from exc
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), "not a regular file")


def check_regular_file(path: Path) -> None:
    """Raise ``NotARegularFileError`` when ``path`` is a FIFO, a device or a socket (checked without
    opening it: opening a FIFO blocks until something writes to it)."""
    kind = special_file_kind(path)
    if kind is not None:
        raise NotARegularFileError(
            f"is {kind}, not a regular file; traceq reads trace files, whose end it can rely on",
            path=path,
            hint=f"save the stream to a file first, or set {SPECIAL_FILES_ENV}=1 (special_files=True in "
            "Python) to have traceq copy it to a temporary file and read that",
        )


def detect_format(path: Path) -> Format:
    """The format of ``path``, from its content (and, for nsys reports, its suffix)."""
    check_regular_file(path)
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


def reads_other_files(path: Path, fmt: Format) -> bool:
    """Whether importing ``path`` also reads files beside it, which a fingerprint of ``path`` alone
    does not cover: an SQLite export's ``-wal`` with transactions not yet in it."""
    if fmt != "nsys-sqlite":
        return False
    from traceq.importers.nsys.wal import has_wal_frames

    return has_wal_frames(path)


def read_file(path: Path, fmt: Format | None = None, *, max_inflate_ratio: float | None = None) -> ImportResult:
    """Import one source file; ``fmt`` overrides detection.

    traceq's own Parquet files are not sources (they hold an already-imported table with its
    statistics); :func:`traceq.loading.load` reads them.  ``max_inflate_ratio`` bounds what a gzip
    file may inflate to (see :func:`traceq.importers.kineto.trace_bytes.inflate_limit`).
    """
    check_regular_file(path)
    fmt = fmt or detect_format(path)
    warn_if_missing()
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

    return read_kineto(path, max_inflate_ratio=max_inflate_ratio)


__all__ = [
    "FORMATS",
    "SPECIAL_FILES_ENV",
    "Format",
    "ImportResult",
    "check_regular_file",
    "detect_format",
    "read_file",
    "reads_other_files",
    "special_file_kind",
]
