"""The fast path's tokenizer: where each event's fields are, found with numpy, a chunk at a time.

:func:`tokenize` reads the bytes of the event array from an event boundary and returns, for each
field it is asked for, the first value of that field in each complete event: where the value's
text starts and ends and what it is (its first byte).  No Python object is made per event or per
value; a chunk costs a few dozen numpy passes over its bytes plus work on the positions of its
strings (see :mod:`traceq.importers.kineto_bits` for the bit masks).

What is checked, because the values read depend on it (anything else makes the fast path
*decline*, see :class:`FastPathDeclined`):

* strings: quotes, backslash escapes (only ``\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX``, surrogate
  escapes in high+low pairs), no raw control character or line break inside a string, no escape
  inside a key, valid UTF-8;
* structure: bracket depth; every element of the array is an object; between two events exactly
  one comma; nothing but whitespace around; the array closes with ``]`` (or, for the array form
  only, the file ends after a complete event);
* outside strings, no control character other than tab/CR/LF and no bare word other than
  ``true``/``false``/``null`` (which catches ``NaN``, ``Infinity``, ``N/A``, ``undefined``);
* each value read starts as a JSON value of a kind its field can take (see ``kineto_columns``).

A key is a string followed by ``:``; the fields of an event are its keys at depth 2, the ``args``
fields the keys directly inside the first ``args`` object of the event (duplicates: first wins).
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from traceq.importers.kineto_bits import (
    Bytes,
    Ints,
    Mask,
    Ranker,
    Raw,
    Words,
    inside_strings,
    load8,
    next_set,
    positions,
    previous_set,
    skip_whitespace,
    words,
)

_QUOTE: Final = 0x22
_BACKSLASH: Final = 0x5C
_COLON: Final = 0x3A
_COMMA: Final = 0x2C
_OPEN_OBJECT: Final = 0x7B
_CLOSE_ARRAY: Final = 0x5D
_ESCAPABLE: Final = np.frombuffer(b'"\\/bfnrtu', dtype=np.uint8)
_HEX: Final = np.frombuffer(b"0123456789abcdefABCDEF", dtype=np.uint8)
_LITERALS: Final = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
_ALL_ONES: Final = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
PIECE_BYTES: Final = 1 << 18
"""Byte masks are computed this many bytes at a time, so that their passes stay in cache."""


class FastPathDeclined(Exception):
    """The fast path cannot vouch for this file; ``reason`` says why (it lands in meta.warnings)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class KeyTable:
    """Names to look for, matched on their length and bytes (escaped keys are declined earlier)."""

    def __init__(self, names: Sequence[str]):
        encoded = [name.encode() for name in names]
        sigs = [int.from_bytes(name[:8], "little") for name in encoded]
        if len(set(sigs)) != len(sigs):
            raise ValueError("key names must differ in their first 8 bytes")
        order = np.argsort(np.array(sigs, dtype=np.uint64))
        self.names = tuple(names)
        self._sig = np.array(sigs, dtype=np.uint64)[order]
        self._length = np.array([len(name) for name in encoded], dtype=np.int64)[order]
        self._id = order.astype(np.int64)
        self._encoded = encoded
        self._lengths = np.zeros(max(len(name) for name in encoded) + 2, dtype=np.bool_)
        self._lengths[[len(name) for name in encoded]] = True

    def lookup(self, data: Bytes, start: Ints, length: Ints) -> Ints:
        """The index in ``names`` of the key whose text is ``data[start:start+length]``, else -1."""
        found = np.full(start.size, -1, dtype=np.int64)
        maybe = np.flatnonzero(self._lengths[np.minimum(length, self._lengths.size - 1)])
        start, length = start[maybe], length[maybe]
        head = load8(data, start)
        bits = (np.minimum(length, 8) * 8).astype(np.uint64)
        head &= np.where(bits < 64, (np.uint64(1) << (bits & np.uint64(63))) - np.uint64(1), _ALL_ONES)
        slot = np.minimum(np.searchsorted(self._sig, head), self._sig.size - 1)
        hit = (self._sig[slot] == head) & (self._length[slot] == length)
        found[maybe] = np.where(hit, self._id[slot], -1)
        for index, name in enumerate(self._encoded):
            if len(name) <= 8:
                continue
            candidates = np.flatnonzero(found[maybe] == index)
            for offset in range(8, len(name), 8):
                if not candidates.size:
                    break
                part = name[offset : offset + 8]
                got = load8(data, start[candidates] + offset)
                if len(part) < 8:
                    got &= np.uint64((1 << (8 * len(part))) - 1)
                bad = got != np.uint64(int.from_bytes(part, "little"))
                found[maybe[candidates[bad]]] = -1
                candidates = candidates[~bad]
        return found


