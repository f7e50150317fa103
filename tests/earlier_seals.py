"""Parquet files sealed as traceq sealed them before its seals were SHA-256: a blake2b digest
(128 bits, 32 hex characters) of every byte, its own place read as 32 zeros, under the key
``<prefix>.blake2b``.  Written here from that description, without :mod:`traceq.sealed_parquet`,
so that a test of reading them does not lean on the code it tests."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ZEROS = b"0" * 32


def write_blake2b_sealed(path: Path, table: pa.Table, metadata: Mapping[bytes, bytes], prefix: bytes) -> bytes:
    """Write ``table`` with ``metadata`` (and no other seal) to ``path``, sealed with blake2b under
    ``prefix``; returns the digest."""
    stored = {**metadata, prefix + b".blake2b": ZEROS}
    pq.write_table(table.replace_schema_metadata(stored), path, compression="zstd")
    data = path.read_bytes()
    assert data.count(ZEROS) == 1, "the placeholder must be in the file once"
    digest = hashlib.blake2b(data, digest_size=16).hexdigest().encode()
    path.write_bytes(data.replace(ZEROS, digest))
    return digest


def unsealed(path: Path, prefix: bytes) -> tuple[pa.Table, dict[bytes, bytes]]:
    """The table of a sealed traceq Parquet file and its key-value metadata without the seal."""
    stored = pq.read_metadata(path).metadata or {}
    metadata = {k: v for k, v in stored.items() if k != prefix + b".sha256"}
    return pq.read_table(path).replace_schema_metadata(None), metadata
