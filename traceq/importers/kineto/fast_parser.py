"""The fast parser of the Kineto importer: the raw event frame from the compiled scanner's passes.

:func:`parse_fast` finds the event array (:func:`locate_event_array`), has the compiled scanner
(:mod:`traceq.importers.kineto.scanner`) validate a block of it at a time as strict JSON and write
the Arrow buffers of the fields read in one pass, so no Python object is built per event, and hands
each block of the raw frame (:data:`~traceq.importers.kineto.raw_frame.RAW_SCHEMA`; ``idx`` is the
event's position in the array) to a ``compact`` callback (the importer's per-event normalisation),
so that the bulky raw columns never exist for the whole file at once.  Anything the scanner cannot
vouch for makes the fast path decline (:class:`~traceq.importers.kineto.scanner.FastPathDeclined`)
rather than guess; :mod:`traceq.importers.kineto.lenient_parser` then builds the same frame.

``ts``/``dur`` are read as IEEE doubles, as every Chrome-trace viewer does.  Fields that mix types
in real files (``pid``, ``tid``, ``id``, ``device``, ``stream``: ints, ``"stream 7"``, ``"Spans"``,
``"0x0"``) are read as strings and interpreted by the callback; a kernel's ``grid``/``block``
(``[x, y, z]``, or Inductor's ``"grid(100,)"``) is read into three Int32 columns.  Text fields
with few distinct values are made ``Categorical`` at once (4 bytes a row instead of a 16-byte
string view).
"""

from __future__ import annotations

import json
import mmap
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import polars as pl

from traceq.importers.kineto.raw_frame import (
    RAW_SCHEMA,
    TRIPLE_FIELDS,
    UNCLOSED_ARRAY_WARNING,
    Compact,
    Container,
    ParsedTrace,
    cut_warnings,
    decoder,
)
from traceq.importers.kineto.scanner import (
    CLOSED,
    CUT_OFF,
    OPEN_END,
    FastPathDeclined,
    FieldSpec,
    Scanned,
    scan,
    to_block,
    trim,
)
from traceq.importers.kineto.trace_bytes import InflatedPastHint, Inflating, Raw
from traceq.read_progress import FileReading

CHUNK_BYTES: Final = 32 << 20
"""Bytes of the event array scanned at a time (a pass stops after the first event ending past them);
an eighth of the file when that is less (at least ``FIRST_CHUNK_BYTES``), so that the passes in
flight stay small beside a small file."""
FIRST_CHUNK_BYTES: Final = 4 << 20
"""The first pass is shorter, so that compacting (on this thread) starts soon after the scan."""
KEEP_AHEAD_PASSES: Final = 3
"""A gzip file is inflated at most this many passes (plus the margin a pass may wait for) past the
events already compacted: the pass being compacted, the one being scanned and the next."""
_SPEC: Final = FieldSpec.of(RAW_SCHEMA, TRIPLE_FIELDS)


