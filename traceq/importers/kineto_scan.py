"""Byte-level work of the Kineto importer: reading the file and rewriting its event array as NDJSON.

This module owns the part of the fast path that runs before polars sees the data.  It never builds
a Python object per event: :func:`read_trace_bytes` decompresses into one preallocated
``bytearray``, and :func:`rewrite_as_ndjson` walks that buffer with numpy, a chunk at a time,
tracking only what JSON structure needs (string state, bracket depth, escapes).  It rewrites the
``traceEvents`` array *in place* so that each event sits on its own line:

* the commas that separate events (depth 1, outside strings) become ``\\n``;
* line breaks between tokens (Kineto pretty-prints every event over several lines) become spaces.

Both rewrites keep the buffer's length, so no second copy of the file is ever made.  Whatever the
scanner cannot vouch for (a raw line break inside a string, an unclosed object-form array, a lone
UTF-16 surrogate escape, ...) raises :class:`FastPathDeclined`; the caller then re-reads the file
with the lenient parser.  A mistake the scanner does not notice cannot produce wrong rows either:
a line cut in the wrong place is not a JSON object, and polars rejects it.
"""

from __future__ import annotations

import gzip
import itertools
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from traceq.errors import CorruptTraceError, InputNotFoundError

_GZIP_MAGIC: Final = b"\x1f\x8b"
_GZIP_MIN_BYTES: Final = 18
"""A gzip member is at least a 10-byte header, an empty deflate block and an 8-byte trailer."""
_MAX_DEFLATE_RATIO: Final = 1032
_READ_STEP_BYTES: Final = 16 << 20
"""Gzip is inflated this many bytes at a time, so no temporary ever holds the whole file."""
SCAN_CHUNK_BYTES: Final = 1 << 20
"""The scanner's unit of work: small enough that its dozen numpy passes stay in cache."""
BLOCK_BYTES: Final = 16 << 20
"""About this many bytes of events go to each ``polars.read_ndjson`` call (the only copy made)."""

_WHITESPACE: Final = b" \t\r\n"
_BOM: Final = b"\xef\xbb\xbf"
_KEY_TAIL: Final = re.compile(rb"\s*:\s*\[")


class FastPathDeclined(Exception):
    """The fast path cannot vouch for this file; ``reason`` says why (it lands in meta.warnings)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def read_trace_bytes(path: Path) -> bytearray:
    """The file's JSON bytes, gunzipped when the content starts with the gzip magic (not by suffix)."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
            if magic != _GZIP_MAGIC:
                fh.seek(0)
                buf = bytearray(path.stat().st_size)
                got = fh.readinto(buf)
                del buf[got:]
                return buf
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


@dataclass(frozen=True)
class Block:
    """Bytes ``[begin, end)`` of the rewritten buffer: ``events`` whole events, one per line, the
    first of which is event number ``first`` of the array."""

    begin: int
    end: int
    first: int
    events: int


@dataclass(frozen=True)
class EventArray:
    """Where the events are, after :func:`rewrite_as_ndjson`.

    ``blocks`` cover the array in order; ``events`` counts its objects; ``open_end`` is true for an
    array form whose closing ``]`` is missing (a writer that crashed between two events).
    ``start``/``stop`` are the offsets of ``[`` and of ``]`` (``len(buf)`` when missing).
    """

    container: Container
    start: int
    stop: int
    blocks: tuple[Block, ...]
    events: int
    open_end: bool


def locate_event_array(buf: bytearray) -> tuple[Container, int]:
    """The container form and the offset of the ``[`` that opens the event array."""
    first = _skip_whitespace(buf, len(_BOM) if buf.startswith(_BOM) else 0)
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


def _skip_whitespace(buf: bytearray, at: int) -> int:
    while at < len(buf) and buf[at] in _WHITESPACE:
        at += 1
    return at


def rewrite_as_ndjson(buf: bytearray, container: Container, start: int) -> EventArray:
    """Rewrite the array opening at ``buf[start]`` in place, one event per line (see module doc)."""
    if not _surrogate_escapes_paired(buf, start):
        # polars decodes a lone surrogate escape to U+0000; let the lenient parser deal with it.
        raise FastPathDeclined("a lone UTF-16 surrogate escape (\\uD800-\\uDFFF)")
    scan = _Scan(buf, start)
    while scan.stop is None and scan.pos < len(buf):
        scan.step()
    if scan.in_string:
        raise FastPathDeclined("the event array ends inside a string (file cut off)")
    if scan.stop is None:
        if container == "object" or scan.depth != 1:
            raise FastPathDeclined("the event array is cut off before its closing bracket")
        stop, open_end = len(buf), True
    else:
        stop, open_end = scan.stop, False
        if buf[stop] != ord("]"):
            raise FastPathDeclined("the event array closes with '}'")
        if container == "array" and _skip_whitespace(buf, stop + 1) != len(buf):
            raise FastPathDeclined("bytes after the closing bracket of the array")
    cuts = [(start + 1, 0), *scan.cuts, (stop, scan.events)]
    blocks = tuple(
        Block(begin, end, first, after - first)
        for (begin, first), (end, after) in itertools.pairwise(cuts)
        if end > begin
    )
    return EventArray(container, start, stop, blocks, scan.events, open_end)


