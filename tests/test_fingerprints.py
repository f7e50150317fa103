"""The digests a cache key is made of: a source's sampled and whole bytes, and traceq's own code,
each checked against hashlib directly."""

from __future__ import annotations

import hashlib
from pathlib import Path

from traceq.fingerprints import HASHED_SPAN_BYTES, code_sha256, content_sha256, head_tail_sha256


def _sampled(path: Path) -> str:
    with path.open("rb") as fh:
        return head_tail_sha256(fh, path.stat().st_size)


def test_a_small_file_is_hashed_whole_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * (2 * HASHED_SPAN_BYTES))
    expected = hashlib.sha256((2 * HASHED_SPAN_BYTES).to_bytes(8, "little") + path.read_bytes()).hexdigest()
    assert _sampled(path) == expected


def test_a_large_file_is_hashed_by_its_size_head_and_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    data = bytes(range(256)) * (3 * HASHED_SPAN_BYTES // 256)
    path.write_bytes(data)
    size = len(data).to_bytes(8, "little")
    expected = hashlib.sha256(size + data[:HASHED_SPAN_BYTES] + data[-HASHED_SPAN_BYTES:]).hexdigest()
    assert _sampled(path) == expected


def test_the_whole_content_digest_is_the_files_sha256_whatever_was_read_before(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"0123456789" * 1_000_003)
    with path.open("rb") as fh:
        fh.read(17)
        assert content_sha256(fh) == hashlib.sha256(path.read_bytes()).hexdigest()


def _package(root: Path) -> None:
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "sub" / "b.py").write_text("B = 2\n")
    (root / "sub" / "_reader.c").write_text("int f(void) { return 0; }\n")
    (root / "sub" / "_reader.so").write_bytes(b"\x7fELF compiled")
    (root / "sub" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"bytecode")
    (root / "notes.txt").write_text("not code\n")


def test_the_code_digest_covers_every_code_file_with_its_path(tmp_path: Path) -> None:
    _package(tmp_path)
    expected = hashlib.sha256()
    for relative in ["a.py", "sub/_reader.c", "sub/_reader.so", "sub/b.py"]:
        expected.update(relative.encode() + b"\0" + (tmp_path / relative).read_bytes())
    assert code_sha256(tmp_path) == expected.hexdigest()


def test_an_edit_of_any_code_file_changes_the_code_digest_and_other_files_do_not(tmp_path: Path) -> None:
    _package(tmp_path)
    before = code_sha256(tmp_path)
    (tmp_path / "notes.txt").write_text("edited\n")
    (tmp_path / "sub" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"other bytecode")
    assert code_sha256(tmp_path) == before
    for edited in ["a.py", "sub/b.py", "sub/_reader.c", "sub/_reader.so"]:
        path = tmp_path / edited
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert code_sha256(tmp_path) != before, edited
        path.write_bytes(original)
    assert code_sha256(tmp_path) == before
    (tmp_path / "sub" / "b.py").rename(tmp_path / "b.py")  # the same bytes elsewhere
    assert code_sha256(tmp_path) != before
