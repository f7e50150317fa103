"""Sealed Parquet files: SHA-256 seals of every byte written, blake2b seals (files sealed before)
still read, and no flipped bit anywhere in a file passes either check."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from traceq import sealed_parquet

from .earlier_seals import write_blake2b_sealed

PREFIX = b"test.seal"


def _table() -> pa.Table:
    return pa.table({"start_ns": [3, 1, 2], "name": ["a", "b", "c"]})


def _sealed(path: Path) -> bytes:
    metadata = {b"other": b"kept", sealed_parquet.key(PREFIX): sealed_parquet.PLACEHOLDER}
    with path.open("w+b") as fh:
        pq.write_table(_table().replace_schema_metadata(metadata), fh)
        assert sealed_parquet.seal(fh)
    return path.read_bytes()


def _metadata(data: bytes) -> dict[bytes, bytes]:
    return dict(pq.read_metadata(pa.BufferReader(data)).metadata or {})


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def test_the_key_names_the_prefix_and_the_algorithm() -> None:
    assert sealed_parquet.key(b"traceq") == b"traceq.sha256"
    assert sealed_parquet.key(b"traceq.cache", "blake2b") == b"traceq.cache.blake2b"
    assert sealed_parquet.keys(b"traceq") == {b"traceq.sha256", b"traceq.blake2b"}


def test_a_seal_is_the_first_128_bits_of_the_sha256_of_the_file_with_zeros_in_its_place(tmp_path: Path) -> None:
    data = _sealed(tmp_path / "a.parquet")
    metadata = _metadata(data)
    digest = metadata[b"test.seal.sha256"]
    assert b"test.seal.blake2b" not in metadata and metadata[b"other"] == b"kept"
    assert data.count(digest) == 1
    assert digest == hashlib.sha256(data.replace(digest, b"0" * 32)).hexdigest()[:32].encode()
    assert sealed_parquet.check(data, metadata, PREFIX) is True
    assert pq.read_table(pa.BufferReader(data)).equals(_table())  # still a Parquet file like any other


def test_a_file_without_a_seal_under_the_prefix_has_none(tmp_path: Path) -> None:
    data = _sealed(tmp_path / "a.parquet")
    assert sealed_parquet.check(data, _metadata(data), b"test.other") is None


@pytest.mark.parametrize("algorithm", ["sha256", "blake2b"])
def test_no_flipped_bit_anywhere_passes_the_check(tmp_path: Path, algorithm: sealed_parquet.Algorithm) -> None:
    path = tmp_path / "a.parquet"
    if algorithm == "sha256":
        data = _sealed(path)
        digest = _metadata(data)[b"test.seal.sha256"]
    else:
        digest = write_blake2b_sealed(path, _table(), {}, PREFIX)
        data = path.read_bytes()
    assert sealed_parquet.matches(data, digest, algorithm)
    for at in range(len(data)):  # every byte: data pages, footer, metadata, the digest itself
        assert not sealed_parquet.matches(_flipped(data, at), digest, algorithm), at


def test_a_file_sealed_with_blake2b_before_is_checked_with_blake2b(tmp_path: Path) -> None:
    path = tmp_path / "earlier.parquet"
    write_blake2b_sealed(path, _table(), {b"other": b"kept"}, PREFIX)
    data = path.read_bytes()
    assert sealed_parquet.check(data, _metadata(data), PREFIX) is True
    flipped = _flipped(data, 4)  # the first data page
    assert sealed_parquet.check(flipped, _metadata(flipped), PREFIX) is False


def test_a_digest_of_the_other_algorithm_does_not_match(tmp_path: Path) -> None:
    path = tmp_path / "earlier.parquet"
    digest = write_blake2b_sealed(path, _table(), {}, PREFIX)
    assert not sealed_parquet.matches(path.read_bytes(), digest, "sha256")
