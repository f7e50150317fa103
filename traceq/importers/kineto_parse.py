"""From bytes to events: the *raw event frame*, one row per trace event, the fields traceq reads.

Two parsers produce the same raw frame (:data:`RAW_SCHEMA`; ``idx`` is the event's position in the
array) and hand it, a block at a time, to a ``compact`` callback (the importer's per-event
normalisation), so that the bulky raw columns never exist for the whole file at once:

* :func:`parse_fast` -- the columnar path: :mod:`traceq.importers.kineto_tokens` finds, with numpy
  and a chunk of the event array at a time, where each event's fields are, and
  :mod:`traceq.importers.kineto_columns` hands their text to polars as Arrow string views over the
  file's own bytes, so no Python object is built per event.  Anything the tokenizer cannot vouch
  for makes the fast path decline rather than guess.
* :func:`~traceq.importers.kineto_lenient.parse_lenient` -- Python's ``json`` after a repair pass,
  used only when the fast path declines; same raw frame (see that module).

``ts``/``dur`` are read as IEEE doubles, as every Chrome-trace viewer does.  Fields that mix types
in real files (``pid``, ``tid``, ``id``, ``device``, ``stream``: ints, ``"stream 7"``, ``"Spans"``,
``"0x0"``; ``grid``: ``[x, y, z]`` or Inductor's ``"grid(100,)"``) are read as strings and
interpreted by the callback.  Text fields with few distinct values are made ``Categorical`` at once
(4 bytes a row instead of a 16-byte string view).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from traceq.importers.kineto_bits import Raw
from traceq.importers.kineto_columns import raw_block
from traceq.importers.kineto_scan import Container, locate_event_array
from traceq.importers.kineto_tokens import FastPathDeclined, KeyTable, tokenize

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

CHUNK_BYTES: Final = 4 << 20
"""Bytes of the event array tokenized at a time (doubled while no event ends inside a chunk)."""
_KEYS: Final = KeyTable(list(dict.fromkeys([*TOP_FIELDS, "args", *ARG_FIELDS])))
_TOP_KEYS: Final = frozenset([*TOP_FIELDS, "args"])
_ARG_KEYS: Final = frozenset(ARG_FIELDS)


def parse_fast(buf: Raw, compact: Compact) -> ParsedTrace:
    """Parse with the columnar path; raises :class:`FastPathDeclined` for anything it cannot vouch for.

    ``buf`` is only read.
    """
    container, start = locate_event_array(buf)
    data = np.frombuffer(buf, dtype=np.uint8)
    frames: list[pl.DataFrame] = []
    at, size, first, index = start + 1, CHUNK_BYTES, True, 0
    while True:
        chunk = tokenize(buf, data, at, min(at + size, len(buf)), _KEYS, _TOP_KEYS, _ARG_KEYS, first=first)
        if chunk is None:
            size *= 2
            continue
        frames.append(compact(raw_block(buf, data, chunk, RAW_SCHEMA, index)))
        index += chunk.events
        at, size, first = chunk.consumed, CHUNK_BYTES, False
        if chunk.closed or chunk.open_end:
            break
    if chunk.open_end and container == "object":
        raise FastPathDeclined("the event array is cut off before its closing bracket")
    if container == "array" and chunk.closed and buf[at + 1 :].strip():
        raise FastPathDeclined("bytes after the closing bracket of the array")
    top = _top_level_keys(buf, start, at) if container == "object" else {}
    events = pl.concat(frames) if len(frames) > 1 else frames[0]
    warnings = (UNCLOSED_ARRAY_WARNING,) if chunk.open_end else ()
    return ParsedTrace(events, top, container, "fast", 0, warnings)


def _top_level_keys(buf: Raw, start: int, stop: int) -> dict[str, Any]:
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