_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LOW_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _surrogate_escapes_paired(buf: bytearray, start: int) -> bool:
    """Whether every ``\\uD800``-``\\uDFFF`` escape is half of a high+low pair (what polars decodes right).

    Such escapes are rare (Python's ``json.dumps`` writes them for emoji), so a Python loop is fine.
    """
    if buf.find(b"\\ud", start) == -1 and buf.find(b"\\uD", start) == -1:
        return True
    paired_lows: set[int] = set()
    for match in _SURROGATE_ESCAPE.finditer(buf, start):
        at = match.start()
        backslashes = 0
        while at - 1 - backslashes >= 0 and buf[at - 1 - backslashes] == 0x5C:
            backslashes += 1
        if backslashes % 2 or at in paired_lows:
            continue  # a literal backslash followed by text, or the low half of a checked pair
        if buf[at + 3] in b"89abAB" and _LOW_SURROGATE_ESCAPE.match(buf, at + 6):
            paired_lows.add(at + 6)
            continue
        return False
    return True


class _Scan:
    """State carried from one chunk to the next: string state, depth, and what was found."""

    def __init__(self, buf: bytearray, start: int):
        self.buf = buf
        self.pos = start
        self.depth = 0
        self.in_string = 0
        self.events = 0
        self.stop: int | None = None
        self.cuts: list[tuple[int, int]] = []
        """Block boundaries: (offset of a separator, events before it)."""
        self._last_cut = start
        # Carriage returns are rare; skip the extra comparison pass when there are none.
        self._has_cr = buf.find(b"\r", start) != -1

    def step(self) -> None:
        buf, begin = self.buf, self.pos
        end = min(begin + SCAN_CHUNK_BYTES, len(buf))
        # Never split a run of backslashes, so that an escape never straddles two chunks.
        while end < len(buf) and buf[end - 1] == 0x5C:
            end += 1
        data = np.frombuffer(buf, dtype=np.uint8, count=end - begin, offset=begin)
        has_backslash = buf.find(b"\\", begin, end) != -1
        wanted = _structural_mask(data, self._has_cr)
        wanted |= data == ord('"')
        if has_backslash:
            wanted |= data == ord("\\")
        at = np.flatnonzero(wanted)
        del wanted
        byte = data[at]
        if has_backslash:
            at, byte = _drop_escaped(at, byte)

        is_quote = byte == ord('"')
        # Running quote count mod 256 is enough for parity, and a uint8 cumsum is 8x less memory.
        quotes_so_far = np.cumsum(is_quote, dtype=np.uint8)
        inside = ((quotes_so_far + np.uint8(self.in_string)) & 1).view(np.bool_)
        is_break = byte == ord("\n")
        if self._has_cr:
            is_break |= byte == ord("\r")
        if np.any(inside & is_break):
            raise FastPathDeclined("a raw line break inside a JSON string")
        breaks = at[is_break]
        token = ~(inside | is_quote | is_break)
        at, byte = at[token], byte[token]

        delta = (byte == ord("{")).astype(np.int64)
        delta += byte == ord("[")
        delta -= byte == ord("}")
        delta -= byte == ord("]")
        depth_after = self.depth + np.cumsum(delta)
        closing = np.flatnonzero((delta < 0) & (depth_after == 0))
        if closing.size:
            last = int(closing[0])
            close_at = int(at[last])
            self.stop = begin + close_at
            at, byte, depth_after = at[:last], byte[:last], depth_after[:last]
            breaks = breaks[breaks < close_at]
            end = self.stop + 1
        elif np.any(depth_after < 0):
            raise FastPathDeclined("unbalanced brackets in the event array")

        element_opens = (depth_after == 2) & ((byte == ord("{")) | (byte == ord("[")))
        if np.any(element_opens & (byte != ord("{"))):
            raise FastPathDeclined("an element of the event array is not an object")
        separators = at[(byte == ord(",")) & (depth_after == 1)]
        data[breaks] = ord(" ")
        data[separators] = ord("\n")
        if separators.size and begin + int(separators[-1]) - self._last_cut >= BLOCK_BYTES:
            self._last_cut = begin + int(separators[-1])
            before = self.events + int(np.count_nonzero(at[element_opens] < separators[-1]))
            self.cuts.append((self._last_cut, before))
        self.events += int(np.count_nonzero(element_opens))
        if depth_after.size:
            self.depth = int(depth_after[-1])
        if quotes_so_far.size:
            self.in_string = (self.in_string + int(quotes_so_far[-1])) & 1
        self.pos = end


def _structural_mask(data: npt.NDArray[np.uint8], with_cr: bool) -> npt.NDArray[np.bool_]:
    """Where ``data`` holds a bracket, a comma or a line break (comparisons beat a lookup table)."""
    mask = np.asarray(data == ord("{"), dtype=np.bool_)
    for byte in (b"}", b"[", b"]", b",", b"\n", *((b"\r",) if with_cr else ())):
        mask |= data == byte[0]
    return mask


def _drop_escaped(
    at: npt.NDArray[np.intp], byte: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.uint8]]:
    """Remove backslashes, and the byte each odd-length run of them escapes, from the scan."""
    is_backslash = byte == ord("\\")
    if not np.any(is_backslash):
        return at, byte
    slashes = at[is_backslash]
    run_breaks = np.flatnonzero(np.diff(slashes) != 1) + 1
    run_starts = slashes[np.concatenate(([0], run_breaks))]
    run_ends = slashes[np.concatenate((run_breaks - 1, [slashes.size - 1]))]
    escaped = run_ends[(run_ends - run_starts + 1) % 2 == 1] + 1
    keep = ~is_backslash & ~np.isin(at, escaped)
    return at[keep], byte[keep]
