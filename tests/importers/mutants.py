"""Seeded mutants of the shipped samples, for the fuzz test (``test_fuzz.py``) and larger campaigns.

:func:`kineto_mutant` damages the JSON text of a Kineto sample (bit flips, truncations, inserted
and deleted bytes, tokens swapped for hostile ones) and sometimes the gzip stream around it;
:func:`nsys_mutant` damages a copy of the nsys sample, through SQLite (tables dropped, values of
the wrong type, invalid UTF-8, WAL frames left uncheckpointed) or byte by byte (flipped and zeroed
pages, truncation).  A seed always gives the same mutant, so a failure names the seed to replay.
"""

from __future__ import annotations

import contextlib
import gzip
import random
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

_HOSTILE_BYTES: Final = (
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"\\",
    b",",
    b":",
    b"NaN",
    b"-Infinity",
    b"\xff\xfe",
    b"\xc3",
    b"\x00",
    b"\x07",
    b"\r",
    b"1e999",
    b"-",
    b"\\ud800",
    b'"\\u0000"',
    b"null",
    b"true",
    b"9" * 40,
)
_HOSTILE_NUMBERS: Final = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e400",
    b'"12"',
    b'"stream 7"',
    b'"0x1f"',
    b"-1",
    b"0",
    b"99999999999999999999999",
    b"9223372036854775808",
    b"1.5",
    b"-0",
    b"true",
    b"null",
    b"[]",
    b"{}",
    b'"\xff"',
    b"[1, 2, 3]",
)
_HOSTILE_STRINGS: Final = (
    b'""',
    b'"\xff\xfe"',
    b'"\\ud800"',
    b'"\\udc00x"',
    b'"a\x00b"',
    b'"\x1b[31mred\x07\r"',
    b'"\\"',
    b'"\\x"',
    b'"' + b"n" * 5000 + b'"',
    b"12",
    b"null",
    b'"X"',
    b'"E"',
    b'"B"',
    b'"M"',
    b'"stream -1"',
    b'"[1, 2, 3]"',
)
_NUMBER: Final = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"')
_EVENT: Final = re.compile(rb"\{[^{}]*(?:\{[^{}]*\}[^{}]*)?\}")


def _random_span(rng: random.Random, data: bytes, longest: int) -> tuple[int, int]:
    begin = rng.randrange(len(data) + 1)
    return begin, min(len(data), begin + rng.randint(1, longest))


def _flip_bits(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out))
        out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _insert(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    piece = rng.choice(_HOSTILE_BYTES) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 16))
    return data[:at] + piece + data[at:]


def _delete(rng: random.Random, data: bytes) -> bytes:
    begin, end = _random_span(rng, data, 64)
    return data[:begin] + data[end:]


def _replace_token(pattern: re.Pattern[bytes], choices: tuple[bytes, ...]) -> Callable[[random.Random, bytes], bytes]:
    def mutate(rng: random.Random, data: bytes) -> bytes:
        at = rng.randrange(len(data))
        match = pattern.search(data, at) or pattern.search(data)
        if match is None:
            return data
        return data[: match.start()] + rng.choice(choices) + data[match.end() :]

    return mutate


def _duplicate_event(rng: random.Random, data: bytes) -> bytes:
    match = _EVENT.search(data, rng.randrange(len(data))) or _EVENT.search(data)
    if match is None:
        return data
    return data[: match.end()] + b"," + match.group(0) * 1 + data[match.end() :]


def _duplicate_key(rng: random.Random, data: bytes) -> bytes:
    match = re.compile(rb'"(ts|dur|ph|name|pid|tid)": ?[^,}]*').search(data, rng.randrange(len(data)))
    if match is None:
        return data
    return data[: match.end()] + b", " + match.group(0) + data[match.end() :]


def _nest(rng: random.Random, data: bytes) -> bytes:
    match = _NUMBER.search(data, rng.randrange(len(data)))
    if match is None:
        return data
    depth = rng.choice((300, 1200, 5000))
    return data[: match.start()] + b"[" * depth + match.group(0) + b"]" * depth + data[match.end() :]


KINETO_MUTATIONS: Final[tuple[Callable[[random.Random, bytes], bytes], ...]] = (
    _flip_bits,
    _truncate,
    _insert,
    _insert,
    _delete,
    _replace_token(_NUMBER, _HOSTILE_NUMBERS),
    _replace_token(_NUMBER, _HOSTILE_NUMBERS),
    _replace_token(_STRING, _HOSTILE_STRINGS),
    _replace_token(_STRING, _HOSTILE_STRINGS),
    _duplicate_event,
    _duplicate_key,
    _nest,
)