@dataclass(frozen=True)
class Values:
    """The first value of one field in each event of a chunk that has the field.

    ``event`` numbers events from 0 in the chunk; ``start``/``end`` are chunk offsets of the value's
    text (a string's quotes included; ``end`` exclusive); ``kind`` is its first byte; ``escaped``
    marks strings holding a backslash escape.
    """

    event: Ints
    start: Ints
    end: Ints
    kind: Bytes
    escaped: Mask


@dataclass(frozen=True)
class Chunk:
    """What :func:`tokenize` found in ``data[begin:consumed]``.

    ``events`` complete events; ``closed`` when the array's ``]`` is at ``consumed``; ``open_end``
    when the data ended after the last event without a ``]``; ``fields`` by name (``args.<key>``
    for the keys of ``args``).
    """

    begin: int
    consumed: int
    events: int
    closed: bool
    open_end: bool
    fields: dict[str, Values]


def tokenize(
    raw: Raw,
    data: Bytes,
    begin: int,
    end: int,
    keys: KeyTable,
    top: frozenset[str],
    args: frozenset[str],
    *,
    first: bool,
) -> Chunk | None:
    """Tokenize ``data[begin:end]``, which starts right after ``[`` (``first``) or after an event.

    Returns None when no event ends before ``end`` (the caller retries with a bigger chunk);
    raises :class:`FastPathDeclined` for anything listed in the module docstring.
    """
    seg = data[begin:end]
    n = seg.size
    slashes = np.flatnonzero(seg == _BACKSLASH) if raw.find(b"\\", begin, end) != -1 else np.zeros(0, np.int64)
    masks = _Masks(seg, slashes)
    inside = inside_strings(masks.quote_bits)
    high = masks.high_bits & ~inside
    marks = positions(high, n)
    byte = seg[marks]
    folded = byte | 0x20
    is_open = folded == _OPEN_OBJECT
    is_close = folded == 0x7D
    depth = 1 + np.cumsum(is_open.astype(np.int32) - is_close, dtype=np.int32)
    bottom = np.flatnonzero(depth <= 0)
    closed = bottom.size > 0
    event_open = is_open & (depth == 2)
    if closed:
        stop = int(bottom[0])
        if byte[stop] != _CLOSE_ARRAY:
            raise FastPathDeclined("the event array closes with '}'")
        consumed, open_end = int(marks[stop]), False
        event_open[stop:] = False
    else:
        ends = np.flatnonzero(is_close & (depth == 1))
        if end < data.size:
            if not ends.size:
                return None
            consumed, open_end = int(marks[ends[-1]]) + 1, False
        else:
            if (int(depth[-1]) if depth.size else 1) != 1 or masks.quotes.size % 2:
                raise FastPathDeclined("the event array is cut off before its closing bracket")
            consumed, open_end = n, True
        event_open &= marks < consumed
    if np.any(event_open & (byte != _OPEN_OBJECT)):
        raise FastPathDeclined("an element of the event array is not an object")
    region = _clear_from(np.full(high.size, _ALL_ONES, dtype=np.uint64), consumed)
    _check_bytes(raw, seg, begin, consumed, masks, inside & region, ~inside & region)
    _check_escapes(seg, masks.escapes[masks.escapes < consumed])
    in_region = marks < consumed
    bare = in_region & ~is_open & ~is_close
    _check_words(seg, marks[bare], depth[bare])

    quotes = masks.quotes[masks.quotes < consumed]
    opens, closes = quotes[0::2], quotes[1::2]
    after = np.minimum(closes + 1, n - 1)
    follow = seg[after]
    blank = np.flatnonzero((follow == 0x20) | (follow == 0x0A) | (follow == 0x0D) | (follow == 0x09))
    if blank.size:
        after[blank] = np.minimum(skip_whitespace(seg, after[blank]), n - 1)
        follow[blank] = seg[after[blank]]
    is_key = follow == _COLON
    _check_separators(seg, masks, ~inside & region, int(np.count_nonzero(is_key)))
    escaped = np.zeros(opens.size, dtype=np.bool_)
    if slashes.size:
        owner = np.searchsorted(opens, slashes[slashes < consumed], side="right") - 1
        escaped[owner] = True
        if np.any(is_key[owner]):
            raise FastPathDeclined("a key holds a backslash escape")
    event_opens = marks[event_open]
    events = event_opens.size
    closing = marks[is_close & (depth == 1) & in_region]
    _check_gaps(seg, Ranker(masks.quote_bits), event_opens, closing, consumed, first, closed)

    key = np.flatnonzero(is_key)
    name = keys.lookup(seg, opens[key] + 1, closes[key] - opens[key] - 1)
    wanted = name >= 0
    key, name = key[wanted], name[wanted]
    ranker = Ranker(high)
    before = np.maximum(ranker(opens[key]) - 1, 0)
    key_depth = depth[before]
    event = np.cumsum(event_open)[before] - 1
    start = skip_whitespace(seg, after[key] + 1)
    values = _Values(seg, masks.delimiter_bits | high, marks, byte, opens, closes, escaped)
    names = [k for k in keys.names if k in top] + [f"args.{k}" for k in keys.names if k in args]
    top_field = np.array([names.index(k) if k in top else -1 for k in keys.names], dtype=np.int64)
    field = np.where(key_depth == 2, top_field[name], -1).astype(np.int8)
    if args:
        holder = values.first(np.flatnonzero(field == names.index("args")), event, key, start).values
        container = np.full(max(events, 1), -1, dtype=np.int64)
        is_object = holder.kind == _OPEN_OBJECT
        container[holder.event[is_object]] = ranker(holder.start[is_object])
        last_open = np.maximum.accumulate(np.where(is_open & (depth == 3), np.arange(marks.size), -1))
        own = container[np.maximum(event, 0)]
        in_args = (key_depth == 3) & (own >= 0) & (last_open[before] == own)
        arg_field = np.array([names.index(f"args.{k}") if k in args else -1 for k in keys.names], dtype=np.int64)
        field = np.where(in_args, arg_field[name], field).astype(np.int8)
    chosen = np.flatnonzero(field >= 0)
    order = chosen[np.argsort(field[chosen], kind="stable")]
    found = values.first(order, event, key, start, field)
    bounds = np.searchsorted(field[order[found.keep]], np.arange(len(names) + 1))
    fields = {name: found.slice(int(bounds[i]), int(bounds[i + 1])) for i, name in enumerate(names)}
    return Chunk(begin, begin + consumed, events, closed, open_end, fields)


