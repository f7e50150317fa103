"""The compiled scanner, seen from Python: a block of the raw event frame from one of its passes.

:mod:`traceq.importers.kineto._scanner` (C, ``_scanner.c``) validates a run of events as strict
JSON and writes, in the same single pass, the Arrow buffers of the fields asked for: float64 and
int64 values with validity bitmaps, and Arrow *string views* for text (short values inline, long
ones pointing into the file's own bytes, escaped strings into a side buffer of unescaped text).
This module turns those buffers into polars columns without a Python object per event; the only
per-value Python work is for numbers read into a text field that are not plain integers (rare),
which are spelled as the lenient path spells them
(:func:`~traceq.importers.kineto.raw_frame.float_text`).  Text columns the raw frame wants
Categorical are dictionary-encoded by the compiled ``encode`` (without the GIL), and polars takes
the Arrow dictionary array at the cost of its distinct values.

Each value is converted as :mod:`traceq.importers.kineto.lenient_parser` converts it -- that
module is the reference both paths must agree with -- or the scanner *declines*
(:class:`FastPathDeclined`, defined here, at the lowest stage of the fast path, and raised by the
fast parser too): not strict JSON, invalid UTF-8, an unpaired surrogate escape, an escape inside a
key, an element of the event array that is not an object, an object or array in a text field.  A
string in a number field (ROCm's HIP rows write ``"bytes": "616"``) is read: a plain decimal integer
by the scanner, anything else by the lenient path's own rule.  A kernel's ``grid``/``block`` is
read by the scanner into three Int32 columns when it is an ``[x, y, z]`` array; strings are left to
:func:`~traceq.importers.kineto.raw_frame.triple_of_text`, which both paths use.  A text value
longer than :data:`~traceq.importers.kineto.raw_frame.MAX_TEXT_BYTES` is cut as
:func:`~traceq.importers.kineto.raw_frame.cut_text` cuts it, and counted (``Scanned.cut``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import polars as pl
import pyarrow as pa

from traceq.importers.arrow_capsule import series_of
from traceq.importers.kineto.raw_frame import (
    NO_TRIPLE,
    Triple,
    float_of_value,
    float_text,
    int_of_value,
    triple_of_text,
)
from traceq.importers.kineto.trace_bytes import Raw

if TYPE_CHECKING:
    from typing_extensions import Buffer

try:
    from traceq.importers.kineto import _scanner
except ImportError:  # a source tree imported without its compiled module (pip install . builds it)
    _scanner = None  # type: ignore[assignment]

_INLINE: Final = 12
"""An Arrow string view holds up to 12 bytes inline."""
CUT_OFF: Final = "the event array is cut off"
"""How the scanner's reason begins when the data ends inside an event (or before the array closes)."""
# The scanner's codes, as _scanner.c numbers them (a test checks they agree).
FLOAT: Final = 0
INT: Final = 1
TEXT: Final = 2
TRIPLE: Final = 3
ARGS: Final = 4
PART: Final = 5
"""Field types: float64, int64, text, the x of an [x, y, z] triple (y and z are PARTs), ``args``."""
TOP: Final = 0
IN_ARGS: Final = 1
"""Where a field's key is: directly in the event, or directly in its first ``args`` object."""
CLOSED: Final = 1
"""A pass's status when it stopped at the array's ``]``."""
OPEN_END: Final = 2
"""A pass's status when the data ended after a complete event, without a ``]``."""
NOT_BUILT: Final = "traceq was installed without its compiled scanner (no C compiler at install time)"
"""The fast path's reason to decline where traceq runs from a source tree without its C module."""


