"""The fast path's columns: a block of the raw event frame from one tokenized chunk.

:func:`raw_block` turns the value positions found by :mod:`traceq.importers.kineto_tokens` into
the columns of ``kineto_parse.RAW_SCHEMA`` without a Python object per event:

* text columns are Arrow *string views* over the file's own bytes (16 bytes a value, short values
  inline), handed to polars as they are; only strings holding a backslash escape, and numbers that
  a text field spells differently from their JSON text, are decoded in Python (one at a time, but
  there are few), into a second buffer;
* number columns are the same views of the number texts, cast by polars (correctly rounded, like
  Python's ``float``); their JSON grammar (no leading zero, a digit last) is checked here.

Each value is converted as :mod:`traceq.importers.kineto_lenient` converts it -- that module is the
reference both paths must agree with -- or the chunk is declined: a string where a number is
expected, an object or array in a text field (other than ``grid``/``block``), a number that is not
JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal

import numpy as np
import polars as pl
import pyarrow as pa

from traceq.importers.kineto_bits import Bytes, Ints, Mask, Raw, Words, load8
from traceq.importers.kineto_tokens import Chunk, FastPathDeclined, Values

_TRIPLE_FIELDS = frozenset({"args.grid", "args.block"})
"""Text fields that may hold an ``[x, y, z]`` array: their JSON text is kept for ``compact``."""

_LOW32 = np.uint64(0xFFFF_FFFF)
_INLINE = 12
"""A string view holds up to 12 bytes inline."""


def float_text(value: float) -> str:
    """Shortest round-trip decimal without exponent or trailing ``.0`` (how polars spells a float as text,
    and so how both parsers spell a number read into a text field)."""
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def raw_block(raw: Raw, data: Bytes, chunk: Chunk, schema: Mapping[str, pl.DataType], first_index: int) -> pl.DataFrame:
    """The raw frame (``schema``: ``idx`` then the fields) of ``chunk``'s events, numbered from ``first_index``."""
    seg = data[chunk.begin : chunk.consumed]
    buffer = pa.py_buffer(memoryview(raw)[chunk.begin : chunk.consumed])
    n = chunk.events
    columns: list[pl.Series] = [pl.Series("idx", np.arange(first_index, first_index + n, dtype=np.uint32))]
    for name, dtype in schema.items():
        if name == "idx":
            continue
        values = chunk.fields[name]
        if dtype in (pl.String(), pl.Categorical()):
            column = _text(name, seg, buffer, values, n)
            columns.append(column.cast(dtype) if dtype == pl.Categorical() else column)
        elif dtype == pl.Float64():
            columns.append(_floats(name, seg, buffer, values, n))
        else:
            columns.append(_ints(name, seg, buffer, values, n).cast(dtype))
    return pl.DataFrame(columns)


def _text(name: str, seg: Bytes, buffer: pa.Buffer, values: Values, n: int) -> pl.Series:
    kind, start, end = values.kind, values.start.copy(), values.end.copy()
    valid = np.ones(kind.size, dtype=np.bool_)
    side: list[bytes] = []
    side_rows: list[int] = []
    is_string = kind == ord('"')
    start[is_string] += 1
    end[is_string] -= 1
    for row in np.flatnonzero(values.escaped):
        side_rows.append(int(row))
        side.append(json.loads(seg[values.start[row] : values.end[row]].tobytes()).encode())
    number = _is_number(kind)
    if np.any(number):
        _check_numbers(seg, start[number], end[number])
        rows = np.flatnonzero(number)
        # Integers keep their text (as Python's str(int) spells it); others are spelled as floats.
        for row in rows[_not_plain_integer(seg, start[rows], end[rows])]:
            text = seg[start[row] : end[row]].tobytes().decode()
            side_rows.append(int(row))
            side.append(float_text(float(text)).encode() if text != "-0" else b"0")
    valid[kind == ord("n")] = False
    containers = (kind == ord("{")) | (kind == ord("["))
    if np.any(containers):
        if name not in _TRIPLE_FIELDS:
            raise FastPathDeclined(f"an object or array where {name} should be text")
        valid[kind == ord("{")] = False
    return _string_view(name, seg, buffer, values.event, start, end - start, valid, side_rows, side, n)


def _floats(name: str, seg: Bytes, buffer: pa.Buffer, values: Values, n: int) -> pl.Series:
    text = _number_text(name, seg, buffer, values, n)
    parsed = text.cast(pl.Float64, strict=False)
    if parsed.null_count() != text.null_count():
        raise FastPathDeclined(f"a number in {name} that is not JSON")
    return parsed


def _ints(name: str, seg: Bytes, buffer: pa.Buffer, values: Values, n: int) -> pl.Series:
    text = _number_text(name, seg, buffer, values, n)
    parsed = text.cast(pl.Int64, strict=False)
    if parsed.null_count() == text.null_count():
        return parsed
    # Not an int64 text: a float (integral ones are read as ints, like the lenient path) or out of range.
    as_float = text.cast(pl.Float64, strict=False)
    if as_float.null_count() != text.null_count():
        raise FastPathDeclined(f"a number in {name} that is not JSON")
    integral = as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2.0**63)
    from_float = pl.select(pl.when(integral).then(as_float).cast(pl.Int64, strict=False)).to_series()
    return parsed.fill_null(from_float).alias(name)


