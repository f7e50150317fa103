"""The raw event frame: what the two Kineto parsers produce, and the conventions they share.

Both parsers -- :mod:`~traceq.importers.kineto.fast_parser` (the columnar path over the compiled
scanner) and :mod:`~traceq.importers.kineto.lenient_parser` (Python's ``json`` after repairs) --
build the same frame, :data:`RAW_SCHEMA`, one row per trace event, and hand it a block at a time to
a :data:`Compact` callback; they return a :class:`ParsedTrace`.  What must be the same on both paths
lives here so that neither parser imports the other: the fields read and their raw types, how a
number read into a text field is spelled (:func:`float_text`), what a string or other value read into
a number field is (:func:`float_of_value`, :func:`int_of_value`), what counts as a kernel's
``[x, y, z]`` (:func:`triple_of_text`, :func:`triple_of_list`), and the JSON decoder used for what
polars does not read (:func:`decoder`: top-level keys, the fallback).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Literal

import polars as pl

Container = Literal["object", "array"]
"""The file's form: ``{"traceEvents": [...], ...}`` or a bare array of events."""

TOP_FIELDS: Final[dict[str, pl.DataType]] = {
    "ph": pl.Categorical(),
    "cat": pl.Categorical(),
    "name": pl.Categorical(),
    "pid": pl.Categorical(),
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
}
"""``args`` keys read (``name`` is the payload of ``M`` events); raw-frame column ``args.<key>``."""

TRIPLE_FIELDS: Final = ("grid", "block")
"""``args`` keys holding a kernel's ``[x, y, z]``: raw-frame columns ``<key>_x``, ``<key>_y``, ``<key>_z``
(Int32; see :func:`triple_of_text` for what counts as a triple)."""

RAW_SCHEMA: Final = pl.Schema(
    {
        "idx": pl.UInt32(),
        **TOP_FIELDS,
        **{f"args.{k}": dtype for k, dtype in ARG_FIELDS.items()},
        **{f"{k}_{axis}": pl.Int32() for k in TRIPLE_FIELDS for axis in "xyz"},
    }
)
"""The raw event frame: ``idx`` (position in the array), then the fields above."""

Compact = Callable[[pl.DataFrame], pl.DataFrame]
"""Turns a block of the raw frame into the (smaller) frame the parsers return."""

UNCLOSED_ARRAY_WARNING: Final = (
    "the event array has no closing ']' (writer stopped early); every complete event was read"
)

MAX_TEXT_BYTES: Final = 1 << 20
"""The longest text value (UTF-8 bytes) a field keeps; a longer one is cut (:func:`cut_text`).  The
compiled scanner has the same limit (a test checks they agree)."""

_TEXT_COLUMNS: Final = tuple(name for name, dtype in RAW_SCHEMA.items() if dtype in (pl.String(), pl.Categorical()))


def cut_text(text: str) -> str:
    """``text`` cut to at most :data:`MAX_TEXT_BYTES` UTF-8 bytes, before a character that does not fit
    (the compiled scanner cuts at the same byte)."""
    if len(text) <= MAX_TEXT_BYTES // 4:
        return text
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= MAX_TEXT_BYTES:
        return text
    cut = MAX_TEXT_BYTES
    while cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8", errors="surrogatepass")