def kineto_mutant(seed: int, text: bytes, directory: Path) -> Path:
    """A damaged copy of the Kineto JSON ``text`` in ``directory``: one to three mutations of the
    text, written as ``.json`` or gzipped (and then, one time in four, the gzip stream damaged too)."""
    rng = random.Random(seed)
    data = text
    for _ in range(rng.randint(1, 3)):
        if data:
            data = rng.choice(KINETO_MUTATIONS)(rng, data)
    if rng.random() < 0.5:
        path = directory / f"mutant{seed}.json"
        path.write_bytes(data)
        return path
    packed = gzip.compress(data, compresslevel=1, mtime=0)
    if rng.random() < 0.25:
        packed = rng.choice((_flip_bits, _truncate, _delete, _insert))(rng, packed)
    path = directory / f"mutant{seed}.json.gz"
    path.write_bytes(packed)
    return path


_NSYS_VALUES: Final = (
    None,
    "text",
    -1,
    0,
    2**63 - 1,
    -(2**63),
    1.5,
    b"\xff\x00",
    "\x1b[2J\x07",
)


def _tables(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def _sql_mutation(rng: random.Random, db: sqlite3.Connection) -> None:
    tables = _tables(db)
    table = rng.choice(tables)
    columns = _columns(db, table)
    kind = rng.randrange(9)
    if kind == 8:  # a damaged schema, its text not UTF-8
        db.execute("PRAGMA writable_schema=ON")
        damage = rng.choice((b"CREATE TABLE \xff\xfe (a)", b"CREATE TABLE " + table.encode() + b" \xff", b"\xc3("))
        db.execute("UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = ?", (damage, table))
        if rng.random() < 0.5:
            renamed = b"T\xff" + table.encode()
            db.execute("UPDATE sqlite_master SET name = CAST(? AS TEXT) WHERE name = ?", (renamed, table))
        db.execute("PRAGMA writable_schema=OFF")
    elif kind == 0:
        db.execute(f'DROP TABLE "{table}"')
    elif kind == 1:
        db.execute(f'DELETE FROM "{table}" WHERE rowid % {rng.randint(2, 5)} = 0')
    elif kind in (2, 3) and columns:
        column = rng.choice(columns)
        value = rng.choice(_NSYS_VALUES)
        db.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % {rng.randint(1, 7)} = 0', (value,))
    elif kind == 4 and columns:
        column = rng.choice(columns)
        db.execute(
            f'UPDATE "{table}" SET "{column}" = CAST(X\'{rng.randbytes(3).hex()}ff\' AS TEXT) '
            f"WHERE rowid % {rng.randint(1, 4)} = 0"
        )
    elif kind == 5 and {"start", "end"} <= set(columns):
        db.execute(f'UPDATE "{table}" SET start = "end", "end" = start WHERE rowid % {rng.randint(1, 4)} = 0')
    elif kind == 6:
        db.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE rowid % {rng.randint(1, 6)} = 0')
    else:
        db.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_V{rng.randint(1, 9)}"')


def _byte_mutation(rng: random.Random, path: Path) -> None:
    data = bytearray(path.read_bytes())
    kind = rng.randrange(4)
    page = 4096
    if kind == 0:
        data = bytearray(_flip_bits(rng, bytes(data)))
    elif kind == 1:
        at = rng.randrange(len(data) // page) * page
        data[at : at + page] = bytes(page)
    elif kind == 2:
        data = data[: rng.randrange(len(data))]
    else:
        at = rng.randrange(len(data) // page) * page
        data[at + rng.randrange(page)] ^= 0xFF
    path.write_bytes(bytes(data))


def nsys_mutant(seed: int, sample: Path, directory: Path) -> Path:
    """A damaged copy of the nsys export ``sample`` in ``directory``: one to three SQL mutations
    (tables dropped or renamed, rows deleted or copied, values of the wrong type or not UTF-8, start
    and end swapped, a schema that is not UTF-8), left in an uncheckpointed WAL one time in six, or
    (one time in three) damaged bytes."""
    rng = random.Random(seed)
    path = directory / f"mutant{seed}.sqlite"
    shutil.copyfile(sample, path)
    choice = rng.random()
    if choice < 2 / 3:
        wal = rng.random() < 0.25
        db = sqlite3.connect(path, isolation_level=None)
        try:
            if wal:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA wal_autocheckpoint=0")
            for _ in range(rng.randint(1, 3)):
                with contextlib.suppress(sqlite3.Error):  # a constraint of the schema refused it
                    _sql_mutation(rng, db)
            if wal:  # the files as they are while the writer is open: the frames not yet in the db
                for suffix in ("", "-wal", "-shm"):
                    source = Path(f"{path}{suffix}")
                    if source.exists() and (suffix != "-shm" or rng.random() < 0.5):
                        shutil.copyfile(source, directory / f"kept{seed}.sqlite{suffix}")
        finally:
            db.close()
        if wal:
            for suffix in ("", "-wal", "-shm"):
                kept = directory / f"kept{seed}.sqlite{suffix}"
                Path(f"{path}{suffix}").unlink(missing_ok=True)
                if kept.exists():
                    kept.replace(Path(f"{path}{suffix}"))
    if choice >= 2 / 3 or rng.random() < 0.15:
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        _byte_mutation(rng, path)
    return path