def _number_text(name: str, seg: Bytes, buffer: pa.Buffer, values: Values, n: int) -> pl.Series:
    kind, start, end = values.kind, values.start, values.end
    number = _is_number(kind)
    literal = (kind == ord("t")) | (kind == ord("f")) | (kind == ord("n"))
    if not np.all(number | literal):
        raise FastPathDeclined(f"a value of {name} that is not a number")
    _check_numbers(seg, start[number], end[number])
    return _string_view(name, seg, buffer, values.event, start, end - start, number, [], [], n)


def _is_number(kind: Bytes) -> Mask:
    number: Mask = ((kind >= ord("0")) & (kind <= ord("9"))) | (kind == ord("-"))
    return number


def _check_numbers(seg: Bytes, start: Ints, end: Ints) -> None:
    """JSON's number grammar where polars is laxer: no leading zero, a digit after '-' and last."""
    if not start.size:
        return
    last = seg[end - 1]
    head = load8(seg, start)
    first = (head & np.uint64(0xFF)).astype(np.uint8)
    digit_at = np.where(first == ord("-"), 1, 0)
    lead = ((head >> (digit_at * 8).astype(np.uint64)) & np.uint64(0xFF)).astype(np.uint8)
    after = ((head >> ((digit_at + 1) * 8).astype(np.uint64)) & np.uint64(0xFF)).astype(np.uint8)
    long_enough = end - start > digit_at + 1
    bad = (last < ord("0")) | (last > ord("9"))
    bad |= (lead < ord("0")) | (lead > ord("9"))
    bad |= (lead == ord("0")) & long_enough & (after >= ord("0")) & (after <= ord("9"))
    if np.any(bad):
        raise FastPathDeclined("a number that is not JSON")


def _not_plain_integer(seg: Bytes, start: Ints, end: Ints) -> Mask:
    """Numbers written with a fraction or exponent, and ``-0`` (their text is not Python's ``str``)."""
    out = np.zeros(start.size, dtype=np.bool_)
    width = int((end - start).max()) if start.size else 0
    for offset in range(width):
        inside = end - start > offset
        byte = seg[np.where(inside, start + offset, 0)]
        out |= inside & ((byte == ord(".")) | ((byte | 0x20) == ord("e")))
    minus_zero = (end - start == 2) & (seg[start] == ord("-")) & (seg[np.minimum(start + 1, seg.size - 1)] == ord("0"))
    plain: Mask = out | minus_zero
    return plain


def _string_view(
    name: str,
    seg: Bytes,
    buffer: pa.Buffer,
    event: Ints,
    start: Ints,
    length: Ints,
    valid: Mask,
    side_rows: list[int],
    side: list[bytes],
    n: int,
) -> pl.Series:
    """A String series of ``n`` rows: row ``event[i]`` is ``seg[start[i]:start[i]+length[i]]`` where
    ``valid[i]``, else null; rows ``side_rows`` take their text from ``side`` instead."""
    views = np.zeros((n, 2), dtype=np.uint64)
    views[event] = _views_for(seg, start, length, buffer_index=0)
    present = np.zeros(n, dtype=np.bool_)
    present[event[valid]] = True
    buffers = [buffer]
    if side:
        blob = b"".join(side)
        offsets = np.cumsum([0, *(len(s) for s in side)])
        rows = event[np.array(side_rows, dtype=np.int64)]
        side_seg = np.frombuffer(blob + b"\0" * 16, dtype=np.uint8)
        sub = _views_for(side_seg, offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64), buffer_index=1)
        views[rows] = sub
        present[rows] = True
        buffers.append(pa.py_buffer(blob))
    nulls = int(n - np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    array = pa.Array.from_buffers(pa.string_view(), n, [validity, pa.py_buffer(views), *buffers], null_count=nulls)
    series = pl.from_arrow(array)
    assert isinstance(series, pl.Series)
    return series.alias(name)


def _views_for(seg: Bytes, start: Ints, length: Ints, buffer_index: int) -> Words:
    """Arrow string views (two words each) of ``seg[start:start+length]`` in data buffer ``buffer_index``."""
    head = load8(seg, start)
    low_bytes = np.minimum(length, 8).astype(np.uint64) * np.uint64(8)
    head = np.where(low_bytes >= 64, head, head & ((np.uint64(1) << (low_bytes & np.uint64(63))) - np.uint64(1)))
    # Bytes 8-11 are inline only for values of 9 to 12 bytes; longer ones keep just a 4-byte prefix.
    tail = np.zeros(start.size, dtype=np.uint64)
    middle = np.flatnonzero((length > 8) & (length <= _INLINE))
    if middle.size:
        high_bytes = (length[middle] - 8).astype(np.uint64) * np.uint64(8)
        tail[middle] = load8(seg, start[middle] + 8) & ((np.uint64(1) << high_bytes) - np.uint64(1))
    out = np.empty((start.size, 2), dtype=np.uint64)
    out[:, 0] = length.astype(np.uint64) | (head << np.uint64(32))
    out[:, 1] = np.where(
        length <= _INLINE,
        (head >> np.uint64(32)) | (tail << np.uint64(32)),
        np.uint64(buffer_index) | (start.astype(np.uint64) << np.uint64(32)),
    )
    return out