def cut_long_texts(frame: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The raw frame with text values longer than :data:`MAX_TEXT_BYTES` cut (:func:`cut_text`), and
    how many were cut (the lenient path's counterpart of the scanner's cut)."""
    cut = 0
    columns = {}
    for name in _TEXT_COLUMNS:
        long = frame.get_column(name).cast(pl.String).str.len_bytes() > MAX_TEXT_BYTES
        n = int(long.sum())
        if n:
            cut += n
            values = frame.get_column(name).cast(pl.String)
            columns[name] = pl.Series(
                name, [cut_text(v) if too_long else v for v, too_long in zip(values, long, strict=True)]
            ).cast(frame.schema[name])
    return (frame.with_columns(**columns) if columns else frame), cut


def cut_warnings(texts_cut: int) -> tuple[str, ...]:
    """What the parsers say of the ``texts_cut`` text values they cut to :data:`MAX_TEXT_BYTES`."""
    if not texts_cut:
        return ()
    return (f"{texts_cut} text values longer than {MAX_TEXT_BYTES >> 20} MiB were cut to their first MiB",)


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


def float_text(value: float) -> str:
    """Shortest round-trip decimal without exponent or trailing ``.0`` (how polars spells a float as text,
    and so how both parsers spell a number read into a text field)."""
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


_INT64: Final = range(-(2**63), 2**63)


def float_of_value(value: Any) -> float | None:
    """A decoded JSON value read into a float field: numbers as floats, a string as Python's
    ``float`` reads it (ROCm's HIP rows write some numbers as strings), anything else null."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def int_of_value(value: Any) -> int | None:
    """A decoded JSON value read into an int64 field: integers and integral floats; a string as
    ``int(text.strip(), 0)`` reads it (``"616"``, ``" 616 "``, ``"0x268"``; ROCm's HIP rows write
    ``"bytes": "616"``); null for anything else or outside int64."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None
    elif isinstance(value, str):
        try:
            value = int(value.strip(), 0)
        except ValueError:
            return None
    return value if isinstance(value, int) and value in _INT64 else None


_TRIPLE_TEXT: Final = re.compile(r"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]", re.ASCII)
_INT32: Final = range(-(2**31), 2**31)
Triple = tuple[int | None, int | None, int | None]
NO_TRIPLE: Final[Triple] = (None, None, None)


def triple_of_text(text: str) -> Triple:
    """``"[x, y, z]"`` (ASCII digits, any whitespace around them) as Int32 components; a component
    outside Int32 is None, and text of any other form gives no triple."""
    match = _TRIPLE_TEXT.fullmatch(text)
    if not match:
        return NO_TRIPLE
    x, y, z = (int(group) if int(group) in _INT32 else None for group in match.groups())
    return x, y, z


def triple_of_list(value: list[object]) -> Triple:
    """A JSON array ``[x, y, z]`` of three integers (not booleans, not floats), as the scanner reads it."""
    if len(value) != 3 or any(type(v) is not int for v in value):
        return NO_TRIPLE
    x, y, z = (v if isinstance(v, int) and v in _INT32 else None for v in value)
    return x, y, z


def _first_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Duplicate keys: keep the first, as polars' reader does, so both paths agree."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        out.setdefault(key, value)
    return out


class LongInt(str):
    """An integer literal too long for Python's ``int`` (over 4000 digits), kept as its text: read into
    a text field it is that text (as the scanner keeps a plain integer's JSON text), into a number
    field it is what ``float`` makes of it."""


def _int(text: str) -> int | LongInt:
    return int(text) if len(text) <= 4000 else LongInt(text)


def decoder(*, strict: bool) -> json.JSONDecoder:
    """The JSON decoder both paths use for what is not read by polars (top-level keys, fallback)."""
    # NaN/Infinity are not JSON (polars refuses them); read them as null, like the repaired N/A.
    return json.JSONDecoder(object_pairs_hook=_first_wins, strict=strict, parse_constant=lambda _: None, parse_int=_int)


__all__ = [
    "ARG_FIELDS",
    "MAX_TEXT_BYTES",
    "NO_TRIPLE",
    "RAW_SCHEMA",
    "TOP_FIELDS",
    "TRIPLE_FIELDS",
    "UNCLOSED_ARRAY_WARNING",
    "Compact",
    "Container",
    "LongInt",
    "ParsedTrace",
    "Triple",
    "cut_long_texts",
    "cut_text",
    "cut_warnings",
    "decoder",
    "float_of_value",
    "float_text",
    "int_of_value",
    "triple_of_list",
    "triple_of_text",
]