class FastPathDeclined(Exception):
    """The fast path cannot vouch for this file; ``reason`` says why (it lands in meta.warnings)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class FieldSpec:
    """What the scanner is asked to read: one ``(name, key, where, type)`` per raw-frame column."""

    schema: Mapping[str, pl.DataType]
    fields: tuple[tuple[str, bytes, int, int], ...]

    @classmethod
    def of(cls, schema: Mapping[str, pl.DataType], triples: Sequence[str]) -> FieldSpec:
        """``schema``: ``idx``, top-level fields, ``args.<key>`` fields, then ``<key>_x/_y/_z`` for
        each ``args`` key in ``triples``, with their raw dtypes."""
        fields = [("args", b"args", TOP, ARGS)]
        parts = {f"{key}_{axis}": (key, axis) for key in triples for axis in "xyz"}
        for name, dtype in schema.items():
            if name == "idx":
                continue
            if name in parts:
                key, axis = parts[name]
                kind = TRIPLE if axis == "x" else PART
                fields.append((name, key.encode(), IN_ARGS, kind))
                continue
            where, key = (IN_ARGS, name[5:]) if name.startswith("args.") else (TOP, name)
            fields.append((name, key.encode(), where, _kind(dtype)))
        return cls(schema, tuple(fields))


def _kind(dtype: pl.DataType) -> int:
    if dtype == pl.Float64():
        return FLOAT
    if dtype in (pl.String(), pl.Categorical()):
        return TEXT
    return INT


@dataclass(frozen=True)
class Block:
    """One scanner pass: the raw frame of its events and where the pass stopped.

    ``consumed`` is the offset right after the last event, or of the array's ``]`` when ``closed``;
    ``open_end`` when the data ended after a complete event without a ``]``; ``cut`` counts the
    text values cut to ``MAX_TEXT_BYTES``.
    """

    frame: pl.DataFrame
    consumed: int
    events: int
    closed: bool
    open_end: bool
    cut: int = 0


@dataclass(frozen=True)
class Scanned:
    """What one pass of the compiled scanner returned (its buffers, not yet columns)."""

    begin: int
    consumed: int
    events: int
    status: int
    columns: list[tuple[Buffer, Buffer, int] | None]
    """Per field: its values, validity bitmap and null count (None for the ``args`` holder)."""
    side: memoryview
    fixups: memoryview
    cut: int = 0
    """Text values cut to ``MAX_TEXT_BYTES``."""


def scan(buf: Raw | memoryview, begin: int, limit: int, *, first: bool, spec: FieldSpec, rows_hint: int = 0) -> Scanned:
    """One pass of the scanner from ``buf[begin:]`` (right after the ``[``, or after an event) until an
    event ends at or after ``limit``.  Runs without the GIL.  Raises :class:`FastPathDeclined`.

    ``rows_hint`` sizes the pass's columns (more rows grow them); 0 guesses one event per 256 bytes.
    """
    if _scanner is None:
        raise FastPathDeclined(NOT_BUILT)
    out = _scanner.scan(buf, begin, limit, first, spec.fields, rows_hint)
    if isinstance(out, str):
        raise FastPathDeclined(out)
    consumed, n, status, columns, side, fixups, cut = out
    return Scanned(begin, consumed, n, status, columns, memoryview(side), memoryview(fixups), cut)


def trim() -> None:
    """Free the output buffers the scanner keeps for its next pass (once a file is read)."""
    if _scanner is not None:
        _scanner.trim()


def scan_block(buf: Raw, begin: int, limit: int, *, first: bool, spec: FieldSpec, first_index: int) -> Block:
    """:func:`scan` then :func:`to_block`."""
    return to_block(buf, scan(buf, begin, limit, first=first, spec=spec), spec=spec, first_index=first_index)


def to_block(buf: Raw | memoryview, scanned: Scanned, *, spec: FieldSpec, first_index: int) -> Block:
    """The raw frame of a pass's events, numbered from ``first_index``."""
    begin, consumed, n, status = scanned.begin, scanned.consumed, scanned.events, scanned.status
    columns, side, fixups = scanned.columns, scanned.side, scanned.fixups
    data = pa.py_buffer(memoryview(buf)[begin:consumed])
    kinds = [kind for _name, _key, _where, kind in spec.fields]
    extra = _Fixups(buf, fixups, len(side), first_index, kinds)
    side_buffer = _side_buffer(side, extra.blob)
    series: list[pl.Series] = [pl.int_range(first_index, first_index + n, dtype=pl.UInt32, eager=True).alias("idx")]
    numbers = {
        FLOAT: pa.float64(),
        INT: pa.int64(),
        TRIPLE: pa.int32(),
        PART: pa.int32(),
    }
    for position, (name, _key, _where, kind) in enumerate(spec.fields):
        if kind == ARGS:
            continue
        column_buffers = columns[position]
        assert column_buffers is not None
        values, validity, nulls = column_buffers
        dtype = spec.schema[name]
        if kind in numbers:
            # Number columns may outlive the pass (compact passes some through): they get memory of
            # their own size, and the scanner's (sized for a guess of the row count) goes back to
            # its pool for the next pass.
            texts = extra.numbers.get(position)
            if texts:
                array = _with_numbers(numbers[kind], n, values, validity, texts)
            else:
                bitmap = pa.py_buffer(bytes(validity)) if nulls else None
                array = pa.Array.from_buffers(numbers[kind], n, [bitmap, pa.py_buffer(bytes(values))], null_count=nulls)
        else:
            views = extra.apply(position, memoryview(values))
            variadic = [data] + ([side_buffer] if side_buffer is not None else [])
            if dtype == pl.Categorical() and nulls < n:
                array = _dictionary(views, n, validity if nulls else None, nulls, variadic)
            else:
                buffers = [pa.py_buffer(validity) if nulls else None, pa.py_buffer(views), *variadic]
                array = pa.Array.from_buffers(pa.string_view(), n, buffers, null_count=nulls)
        column = series_of(name, array)
        series.append(column if column.dtype == dtype else column.cast(dtype))
    frame = pl.DataFrame(series)
    if extra.triples:
        frame = frame.update(extra.triple_frame(spec), on="idx")
    return Block(frame, consumed, n, status == CLOSED, status == OPEN_END, scanned.cut)


def _with_numbers(
    dtype: pa.DataType, n: int, values: Buffer, validity: Buffer, texts: list[tuple[int, float | int | None]]
) -> pa.Array:
    """A number column with the values the scanner left to Python (strings in a number field)
    written in: each ``(row, value)`` sets the row, or leaves it null where the value is None."""
    numpy_type = np.dtype(np.float64) if dtype == pa.float64() else np.dtype(np.int64)
    array = np.frombuffer(memoryview(values), dtype=numpy_type, count=n).copy()
    bits = np.frombuffer(memoryview(validity), dtype=np.uint8)
    valid = np.unpackbits(bits, count=n, bitorder="little").astype(bool)
    for row, value in texts:
        if value is not None:
            array[row] = value
            valid[row] = True
    return pa.array(array, type=dtype, mask=~valid)


def _dictionary(views: Buffer, n: int, validity: Buffer | None, nulls: int, variadic: list[pa.Buffer]) -> pa.Array:
    """A text column as an Arrow dictionary array (int32 codes into its distinct values, found by
    the compiled ``encode``), which polars takes as a Categorical at the cost of the distinct
    strings: casting the string views instead hashes every row's whole text in polars."""
    assert _scanner is not None
    first, second = (*variadic, b"", b"")[:2]
    codes, distinct_views, count = _scanner.encode(views, n, validity, first, second)
    dictionary = pa.Array.from_buffers(pa.string_view(), count, [None, pa.py_buffer(distinct_views), *variadic])
    bitmap = pa.py_buffer(validity) if validity is not None else None
    indices = pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(codes)], null_count=nulls)
    return pa.DictionaryArray.from_arrays(indices, dictionary, safe=False)


