"""Byte-level work of the Kineto importer: reading the file and finding its event array.

:func:`read_trace_bytes` returns the file's JSON bytes (gunzipped into one preallocated
``bytearray`` when the content is gzip); :func:`locate_event_array` finds the ``[`` that opens the
events.  What happens inside the array is :mod:`traceq.importers.kineto_fast`'s business.
"""

from __future__ import annotations

import gzip
import mmap
import re
import zlib
from pathlib import Path
from typing import Final, Literal

from traceq.errors import CorruptTraceError, InputNotFoundError
from traceq.importers.kineto_fast import FastPathDeclined, Raw

_GZIP_MAGIC: Final = b"\x1f\x8b"
_GZIP_MIN_BYTES: Final = 18
"""A gzip member is at least a 10-byte header, an empty deflate block and an 8-byte trailer."""
_MAX_DEFLATE_RATIO: Final = 1032
_READ_STEP_BYTES: Final = 16 << 20
"""Gzip is inflated this many bytes at a time, so no temporary ever holds the whole file."""

MAP_MIN_BYTES: Final = 1 << 20
_WHITESPACE: Final = b" \t\r\n"
_BOM: Final = b"\xef\xbb\xbf"
_KEY_TAIL: Final = re.compile(rb"\s*:\s*\[")


def read_trace_bytes(path: Path) -> Raw:
    """The file's JSON bytes, gunzipped when the content starts with the gzip magic (not by suffix).

    A plain file of at least :data:`MAP_MIN_BYTES` is memory-mapped read-only (no copy: its pages
    are the page cache's); a gzip file is inflated into one preallocated ``bytearray``.
    """
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
            if magic != _GZIP_MAGIC:
                size = fh.seek(0, 2)
                fh.seek(0)
                if size < MAP_MIN_BYTES:
                    return fh.read()
                mapped = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
                mapped.madvise(mmap.MADV_SEQUENTIAL)  # read ahead; the parser gives pages back as it goes
                return mapped
            compressed_size = fh.seek(0, 2)
            if compressed_size < _GZIP_MIN_BYTES:
                raise CorruptTraceError(
                    f"gzip stream is damaged (only {compressed_size} bytes)",
                    path=path,
                    hint="the file is truncated or not gzip; copy it again",
                )
            fh.seek(-4, 2)
            # ISIZE (uncompressed size mod 2**32) is only a hint: multi-member files and files
            # over 4 GiB break it, and the loop below copes with either.  Deflate cannot expand
            # more than ~1032:1, which bounds what a damaged trailer can make us allocate.
            size_hint = min(int.from_bytes(fh.read(4), "little"), compressed_size * _MAX_DEFLATE_RATIO)
    except FileNotFoundError as exc:
        raise InputNotFoundError("no such file", path=path, hint="check the path") from exc
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path, hint="check permissions") from exc
    try:
        return _gunzip(path, size_hint)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorruptTraceError(
            f"gzip stream is damaged ({exc})", path=path, hint="the file is truncated or not gzip; copy it again"
        ) from exc


def _gunzip(path: Path, size_hint: int) -> bytearray:
    buf = bytearray(size_hint)
    filled = 0
    with gzip.open(path, "rb") as gz, memoryview(buf) as view:
        while filled < len(buf):
            got = gz.readinto(view[filled : filled + _READ_STEP_BYTES])
            if not got:
                break
            filled += got
        rest = gz.read() if filled == len(buf) else b""
    del buf[filled:]
    buf += rest
    return buf


Container = Literal["object", "array"]


def locate_event_array(buf: Raw) -> tuple[Container, int]:
    """The container form and the offset of the ``[`` that opens the event array."""
    first = _skip_whitespace(buf, len(_BOM) if buf[: len(_BOM)] == _BOM else 0)
    if first >= len(buf):
        raise FastPathDeclined("the file holds only whitespace")
    if buf[first] == ord("["):
        return "array", first
    if buf[first] != ord("{"):
        raise FastPathDeclined("the file is neither a JSON object nor a JSON array")
    at = buf.find(b'"traceEvents"', first)
    while at != -1:
        tail = _KEY_TAIL.match(buf, at + len(b'"traceEvents"'))
        if tail:
            return "object", tail.end() - 1
        at = buf.find(b'"traceEvents"', at + 1)
    raise FastPathDeclined("no traceEvents array")


def _skip_whitespace(buf: Raw, at: int) -> int:
    while at < len(buf) and buf[at] in _WHITESPACE:
        at += 1
    return at
