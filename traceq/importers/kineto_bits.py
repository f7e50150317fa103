"""Bit-level numpy helpers of the Kineto fast path: byte masks as 64-bit words, ranks, gathers.

A chunk of ``n`` bytes is summarised by masks of one bit per byte, packed little-endian into
``uint64`` words (bit ``i % 64`` of word ``i // 64`` is byte ``i``).  On such masks a few word
operations answer what would otherwise take a pass per byte: which bytes are inside a string
(:func:`inside_strings`, a prefix XOR of the quote mask), how many marked bytes precede a
position (:func:`rank`), where the next marked byte is (:func:`next_set`).
"""

from __future__ import annotations

import mmap
from typing import Final

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.uint8]
Words = npt.NDArray[np.uint64]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Raw = bytes | bytearray | mmap.mmap
"""The file's bytes as the fast path reads them (any of these has ``find``)."""

_ONE: Final = np.uint64(1)
_ZERO: Final = np.uint64(0)


def words(mask: Mask) -> Words:
    """``mask`` (one bool per byte) as little-endian bit words, zero-padded to a whole word."""
    packed = np.packbits(mask, bitorder="little")
    pad = -packed.size % 8
    if pad:
        packed = np.concatenate((packed, np.zeros(pad, dtype=np.uint8)))
    return packed.view(np.uint64)


def positions(bits: Words, n: int) -> Ints:
    """Offsets of the set bits among the first ``n`` (only words with a bit set are unpacked)."""
    busy = np.flatnonzero(bits)
    hit = np.flatnonzero(np.unpackbits(bits[busy].view(np.uint8), bitorder="little").view(np.bool_))
    found: Ints = busy[hit >> 6] * 64 + (hit & 63)
    return found[found < n]


def inside_strings(quotes: Words) -> Words:
    """Bits set from each opening quote (included) to its closing quote (excluded).

    The running parity of the quote bits: a prefix XOR within each word, then each word is
    inverted when an odd number of quotes precede it.
    """
    inside = quotes.copy()
    for shift in (1, 2, 4, 8, 16, 32):
        inside ^= inside << np.uint64(shift)
    odd = (np.bitwise_count(quotes) & 1).astype(np.uint8)
    before = np.bitwise_xor.accumulate(odd) ^ odd
    inside ^= _ZERO - before.astype(np.uint64)
    return inside


class Ranker:
    """How many set bits of ``bits`` come strictly before each queried offset (any offset up to
    ``64 * bits.size`` included)."""

    def __init__(self, bits: Words):
        self.bits = np.append(bits, _ZERO)
        counts = np.bitwise_count(self.bits).astype(np.int64)
        self.before = np.cumsum(counts) - counts

    def __call__(self, at: Ints) -> Ints:
        word = at >> 6
        below = (_ONE << (at & 63).astype(np.uint64)) - _ONE
        counted: Ints = self.before[word] + np.bitwise_count(self.bits[word] & below).astype(np.int64)
        return counted


def rank(bits: Words, at: Ints) -> Ints:
    """Set bits of ``bits`` strictly before each offset of ``at``."""
    return Ranker(bits)(at)


def next_set(bits: Words, at: Ints) -> Ints:
    """The first set bit at or after each offset of ``at`` (``64 * bits.size`` where none)."""
    found = np.full(at.shape, bits.size * 64, dtype=np.int64)
    word = at >> 6
    current = bits[np.minimum(word, bits.size - 1)] & ~((_ONE << (at & 63).astype(np.uint64)) - _ONE)
    current[word >= bits.size] = _ZERO
    pending = np.arange(at.size)
    while pending.size:
        hit = current != 0
        if np.any(hit):
            low = current[hit] & (_ZERO - current[hit])
            found[pending[hit]] = word[hit] * 64 + np.bitwise_count(low - _ONE).astype(np.int64)
        miss = ~hit
        pending, word = pending[miss], word[miss] + 1
        inside = word < bits.size
        pending, word = pending[inside], word[inside]
        current = bits[word]
    return found


def previous_set(bits: Words, at: Ints) -> Ints:
    """The last set bit at or before each offset of ``at`` (-1 where none)."""
    found = np.full(at.shape, -1, dtype=np.int64)
    word = at >> 6
    keep = (_ONE << (at & 63).astype(np.uint64)) - _ONE
    keep |= _ONE << (at & 63).astype(np.uint64)
    current = np.where(word >= 0, bits[np.maximum(word, 0)] & keep, _ZERO)
    pending = np.arange(at.size)
    while pending.size:
        hit = current != 0
        if np.any(hit):
            smear = current[hit]
            for shift in (1, 2, 4, 8, 16, 32):
                smear |= smear >> np.uint64(shift)
            top = smear ^ (smear >> _ONE)
            found[pending[hit]] = word[hit] * 64 + np.bitwise_count(top - _ONE).astype(np.int64)
        miss = ~hit
        pending, word = pending[miss], word[miss] - 1
        inside = word >= 0
        pending, word = pending[inside], word[inside]
        current = bits[word]
    return found


def load8(data: Bytes, at: Ints) -> Words:
    """The 8 bytes from each offset of ``at`` as a little-endian ``uint64`` (zero past the end)."""
    n = data.size
    out = np.zeros(at.shape, dtype=np.uint64)
    whole = at <= n - 8
    if n >= 8:
        view = np.ndarray((n - 7,), dtype="<u8", buffer=data, strides=(1,))
        out[whole] = view[at[whole]]
    for i in np.flatnonzero(~whole):
        start = int(at[i])
        if start < n:
            out[i] = int.from_bytes(data[start : start + 8].tobytes(), "little")
    return out


def skip_whitespace(data: Bytes, at: Ints) -> Ints:
    """Each offset moved past spaces, tabs and line breaks (to ``data.size`` at the end)."""
    at = at.copy()
    n = data.size
    todo = np.flatnonzero(at < n)
    while todo.size:
        byte = data[at[todo]]
        blank = (byte == 0x20) | (byte == 0x0A) | (byte == 0x0D) | (byte == 0x09)
        todo = todo[blank]
        at[todo] += 1
        todo = todo[at[todo] < n]
    return at