def parse_fast(source: Raw | Inflating, compact: Compact, reading: FileReading | None = None) -> ParsedTrace:
    """Parse with the columnar path; raises :class:`FastPathDeclined` for anything it cannot vouch for.

    ``source`` is only read: the file's bytes, or a gzip file still inflating, whose events are
    parsed as they arrive.  The scanner runs without the GIL, so each block's pass runs on a
    helper thread while the previous block is converted and compacted here.  ``reading`` is told
    the share of the (inflated) bytes parsed after each block (:mod:`traceq.read_progress`).
    """
    container, start = _locate(source)
    size = source.expected_size if isinstance(source, Inflating) else len(source)
    chunk = min(CHUNK_BYTES, max(FIRST_CHUNK_BYTES, size // 8))
    released = _Release(source, keep=start)
    if isinstance(source, Inflating):
        # The passes in flight reach about two passes past the last release (see the loop).
        source.keep_ahead(KEEP_AHEAD_PASSES * chunk + _MORE_BYTES)
    try:
        events, at, closed, open_end, cut = _passes(source, start, chunk, compact, released, reading, size)
    finally:
        if isinstance(source, Inflating):
            source.keep_ahead(None)
    trim()
    buf = _all_inflated(source) if isinstance(source, Inflating) else source
    if open_end and container == "object":
        raise FastPathDeclined("the event array is cut off before its closing bracket")
    if container == "array" and closed and _NOT_BLANK.search(buf, at + 1):
        raise FastPathDeclined("bytes after the closing bracket of the array")
    top = _top_level_keys(buf, start, at) if container == "object" else {}
    warnings = (UNCLOSED_ARRAY_WARNING,) if open_end else ()
    squeezed = source.squeeze_warnings() if isinstance(source, Inflating) else ()
    return ParsedTrace(events, top, container, "fast", 0, warnings + cut_warnings(cut) + squeezed)


def _all_inflated(source: Inflating) -> memoryview | bytearray | mmap.mmap:
    """The inflated bytes once the passes are done: without a copy, unless the stream was longer
    than its trailer said (then its end, after the event array, is in a part kept aside)."""
    try:
        return source.inflated()
    except InflatedPastHint:
        return source.whole()


def _passes(
    source: Raw | Inflating,
    start: int,
    chunk: int,
    compact: Compact,
    released: _Release,
    reading: FileReading | None,
    size: int,
) -> tuple[pl.DataFrame, int, bool, bool, int]:
    """The scanner's passes over the event array from ``start`` (its ``[``), each compacted: the
    events, where the last pass stopped, whether the array closed or ended open, and how many
    text values were cut."""
    frames: list[pl.DataFrame] = []
    index = cut = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceq-scan") as pool:
        first_limit = start + 1 + min(FIRST_CHUNK_BYTES, chunk)
        pending = pool.submit(_scan_pass, source, start + 1, first_limit, first=True, hint=0)
        while True:
            scanned = pending.result()
            at, closed, open_end = scanned.consumed, scanned.status == CLOSED, scanned.status == OPEN_END
            if not (closed or open_end):
                # Size the next pass's columns by the events per byte seen so far, with a margin.
                hint = (index + scanned.events) * chunk // max(at - start, 1) * 9 // 8 + 1024
                pending = pool.submit(_scan_pass, source, at, at + chunk, first=False, hint=hint)
            block = to_block(_bytes_to(source, at), scanned, spec=_SPEC, first_index=index)
            del scanned
            index += block.events
            cut += block.cut
            frames.append(compact(block.frame))
            del block
            released.up_to(at)
            if reading is not None:
                reading.to_share(at / max(size, 1))
            if closed or open_end:
                break
    return (pl.concat(frames) if len(frames) > 1 else frames[0]), at, closed, open_end, cut


_HEAD_BYTES: Final = 1 << 20
"""Inflated bytes looked at for the start of the event array before waiting for the whole file."""
_MORE_BYTES: Final = 4 << 20
"""How much more inflated data a pass that ran into the end of what had arrived waits for."""


def _locate(source: Raw | Inflating) -> tuple[Container, int]:
    """:func:`locate_event_array`; in a file still inflating, in a head that doubles until the
    array is found or the file has ended (the keys before it can be long: they are not copied whole)."""
    if not isinstance(source, Inflating):
        return locate_event_array(source)
    want = _HEAD_BYTES
    while True:
        head = source.available(want)
        try:
            return locate_event_array(head)
        except FastPathDeclined:
            if source.complete(len(head)):
                raise
        want = 2 * max(want, len(head))


_BOM: Final = b"\xef\xbb\xbf"
_KEY_TAIL: Final = re.compile(rb"\s*:\s*\[")
_TRACE_EVENTS_KEY: Final = re.compile(rb'"traceEvents"')
_NOT_WHITESPACE: Final = re.compile(rb"[^ \t\r\n]")
_NOT_BLANK: Final = re.compile(rb"[^ \t\r\n\x0b\x0c]")
"""What ``bytes.strip`` would not strip, found without copying the bytes (which may be long)."""


def locate_event_array(buf: Raw | memoryview) -> tuple[Container, int]:
    """The container form and the offset of the ``[`` that opens the event array."""
    found = _NOT_WHITESPACE.search(buf, len(_BOM) if buf[: len(_BOM)] == _BOM else 0)
    if found is None:
        raise FastPathDeclined("the file holds only whitespace")
    first = found.start()
    if buf[first] == ord("["):
        return "array", first
    if buf[first] != ord("{"):
        raise FastPathDeclined("the file is neither a JSON object nor a JSON array")
    key = _TRACE_EVENTS_KEY.search(buf, first)
    while key is not None:
        tail = _KEY_TAIL.match(buf, key.end())
        if tail:
            return "object", tail.end() - 1
        key = _TRACE_EVENTS_KEY.search(buf, key.start() + 1)
    raise FastPathDeclined("no traceEvents array")


def _bytes_to(source: Raw | Inflating, offset: int) -> Raw | memoryview:
    return source.available(offset) if isinstance(source, Inflating) else source


def _scan_pass(source: Raw | Inflating, at: int, limit: int, *, first: bool, hint: int) -> Scanned:
    """One scanner pass; on a file still inflating, over the bytes there so far, waiting for more
    when the pass runs into their end (a pass stops only after an event that ends past ``limit``)."""
    if not isinstance(source, Inflating):
        return scan(source, at, limit, first=first, spec=_SPEC, rows_hint=hint)
    want = limit + _MORE_BYTES
    while True:
        view = source.available(want)
        try:
            scanned = scan(view, at, limit, first=first, spec=_SPEC, rows_hint=hint)
        except FastPathDeclined as declined:
            if not declined.reason.startswith(CUT_OFF) or source.complete(len(view)):
                raise
        else:
            if scanned.status != OPEN_END or source.complete(len(view)):
                return scanned
        # Twice as far each time: an event far longer than a pass costs a few passes, not one per step.
        want = max(len(view) + _MORE_BYTES, at + 2 * (len(view) - at))


class _Release:
    """Gives back the pages of the file's bytes once their events are compacted: a memory-mapped
    file's (they stay in the page cache, but leave this process's resident memory) and a gzip
    file's inflated ones (:meth:`Inflating.release`).  The bytes before ``keep`` (the top-level
    keys ahead of the event array) are kept; other buffers are left alone.  Safe because compacted
    columns hold no string views into the file (``COMPACT_SCHEMA`` has no text column; a test
    checks it): released inflated pages read as zeros."""

    def __init__(self, buf: Raw | Inflating, keep: int):
        self._buf = buf if isinstance(buf, mmap.mmap | Inflating) else None
        self._done = keep - keep % mmap.PAGESIZE + mmap.PAGESIZE

    def up_to(self, offset: int) -> None:
        if self._buf is None:
            return
        end = offset - offset % mmap.PAGESIZE
        if end > self._done:
            if isinstance(self._buf, Inflating):
                self._buf.release(self._done, end)
            else:
                self._buf.madvise(mmap.MADV_DONTNEED, self._done, end - self._done)
            self._done = end


def _top_level_keys(buf: Raw | memoryview, start: int, stop: int) -> dict[str, Any]:
    """The object's other keys: parse the bytes around the event array with the array emptied."""
    shell = bytes(buf[:start]) + b"[]" + bytes(buf[stop + 1 :])
    try:
        doc = decoder(strict=True).decode(shell.decode("utf-8").removeprefix("\ufeff"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FastPathDeclined(f"the keys around traceEvents are not strict JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("traceEvents") != []:
        raise FastPathDeclined("traceEvents is not the top-level event array")
    del doc["traceEvents"]
    return doc
