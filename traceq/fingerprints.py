"""What a cache key (:class:`traceq.cache.SourceKey`) is made of: SHA-256 digests of a source's
bytes -- sampled (its size, first and last MiB) or whole -- and of traceq's own code.

SHA-256 because CPUs with SHA extensions (x86 since Zen and Ice Lake, ARMv8) hash it about twice
as fast as blake2b (13 against 25 ms for 22 MiB on the bench machine); hashlib lets the GIL go
while it hashes a large buffer.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import BinaryIO, Final

HASHED_SPAN_BYTES: Final = 1 << 20
"""Bytes hashed at each end of a source file (the whole file when it is at most twice this)."""
_CHUNK_BYTES: Final = 4 << 20
_CODE_SUFFIXES: Final = frozenset({".py", ".c", ".so", ".pyd"})


def head_tail_sha256(fh: BinaryIO, size: int) -> str:
    """SHA-256 (hex) of ``size`` and the first and last :data:`HASHED_SPAN_BYTES` of ``fh`` (a file
    of ``size`` bytes, read from its start): the whole file when it is at most twice that."""
    digest = hashlib.sha256()
    digest.update(size.to_bytes(8, "little"))
    if size <= 2 * HASHED_SPAN_BYTES:
        digest.update(fh.read())
    else:
        digest.update(fh.read(HASHED_SPAN_BYTES))
        fh.seek(size - HASHED_SPAN_BYTES)
        digest.update(fh.read(HASHED_SPAN_BYTES))
    return digest.hexdigest()


def content_sha256(fh: BinaryIO) -> str:
    """SHA-256 (hex) of every byte of ``fh``, from its start."""
    fh.seek(0)
    digest = hashlib.sha256()
    while chunk := fh.read(_CHUNK_BYTES):
        digest.update(chunk)
    return digest.hexdigest()


@cache
def traceq_code_sha256() -> str:
    """:func:`code_sha256` of the installed traceq package (the Kineto fast path's compiled scanner
    among its files): any change to traceq's code changes it.  Computed once per process."""
    return code_sha256(Path(__file__).resolve().parent)


def code_sha256(root: Path) -> str:
    """SHA-256 (hex) of the code under ``root``: every ``*.py``, ``*.c`` and compiled module
    (``*.so``, ``*.pyd``), with its path relative to ``root``.  Bytecode folders (``__pycache__``)
    are not walked: they hold no code, and listing them was most of the walk's time."""
    code: list[str] = []
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name != "__pycache__"]
        code.extend(os.path.join(folder, name) for name in files if os.path.splitext(name)[1] in _CODE_SUFFIXES)
    digest = hashlib.sha256()
    for path in sorted(code):
        digest.update(os.path.relpath(path, root).encode() + b"\0")
        try:
            with open(path, "rb") as fh:
                digest.update(fh.read())
        except OSError:  # removed while walked (a checkout being edited): its name still counts
            continue
    return digest.hexdigest()