class _Masks:
    """One bit per byte of a chunk for quotes (escaped ones cleared), bytes >= 0x40, control bytes
    and bytes <= ``,``, plus the quote offsets; computed a cache-sized piece at a time."""

    def __init__(self, seg: Bytes, slashes: Ints):
        n = seg.size
        count = (n + 63) // 64
        self.escapes = _escapes(seg, slashes)
        escaped_quotes = self.escapes[seg[self.escapes] == _QUOTE]
        self.quote_bits = np.empty(count, dtype=np.uint64)
        self.high_bits = np.empty(count, dtype=np.uint64)
        self.control_bits = np.empty(count, dtype=np.uint64)
        self.delimiter_bits = np.empty(count, dtype=np.uint64)
        self.blank_bits = np.empty(count, dtype=np.uint64)
        self.comma_bits = np.empty(count, dtype=np.uint64)
        self.colon_bits = np.empty(count, dtype=np.uint64)
        quotes: list[Ints] = []
        self.non_ascii = False
        for at in range(0, n, PIECE_BYTES):
            piece = seg[at : at + PIECE_BYTES]
            span = slice(at // 64, at // 64 + (piece.size + 63) // 64)
            quote = piece == _QUOTE
            if escaped_quotes.size:
                mine = escaped_quotes[(escaped_quotes >= at) & (escaped_quotes < at + piece.size)]
                quote[mine - at] = False
            self.quote_bits[span] = words(quote)
            quotes.append(np.flatnonzero(quote) + at)
            self.high_bits[span] = words(piece >= 0x40)
            self.control_bits[span] = words(piece < 0x20)
            self.delimiter_bits[span] = words(piece <= _COMMA)
            self.blank_bits[span] = words(piece <= 0x20)
            self.comma_bits[span] = words(piece == _COMMA)
            self.colon_bits[span] = words(piece == _COLON)
            self.non_ascii = self.non_ascii or int(piece.max()) >= 0x80
        self.quotes = np.concatenate(quotes) if quotes else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class _Found:
    """Values of several fields, sorted by field then event; ``keep`` says which of the keys they are."""

    keep: Ints
    values: Values

    def slice(self, lo: int, hi: int) -> Values:
        v = self.values
        return Values(v.event[lo:hi], v.start[lo:hi], v.end[lo:hi], v.kind[lo:hi], v.escaped[lo:hi])


class _Values:
    """Finds the extent of the values of one chunk's keys."""

    def __init__(
        self, seg: Bytes, delimiters: Words, marks: Ints, byte: Bytes, opens: Ints, closes: Ints, escaped: Mask
    ) -> None:
        self.seg, self.delimiters, self.marks, self.byte = seg, delimiters, marks, byte
        self.opens, self.closes, self.escaped = opens, closes, escaped

    def first(
        self, order: Ints, event: Ints, key: Ints, start: Ints, field: npt.NDArray[np.int8] | None = None
    ) -> _Found:
        """The values after the keys ``order`` (sorted by field, then position): the first one per
        event and field.  ``key`` is each key's string index, ``start`` where its value starts."""
        keep = np.ones(order.size, dtype=np.bool_)
        same = event[order][1:] == event[order][:-1]
        if field is not None:
            same &= field[order][1:] == field[order][:-1]
        keep[1:] = ~same
        keep_at = np.flatnonzero(keep)
        chosen = order[keep_at]
        event, key, start = event[chosen], key[chosen], start[chosen]
        seg = self.seg
        kind = seg[np.minimum(start, seg.size - 1)]
        end = start.copy()
        escaped = np.zeros(event.size, dtype=np.bool_)
        is_string = kind == _QUOTE
        if np.any(is_string):
            following = np.minimum(key[is_string] + 1, self.opens.size - 1)
            if np.any(self.opens[following] != start[is_string]):
                raise FastPathDeclined("a value that is not JSON")
            end[is_string] = self.closes[following] + 1
            escaped[is_string] = self.escaped[following]
        is_number = ((kind >= 0x30) & (kind <= 0x39)) | (kind == 0x2D)
        if np.any(is_number):
            end[is_number] = self._number_ends(start[is_number])
        known = is_string | is_number | (kind == _OPEN_OBJECT)
        for letter, literal in _LITERALS.items():
            is_literal = kind == letter
            end[is_literal] = start[is_literal] + len(literal)
            known |= is_literal
        is_array = kind == ord("[")
        if np.any(is_array):
            closing = self.marks[self.byte == _CLOSE_ARRAY]
            after = np.searchsorted(closing, start[is_array])
            if np.any(after >= closing.size):
                raise FastPathDeclined("an array value is cut off")
            end[is_array] = closing[after] + 1
            known |= is_array
        if not np.all(known):
            raise FastPathDeclined("a value that is not JSON")
        return _Found(keep_at, Values(event, start, end, kind, escaped))

    def _number_ends(self, start: Ints) -> Ints:
        # A number ends at whitespace, ',' or a bracket; '+', 'e' and 'E' are stepped over.
        n = self.seg.size
        end = np.minimum(next_set(self.delimiters, start + 1), n)
        todo = np.flatnonzero(end < n)
        while todo.size:
            byte = self.seg[end[todo]]
            todo = todo[(byte == ord("+")) | ((byte | 0x20) == ord("e"))]
            end[todo] = np.minimum(next_set(self.delimiters, end[todo] + 1), n)
            todo = todo[end[todo] < n]
        return end


def _clear_from(bits: Words, at: int) -> Words:
    """``bits`` with every bit at or after ``at`` cleared."""
    word = at >> 6
    bits[word + 1 :] = 0
    if word < bits.size:
        bits[word] &= np.uint64((1 << (at & 63)) - 1)
    return bits


def _escapes(seg: Bytes, slashes: Ints) -> Ints:
    """Offsets of the bytes escaped by a backslash (the byte after each odd run of backslashes)."""
    if not slashes.size:
        return slashes
    breaks = np.flatnonzero(np.diff(slashes) != 1) + 1
    run_start = slashes[np.concatenate(([0], breaks))]
    run_end = slashes[np.concatenate((breaks - 1, [slashes.size - 1]))]
    # An odd run escapes the byte after it; the pairs of backslashes in a run are escaped backslashes.
    escaped: Ints = run_end[(run_end - run_start) % 2 == 0] + 1
    return escaped[escaped < seg.size]


def _check_escapes(seg: Bytes, escaped: Ints) -> None:
    """Only JSON's escapes; ``\\u`` with four hex digits; surrogate escapes in high+low pairs."""
    if not escaped.size:
        return
    if not np.all(np.isin(seg[escaped], _ESCAPABLE)):
        raise FastPathDeclined("an invalid backslash escape in a string")
    unicode = escaped[seg[escaped] == ord("u")]
    if not unicode.size:
        return
    if np.any(unicode + 4 >= seg.size):
        raise FastPathDeclined("an invalid \\u escape in a string")
    digits = seg[unicode[:, None] + np.arange(1, 5)]
    if not np.all(np.isin(digits, _HEX)):
        raise FastPathDeclined("an invalid \\u escape in a string")
    lead = digits[:, 0] | 0x20
    second = digits[:, 1] | 0x20
    surrogate = (lead == ord("d")) & (second >= ord("8")) & ((second <= ord("9")) | (second >= ord("a")))
    if not np.any(surrogate):
        return
    high = surrogate & ((second == ord("8")) | (second == ord("9")) | (second == ord("a")) | (second == ord("b")))
    low = surrogate & ~high
    at = unicode[surrogate]
    expected_low = set((unicode[high] + 6).tolist())
    lows = set(unicode[low].tolist())
    # Each high half must be followed at once by "\u" and a low half, and each low half preceded by one.
    if expected_low != lows or any(seg[i - 1] != _BACKSLASH for i in lows) or at.size != 2 * len(lows):
        raise FastPathDeclined("a lone UTF-16 surrogate escape (\\uD800-\\uDFFF)")


def _check_bytes(
    raw: Raw,
    seg: Bytes,
    begin: int,
    consumed: int,
    masks: _Masks,
    inside: Words,
    outside: Words,
) -> None:
    """No control character inside a string, none but tab/CR/LF outside; valid UTF-8."""
    if np.any(masks.control_bits & inside):
        raise FastPathDeclined("a control character or raw line break inside a string")
    stray = seg[positions(masks.control_bits & outside, consumed)]
    if np.any((stray != 0x0A) & (stray != 0x0D) & (stray != 0x09)):
        raise FastPathDeclined("a control character outside strings")
    if masks.non_ascii:
        try:
            codecs.utf_8_decode(memoryview(raw)[begin : begin + consumed], "strict", True)
        except UnicodeDecodeError as exc:
            raise FastPathDeclined(f"invalid UTF-8 (at byte {begin + exc.start})") from exc


_VALUE_ENDS: Final = np.frombuffer(b'"0123456789el}]', dtype=np.uint8)
_VALUE_STARTS: Final = np.frombuffer(b'"-0123456789tfn{[', dtype=np.uint8)


def _check_separators(seg: Bytes, masks: _Masks, outside: Words, keys: int) -> None:
    """Each comma between a value and a value (or key); each colon right after a key."""
    if int(np.bitwise_count(masks.colon_bits & outside).sum()) != keys:
        raise FastPathDeclined("a colon that does not follow a key")
    commas = positions(masks.comma_bits & outside, seg.size)
    if not commas.size:
        return
    solid = ~masks.blank_bits
    before = previous_set(solid, commas - 1)
    after = next_set(solid, commas + 1)
    # A comma first in the chunk separates two events; the gap check has vouched for it.
    before_ok = (before < 0) | np.isin(seg[np.maximum(before, 0)], _VALUE_ENDS)
    after_ok = (after < seg.size) & np.isin(seg[np.minimum(after, seg.size - 1)], _VALUE_STARTS)
    if not (np.all(before_ok) and np.all(after_ok)):
        raise FastPathDeclined("a comma that does not separate two values")


def _check_words(seg: Bytes, at: Ints, depth: Ints) -> None:
    """Bytes >= 0x40 outside strings, brackets aside: only true/false/null and exponents."""
    if not at.size:
        return
    if np.any(depth < 2):
        raise FastPathDeclined("an element of the event array is not an object")
    run = np.ones(at.size, dtype=np.bool_)
    run[1:] = at[1:] != at[:-1] + 1
    first = np.flatnonzero(run)
    length = np.diff(np.append(first, at.size))
    start = at[first]
    lead = seg[start]
    ok = np.zeros(first.size, dtype=np.bool_)
    for letter, word in _LITERALS.items():
        mine = (lead == letter) & (length == len(word))
        if np.any(mine):
            got = load8(seg, start[mine]) & np.uint64((1 << (8 * len(word))) - 1)
            ok[mine] = got == np.uint64(int.from_bytes(word, "little"))
    exponent = ((lead | 0x20) == ord("e")) & (length == 1) & (start > 0)
    if np.any(exponent):
        prev = seg[start[exponent] - 1]
        ok[exponent] = (prev >= 0x30) & (prev <= 0x39)
    if not np.all(ok):
        raise FastPathDeclined("a bare word outside strings (NaN, Infinity, N/A, ...)")


def _check_gaps(
    seg: Bytes, quotes: Ranker, opens: Ints, closes: Ints, consumed: int, first: bool, closed: bool
) -> None:
    """Between events exactly one comma and whitespace; only whitespace after ``[`` and before ``]``.

    Gap ``i`` runs from the end of event ``i - 1`` (or the chunk start) to the start of event ``i``;
    the last gap runs to ``]`` (or to the end of the data, where a trailing comma is tolerated).
    """
    start = np.concatenate(([0], closes + 1))
    end = np.concatenate((opens, [consumed]))
    comma = np.ones(start.size, dtype=np.bool_)
    comma[0] = not first
    comma[-1] = False
    open_end = not closed and consumed == seg.size
    if not closed and not open_end:
        start, end, comma = start[:-1], end[:-1], comma[:-1]
    if np.any(quotes(start) != quotes(end)):
        raise FastPathDeclined("an element of the event array is not an object")
    at = skip_whitespace(seg, start)
    if open_end and (opens.size or not first) and at[-1] < seg.size and seg[at[-1]] == _COMMA:
        at[-1:] = skip_whitespace(seg, at[-1:] + 1)
    need = np.flatnonzero(comma)
    if np.any(at[need] >= end[need]) or np.any(seg[np.minimum(at[need], seg.size - 1)] != _COMMA):
        raise FastPathDeclined("events are not separated by one comma")
    at[need] = skip_whitespace(seg, at[need] + 1)
    if np.any(at != end):
        raise FastPathDeclined("events are not separated by one comma")
