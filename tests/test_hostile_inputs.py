"""Hostile inputs at the command line: every one gives a result or one ``traceq: error:`` line.

Specification (issue 14): each input below, built here from the shipped samples (nothing large is
committed; bombs are small files that inflate far), makes ``traceq info`` either succeed or print
exactly one line ``traceq: error: <the file>: ...`` on stderr with the bad-input exit code -- never
a traceback, never exit 70 ("internal error") or 3 ("a traceq bug") -- and leaves the input's bytes,
its modification time and its folder's listing as they were.  A good trace under a hostile file
name (a leading dash, a newline, markup, shell syntax, an escape sequence) is reported, and its
name never acts: escaped in the terminal and the HTML, never run, never taken for an option.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli

from .conftest import SAMPLES

KINETO = SAMPLES / "training_step.pt.trace.json.gz"
NSYS = SAMPLES / "training_step.nsys.sqlite"
BAD_INPUT_EXIT = 65


def _kineto_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(KINETO.read_bytes()))
    return doc


def _json(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _with_event_change(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        doc = _kineto_doc()
        for event in doc["traceEvents"][:: max(1, len(doc["traceEvents"]) // 50)]:
            change(event)
        return _json(folder, "changed.json", json.dumps(doc, allow_nan=True))

    return build


def _truncated_gzip(fraction: float) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        data = KINETO.read_bytes()
        return _json(folder, "cut.pt.trace.json.gz", data[: max(1, int(len(data) * fraction))])

    return build


def _corrupt_deflate(folder: Path) -> Path:
    data = bytearray(KINETO.read_bytes())
    data[100:200] = bytes(b ^ 0x55 for b in data[100:200])
    return _json(folder, "deflate.pt.trace.json.gz", bytes(data))


def _bomb(filler: bytes) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "bomb.pt.trace.json.gz"
        with gzip.open(path, "wb") as fh:
            fh.write(b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "args": {"x": "')
            for _ in range(100):
                fh.write(filler * ((1 << 20) // len(filler)))
            fh.write(b'"}}]}')
        return path

    return build


def _deep(folder: Path) -> Path:
    return _json(folder, "deep.json", '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")


def _sqlite_copy(folder: Path, name: str = "export.sqlite") -> Path:
    path = folder / name
    shutil.copyfile(NSYS, path)
    return path


def _nsys_sql(*statements: str, name: str = "export.sqlite") -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = _sqlite_copy(folder, name)
        db = sqlite3.connect(path)
        for statement in statements:
            db.execute(statement)
        db.commit()
        db.close()
        return path

    return build


def _nsys_bytes(change: Callable[[bytearray], bytes | bytearray]) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = _sqlite_copy(folder)
        path.write_bytes(bytes(change(bytearray(path.read_bytes()))))
        return path

    return build


def _zero_pages(data: bytearray) -> bytearray:
    for page in range(3, len(data) // 4096, 5):
        data[page * 4096 : (page + 1) * 4096] = bytes(4096)
    return data


def _wal(folder: Path) -> Path:
    (folder / "writer").mkdir()
    writer = _sqlite_copy(folder / "writer", "w.sqlite")
    db = sqlite3.connect(writer, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 3 = 0")
    path = folder / "wal.sqlite"
    shutil.copyfile(writer, path)
    shutil.copyfile(f"{writer}-wal", f"{path}-wal")
    db.close()
    shutil.rmtree(folder / "writer")
    return path


def _schema_not_utf8(folder: Path) -> Path:
    path = _sqlite_copy(folder)
    db = sqlite3.connect(path)
    db.execute("PRAGMA writable_schema=ON")
    db.execute("UPDATE sqlite_master SET sql = CAST(x'435245415445205441424c45ff' AS TEXT) WHERE name = 'StringIds'")
    db.commit()
    db.close()
    return path


def _damaged_parquet(folder: Path) -> Path:
    path = traceq.load(KINETO, cache=False).to_parquet(folder / "events.parquet")
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x40
    path.write_bytes(bytes(data))
    return path


def _fifo(folder: Path) -> Path:
    path = folder / "pipe.json"
    os.mkfifo(path)
    return path


def _symlink_loop(folder: Path) -> Path:
    (folder / "a.json").symlink_to(folder / "b.json")
    (folder / "b.json").symlink_to(folder / "a.json")
    return folder / "a.json"


def _ranks_with_one_broken(folder: Path) -> Path:
    ranks = folder / "ranks"
    shutil.copytree(SAMPLES / "ranks", ranks)
    data = (ranks / "rank2.pt.trace.json.gz").read_bytes()
    (ranks / "rank2.pt.trace.json.gz").write_bytes(data[: len(data) // 2])
    return ranks


CASES: dict[str, Callable[[Path], Path]] = {
    **{f"gzip cut at {f:.0%}": _truncated_gzip(f) for f in (0.0001, 0.01, 0.3, 0.7, 0.9999)},
    "gzip of garbage": lambda d: _json(d, "garbage.json.gz", gzip.compress(os.urandom(5000))),
    "corrupt deflate stream": _corrupt_deflate,
    "whitespace bomb": _bomb(b" "),
    "string bomb": _bomb(b"a"),
    "invalid JSON": lambda d: _json(d, "bad.json", '{"traceEvents": [{"ph": "X",, "ts": 1}]}'),
    "NaN and Infinity": _with_event_change(lambda e: e.update(ts=float("nan"), dur=float("inf"))),
    "huge timestamps": _with_event_change(lambda e: e.update(ts=1e300, dur=-1e300)),
    "string timestamps": _with_event_change(lambda e: e.update(ts="12", dur="a while")),
    "deep nesting": _deep,
    "duplicate keys": lambda d: _json(d, "dup.json", '{"traceEvents": [{"ph": "X", "ts": 1, "ts": 2, "dur": 1}]}'),
    "invalid UTF-8": lambda d: _json(d, "utf8.json", b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1}]}'),
    "control characters in names": _with_event_change(lambda e: e.update(name="a\x00\x07\r\x1b[2J")),
    "empty file": lambda d: _json(d, "empty.json", b""),
    "SQLite that is not a database": lambda d: _json(d, "fake.sqlite", b"SQLite format 3\x00" + os.urandom(8000)),
    "unrelated SQLite": lambda d: _sqlite_unrelated(d),
    "nsys export without its kernel table": _nsys_sql("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL"),
    "nsys export with text in a time column": _nsys_sql("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 'soon'"),
    "nsys strings not UTF-8": _nsys_sql("UPDATE StringIds SET value = CAST(x'41ff42' AS TEXT)"),
    "nsys schema not UTF-8": _schema_not_utf8,
    "nsys pages zeroed": _nsys_bytes(_zero_pages),
    "nsys truncated": _nsys_bytes(lambda data: data[: len(data) // 3]),
    "nsys in WAL mode": _wal,
    "damaged traceq Parquet": _damaged_parquet,
    "symlink loop": _symlink_loop,
    "ranks, one broken": _ranks_with_one_broken,
}
if hasattr(os, "mkfifo"):
    CASES["FIFO"] = _fifo


def _sqlite_unrelated(folder: Path) -> Path:
    path = folder / "shop.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()
    return path


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int] | None]:
    out: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(folder.rglob("*")):
        regular = path.is_file() and not path.is_symlink()
        out[str(path.relative_to(folder))] = (path.read_bytes(), path.stat().st_mtime_ns) if regular else None
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_input_gives_a_result_or_one_error_line_and_stays_as_it_was(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACEQ_MAX_INFLATE_RATIO", raising=False)
    folder = tmp_path / "input"
    folder.mkdir()
    path = CASES[case](folder)
    before = _snapshot(folder)

    result = CliRunner().invoke(cli, ["info", "--no-cache", str(path)])

    if result.exit_code != 0:
        assert result.exit_code == BAD_INPUT_EXIT, result.output
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("traceq: error: "), result.stderr
        assert str(path) in result.stderr or any(p.name in result.stderr for p in folder.rglob("*"))
    assert "Traceback" not in result.output
    assert _snapshot(folder) == before


def test_a_symlink_loop_is_named_as_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["info", "--no-cache", str(_symlink_loop(tmp_path))])
    assert "is a symbolic link that leads nowhere" in result.stderr


def test_a_dev_zero_with_a_forced_format_is_refused_at_once() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    result = CliRunner().invoke(cli, ["info", "--no-cache", "--input-format", "kineto-json", "/dev/zero"])
    assert result.exit_code == BAD_INPUT_EXIT
    assert result.stderr.startswith("traceq: error: /dev/zero: is a character device")


HOSTILE_NAMES = {
    "starts with a dash": "-rank0.pt.trace.json.gz",
    "holds a newline": "rank\n0.pt.trace.json.gz",
    "holds markup": "<img src=x onerror=alert(1)>.pt.trace.json.gz",
    "holds shell syntax": "$(touch pwned); rm -rf x.pt.trace.json.gz",
    "not ASCII": "ränk 名前 0.pt.trace.json.gz",
    "holds an escape sequence": "\x1b[2Jrank0.pt.trace.json.gz",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_NAMES))
def test_a_trace_under_a_hostile_file_name_is_reported_and_its_name_never_acts(case: str, tmp_path: Path) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    path = folder / HOSTILE_NAMES[case]
    shutil.copyfile(KINETO, path)
    before = _snapshot(folder)
    out = tmp_path / "out"
    out.mkdir()

    result = CliRunner().invoke(
        cli,
        ["report", "--no-cache", "-o", str(out / "r.html"), "--json", str(out / "r.json"), "--", str(path)],
    )

    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "\x1b[2J" not in result.stdout and "\n0.pt.trace" not in result.stdout
    page = (out / "r.html").read_text()
    assert "<img src=x" not in page
    assert json.loads((out / "r.json").read_text())["devices"]
    assert _snapshot(folder) == before
    assert not (Path.cwd() / "pwned").exists() and sorted(p.name for p in out.iterdir()) == ["r.html", "r.json"]
