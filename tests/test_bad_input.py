"""Bad input: one clear line on stderr naming the file and what to do, a non-zero exit, no traceback."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceq.cli import cli

from .conftest import SAMPLES


def _truncated_gzip(tmp: Path) -> Path:
    whole = (SAMPLES / "training_step.pt.trace.json.gz").read_bytes()
    path = tmp / "cut.pt.trace.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    return path


def _invalid_json(tmp: Path) -> Path:
    path = tmp / "broken.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2,, }]}')
    return path


def _not_a_trace_json(tmp: Path) -> Path:
    path = tmp / "config.json"
    path.write_text(json.dumps({"learning_rate": 0.1, "layers": [1, 2]}))
    return path


def _empty_trace(tmp: Path) -> Path:
    path = tmp / "empty.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "traceEvents": []}, fh)
    return path


def _not_nsys_sqlite(tmp: Path) -> Path:
    path = tmp / "shop.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("create table customers (id integer primary key, name text)")
        db.execute("insert into customers (name) values ('ada')")
    return path


def _nsys_rep_without_nsys(tmp: Path) -> Path:
    path = tmp / "step.nsys-rep"
    path.write_bytes(b"not really a report")
    return path


def _missing(tmp: Path) -> Path:
    return tmp / "nope.nsys-rep.sqlite"


def _empty_directory(tmp: Path) -> Path:
    folder = tmp / "ranks"
    folder.mkdir()
    (folder / "README.txt").write_text("no traces here")
    return folder


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing file": (_missing, "no such file"),
    "directory with no traces": (_empty_directory, "directory holds no trace files"),
    "truncated gzip": (_truncated_gzip, "gzip"),
    "invalid JSON": (_invalid_json, "JSON"),
    "JSON that is not a trace": (_not_a_trace_json, "trace"),
    "empty trace": (_empty_trace, "no events"),
    "SQLite that is not an nsys export": (_not_nsys_sqlite, "not an Nsight Systems export"),
    ".nsys-rep without nsys": (_nsys_rep_without_nsys, "nsys export"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_naming_the_file(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no nsys anywhere
    monkeypatch.delenv("NSYS", raising=False)
    make, expected = CASES[case]
    path = make(tmp_path)
    before = path.read_bytes() if path.is_file() else None
    result = CliRunner().invoke(cli, ["info", str(path)])
    # 69 (sysexits' EX_UNAVAILABLE): a tool is missing, the file may be fine; 65: the file is bad
    assert result.exit_code == (69 if case == ".nsys-rep without nsys" else 65)
    assert result.stdout == ""
    err = result.stderr
    assert err.count("\n") == 1, err
    assert err.startswith("traceq: error: ")
    assert path.name in err
    assert expected.lower() in err.lower(), err
    assert "Traceback" not in err
    if before is not None:
        assert path.read_bytes() == before, "inputs are never modified"


def test_an_nsys_export_without_gpu_activity_loads_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "cpu_only.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("create table StringIds (id integer primary key, value text not null)")
        db.execute(
            "create table CUPTI_ACTIVITY_KIND_RUNTIME (start integer not null, end integer not null, "
            "eventClass integer not null, globalTid integer, correlationId integer, nameId integer not null, "
            "returnValue integer not null, callchainId integer)"
        )
        db.execute("insert into StringIds values (1, 'cudaGetDeviceCount_v2020')")
        db.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME values (10, 20, 0, 4294967297, 1, 1, 0, null)")
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 0, result.output
    assert "no GPU activity" in result.stdout
    assert "cuda_api" in result.stdout


def test_the_nsys_rep_error_gives_the_export_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.delenv("NSYS", raising=False)
    path = _nsys_rep_without_nsys(tmp_path)
    err = CliRunner().invoke(cli, ["report", str(path)]).stderr
    assert "nsys export --type sqlite" in err
    assert shutil.which("nsys") is None
