"""From bytes to events: the *raw event frame*, one row per trace event, the fields traceq reads.

Two parsers produce the same raw frame (:data:`RAW_SCHEMA`; ``idx`` is the event's position in the
array) and hand it, a block at a time, to a ``compact`` callback (the importer's per-event
normalisation), so that the bulky raw columns never exist for the whole file at once:

* :func:`parse_fast` -- the columnar path.  :mod:`traceq.importers.kineto_scan` rewrites the event
  array as NDJSON in place, and ``polars.read_ndjson`` reads it block by block with an explicit
  schema that lists only the fields below, so no Python object is built per event.  Blocks are
  taken from the end of the buffer, which is shortened after each, so the file's bytes shrink as
  the frame grows.  polars is strict (a value of the wrong type, an invalid escape, a control
  character, ``NaN``: all errors), and any error makes the fast path decline rather than guess.
* :func:`~traceq.importers.kineto_lenient.parse_lenient` -- Python's ``json`` after a repair pass,
  used only when the fast path declines; same raw frame (see that module).

``ts``/``dur`` are read as IEEE doubles, as every Chrome-trace viewer does.  Fields that mix types
in real files (``pid``, ``tid``, ``id``, ``device``, ``stream``: ints, ``"stream 7"``, ``"Spans"``,
``"0x0"``; ``grid``: ``[x, y, z]`` or Inductor's ``"grid(100,)"``) are read as strings and
interpreted by the callback.  Text fields with few distinct values are read straight into
``Categorical`` (4 bytes a row instead of a 16-byte string view).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from traceq.importers.kineto_scan import (
    Container,
    FastPathDeclined,
    locate_event_array,
    rewrite_as_ndjson,
)

TOP_FIELDS: Final[dict[str, pl.DataType]] = {
    "ph": pl.Categorical(),
    "cat": pl.Categorical(),
    "name": pl.Categorical(),
    "pid": pl.String(),
    "tid": pl.String(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "id": pl.String(),
    "bp": pl.Categorical(),
}
"""Event fields read, and their types in the raw frame (``s``, the instant scope, is not used)."""

ARG_FIELDS: Final[dict[str, pl.DataType]] = {
    "correlation": pl.Int64(),
    "External id": pl.Int64(),
    "external id": pl.Int64(),
    "device": pl.String(),
    "stream": pl.String(),
    "context": pl.Int64(),
    "bytes": pl.Int64(),
    "registers per thread": pl.Int64(),
    "shared memory": pl.Int64(),
    "graph id": pl.Int64(),
    "Collective name": pl.Categorical(),
    "name": pl.Categorical(),
    "grid": pl.String(),
    "block": pl.String(),
}
"""``args`` keys read (``name`` is the payload of ``M`` events); raw-frame column ``args.<key>``."""

_READ_SCHEMA: Final = pl.Schema({**TOP_FIELDS, "args": pl.Struct(ARG_FIELDS)})
RAW_SCHEMA: Final = pl.Schema(
    {"idx": pl.UInt32(), **TOP_FIELDS, **{f"args.{k}": dtype for k, dtype in ARG_FIELDS.items()}}
)
"""The raw event frame: ``idx`` (position in the array), then the fields above."""

Compact = Callable[[pl.DataFrame], pl.DataFrame]
"""Turns a block of the raw frame into the (smaller) frame the parsers return."""

UNCLOSED_ARRAY_WARNING: Final = (
    "the event array has no closing ']' (writer stopped early); every complete event was read"
)


@dataclass(frozen=True)
class ParsedTrace:
    """The compacted events and what surrounds them.

    ``top`` holds the top-level keys other than ``traceEvents`` (empty for the array form);
    ``non_objects`` counts array elements that are not JSON objects (lenient path only; they are
    reported as skipped); ``parser`` is ``"fast"`` or ``"lenient"``.
    """

    events: pl.DataFrame
    top: dict[str, Any]
    container: Container
    parser: str
    non_objects: int = 0
    warnings: tuple[str, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------------------------
# Fast path


def parse_fast(buf: bytearray, compact: Compact) -> ParsedTrace:
    """Parse with the columnar path; raises :class:`FastPathDeclined` for anything it cannot vouch for.

    ``buf`` is rewritten and shortened in place, and is useless afterwards (the lenient path
    re-reads the file).
    """
    container, start = locate_event_array(buf)
    array = rewrite_as_ndjson(buf, container, start)
    top = _top_level_keys(buf, array.start, array.stop) if container == "object" else {}
    del buf[array.stop :]
    frames: list[pl.DataFrame] = []
    for block in reversed(array.blocks):
        with memoryview(buf) as view:
            data = bytes(view[block.begin : block.end])
        # The block is copied out, so its bytes can go: the buffer shrinks as the frame grows.
        del buf[block.begin :]
        try:
            raw = pl.read_ndjson(data, schema=_READ_SCHEMA)
        except pl.exceptions.PolarsError as exc:
            first_line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            raise FastPathDeclined(f"polars rejected an event ({first_line})") from exc
        del data
        if raw.height != block.events:
            raise FastPathDeclined(f"polars read {raw.height} events where the scanner found {block.events}")
        flat = raw.unnest("args", separator=".").with_row_index("idx", offset=block.first)
        frames.append(compact(flat.select(RAW_SCHEMA.names())))
    frames.reverse()
    events = pl.concat(frames) if frames else compact(pl.DataFrame(schema=RAW_SCHEMA))
    warnings: tuple[str, ...] = ()
    if array.open_end:
        warnings = (UNCLOSED_ARRAY_WARNING,)
    return ParsedTrace(events, top, container, "fast", 0, warnings)


def _top_level_keys(buf: bytearray, start: int, stop: int) -> dict[str, Any]:
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


def _first_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Duplicate keys: keep the first, as polars' reader does, so both paths agree."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        out.setdefault(key, value)
    return out


def decoder(*, strict: bool) -> json.JSONDecoder:
    """The JSON decoder both paths use for what is not read by polars (top-level keys, fallback)."""
    # NaN/Infinity are not JSON (polars refuses them); read them as null, like the repaired N/A.
    return json.JSONDecoder(object_pairs_hook=_first_wins, strict=strict, parse_constant=lambda _: None)
