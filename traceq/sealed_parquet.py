"""Parquet files that carry a digest of their own bytes: what traceq writes is never read back damaged.

A sealed file holds, under a key of its key-value metadata, a digest (32 hex characters) of every
byte of the file as written, with the digest's own place read as :data:`PLACEHOLDER` (a digest
cannot cover itself).  The key is a prefix the caller owns (``traceq``, ``traceq.cache``), a dot
and the digest's algorithm: files are sealed with SHA-256 (its first 128 bits), which CPUs with
SHA extensions hash about twice as fast as blake2b; files sealed with blake2b (128 bits), as
traceq sealed them before, still read.  To write one, put :data:`PLACEHOLDER` under
:func:`key` ``(prefix)``, write the file, then :func:`seal` it; to check one, :func:`check` its
bytes against the digest its metadata holds.  A bit flipped anywhere -- data pages, footer,
metadata, the digest itself -- fails the check (page checksums alone miss flips in the footer's
statistics and metadata).  The cache's entries (:mod:`traceq.cache`) and
:meth:`traceq.trace.Trace.to_parquet` files are sealed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import BinaryIO, Final, Literal, get_args

Algorithm = Literal["sha256", "blake2b"]
"""A seal's digest: ``sha256`` seals what traceq writes; ``blake2b`` is read in files written before."""
ALGORITHMS: Final[tuple[Algorithm, ...]] = get_args(Algorithm)

PLACEHOLDER: Final = b"0" * 32
"""What the digest is computed with in its own place, and what a file holds there until sealed."""
_DIGEST_BYTES: Final = len(PLACEHOLDER) // 2
_PARQUET_TAIL_BYTES: Final = 8
"""A Parquet file ends with the footer's length (4 bytes) and ``PAR1``."""


def key(prefix: bytes, algorithm: Algorithm = "sha256") -> bytes:
    """The metadata key of a seal of ``algorithm`` under ``prefix`` (``traceq`` -> ``traceq.sha256``);
    the default is the one :func:`seal` writes."""
    return prefix + b"." + algorithm.encode()


def keys(prefix: bytes) -> frozenset[bytes]:
    """Every key a seal under ``prefix`` may have (to leave them out of the metadata a reader shows)."""
    return frozenset(key(prefix, algorithm) for algorithm in ALGORITHMS)


def seal(fh: BinaryIO) -> bool:
    """Put the SHA-256 digest of the file written to ``fh`` (open for reading and writing) in its
    placeholder's place; False (nothing written) in the unseen case that the placeholder is not in
    the footer exactly once."""
    fh.flush()
    fh.seek(0)
    data = fh.read()
    at = _offset(data, PLACEHOLDER)
    if at is None:
        return False
    fh.seek(at)
    fh.write(_digest(data, at, "sha256"))
    fh.flush()
    return True


def check(data: bytes | bytearray, metadata: Mapping[bytes, bytes], prefix: bytes) -> bool | None:
    """Whether ``data`` (a whole Parquet file whose key-value ``metadata`` is given) is as it was
    sealed under ``prefix``; None when it holds no seal there."""
    for algorithm in ALGORITHMS:
        digest = metadata.get(key(prefix, algorithm))
        if digest is not None:
            return matches(data, digest, algorithm)
    return None


def matches(data: bytes | bytearray, digest: bytes, algorithm: Algorithm = "sha256") -> bool:
    """Whether ``data`` (a whole sealed file) is as it was sealed with ``digest`` (its metadata
    value), a digest of ``algorithm``."""
    at = _offset(data, digest)
    return at is not None and _digest(data, at, algorithm) == digest


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


def _digest(data: bytes | bytearray, at: int, algorithm: Algorithm) -> bytes:
    """The ``algorithm`` digest (its first 128 bits, in hex) of ``data`` with the digest's own place
    (at ``at``) read as the placeholder."""
    view = memoryview(data)
    digest = hashlib.sha256() if algorithm == "sha256" else hashlib.blake2b(digest_size=_DIGEST_BYTES)
    digest.update(view[:at])
    digest.update(PLACEHOLDER)
    digest.update(view[at + len(PLACEHOLDER) :])
    return digest.hexdigest()[: len(PLACEHOLDER)].encode()