def _side_buffer(side: memoryview, blob: bytes) -> pa.Buffer | None:
    if not blob:
        return pa.py_buffer(side) if len(side) else None
    return pa.py_buffer(bytes(side) + blob)


class _Fixups:
    """What the scanner leaves to Python: numbers read into text fields that are not plain integers
    (spelled by :func:`float_text`, appended after the scanner's side buffer -- data buffer 1 -- with
    their views patched in), strings in a triple field (read by :func:`triple_of_text`), and strings
    in a number field other than plain decimal integers (read by :func:`int_of_value` /
    :func:`float_of_value`, as the lenient path reads them)."""

    def __init__(
        self, buf: Raw | memoryview, records: memoryview, side_size: int, first_index: int, kinds: Sequence[int]
    ):
        self.by_field: dict[int, list[tuple[int, int, bytes]]] = {}
        """Per text field: (row, offset in data buffer 1, text) of its fixed-up numbers."""
        self.triples: dict[int, dict[int, Triple]] = {}
        self.numbers: dict[int, list[tuple[int, float | int | None]]] = {}
        """Per number field: (row, value) of its strings, read as the lenient path reads them."""
        texts: list[bytes] = []
        at = side_size
        table = np.frombuffer(records, dtype=np.int64).reshape(-1, 4)
        for row, field, start, end in table.tolist():
            if kinds[field] == TRIPLE:
                text = json.loads(bytes(buf[start:end]))
                self.triples.setdefault(field, {})[first_index + row] = triple_of_text(text)
                continue
            if kinds[field] in (INT, FLOAT):
                read = int_of_value if kinds[field] == INT else float_of_value
                self.numbers.setdefault(field, []).append((row, read(json.loads(bytes(buf[start:end])))))
                continue
            number = bytes(buf[start:end]).decode()
            text = (float_text(json.loads(number)) if number != "-0" else "0").encode()
            self.by_field.setdefault(field, []).append((row, at, text))
            texts.append(text)
            at += len(text)
        self.blob = b"".join(texts)

    def triple_frame(self, spec: FieldSpec) -> pl.DataFrame:
        """``idx`` and the triple columns of the rows whose triple was a string (others left null,
        so that ``DataFrame.update`` keeps the scanner's values there)."""
        rows = sorted({row for by_row in self.triples.values() for row in by_row})
        columns: dict[str, list[int | None]] = {}
        for field, by_row in self.triples.items():
            for axis in range(3):
                columns[spec.fields[field + axis][0]] = [by_row.get(row, NO_TRIPLE)[axis] for row in rows]
        schema = {"idx": pl.UInt32(), **{name: pl.Int32() for name in columns}}
        return pl.DataFrame({"idx": rows, **columns}, schema=schema)

    def apply(self, field: int, views: memoryview) -> memoryview | bytes:
        """``views`` with this field's fixed-up rows pointing at their text."""
        rows = self.by_field.get(field)
        if not rows:
            return views
        patched = bytearray(views)
        for row, offset, text in rows:
            view = len(text).to_bytes(4, "little")
            if len(text) <= _INLINE:
                view += text.ljust(_INLINE, b"\0")
            else:
                view += text[:4] + (1).to_bytes(4, "little") + offset.to_bytes(4, "little")
            patched[row * 16 : row * 16 + 16] = view
        return bytes(patched)


__all__ = [
    "CLOSED",
    "CUT_OFF",
    "NOT_BUILT",
    "OPEN_END",
    "Block",
    "FastPathDeclined",
    "FieldSpec",
    "Scanned",
    "scan",
    "scan_block",
    "to_block",
    "trim",
]
