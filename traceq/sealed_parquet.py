"""Parquet files that carry a digest of their own bytes: what traceq writes is never read back damaged.

A sealed file holds, under a key of its key-value metadata, a blake2b digest (32 hex characters) of
every byte of the file as written, with the digest's own place read as :data:`PLACEHOLDER` (a
digest cannot cover itself).  To write one, put :data:`PLACEHOLDER` under the key, write the file,
then :func:`seal` it; to check one, :func:`matches` its bytes against the digest its metadata
holds.  A bit flipped anywhere -- data pages, footer, metadata, the digest itself -- fails the
check (page checksums alone miss flips in the footer's statistics and metadata).  The cache's
entries (:mod:`traceq.cache`) and :meth:`traceq.trace.Trace.to_parquet` files are sealed.
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO, Final

PLACEHOLDER: Final = b"0" * 32
"""What the digest is computed with in its own place, and what a file holds there until sealed."""
_PARQUET_TAIL_BYTES: Final = 8
"""A Parquet file ends with the footer's length (4 bytes) and ``PAR1``."""


def seal(fh: BinaryIO) -> bool:
    """Put the digest of the file written to ``fh`` (open for reading and writing) in its
    placeholder's place; False (nothing written) in the unseen case that the placeholder is not in
    the footer exactly once."""
    fh.flush()
    fh.seek(0)
    data = fh.read()
    at = _offset(data, PLACEHOLDER)
    if at is None:
        return False
    fh.seek(at)
    fh.write(_digest(data, at))
    fh.flush()
    return True


def matches(data: bytes | bytearray, digest: bytes) -> bool:
    """Whether ``data`` (a whole sealed file) is as it was sealed with ``digest`` (its metadata value)."""
    at = _offset(data, digest)
    return at is not None and _digest(data, at) == digest


def _offset(data: bytes | bytearray, digest: bytes) -> int | None:
    """Where ``digest`` sits in the Parquet footer of ``data``: its one place."""
    if len(digest) != len(PLACEHOLDER) or len(data) < _PARQUET_TAIL_BYTES:
        return None
    footer_end = len(data) - _PARQUET_TAIL_BYTES
    footer_start = footer_end - int.from_bytes(data[footer_end : footer_end + 4], "little")
    if footer_start < 0:
        return None
    at = data.find(digest, footer_start, footer_end)
    if at < 0 or data.find(digest, at + 1, footer_end) >= 0:
        return None
    return at


def _digest(data: bytes | bytearray, at: int) -> bytes:
    """blake2b of ``data`` with the digest's own place (at ``at``) read as the placeholder."""
    view = memoryview(data)
    digest = hashlib.blake2b(digest_size=len(PLACEHOLDER) // 2)
    digest.update(view[:at])
    digest.update(PLACEHOLDER)
    digest.update(view[at + len(PLACEHOLDER) :])
    return digest.hexdigest().encode()
