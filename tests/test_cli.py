"""The command line: thin over the API, one-line errors, no overwrite without --force."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli

from .builders import api, kernel, memcpy, step, trace


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture()
def parquet(tmp_path: Path) -> Path:
    t = trace(
        step(0, 1000, 1),
        api("cudaLaunchKernel", 10, 20, corr=1),
        kernel(30, 200, "sgemm<script>", corr=1),
        memcpy(250, 300, "DtoH", corr=2),
        api("cudaMemcpyAsync", 240, 260, corr=2),
    )
    return t.to_parquet(tmp_path / "t.parquet")


def test_a_missing_file_is_one_line_on_stderr_and_the_bad_input_exit(tmp_path: Path) -> None:
    code, out, err = run("info", tmp_path / "missing.json")
    assert code == 65
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("traceq: error: ") and "missing.json: no such file or directory" in err
    assert "Traceback" not in err


def test_debug_shows_the_traceback_instead(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--debug", "info", str(tmp_path / "missing.json")])
    assert result.exit_code != 0
    assert result.exception is not None and type(result.exception).__name__ == "InputNotFoundError"


def test_info_lists_kinds_and_statistics(parquet: Path) -> None:
    code, out, _ = run("info", parquet)
    assert code == 0
    assert "events   5 rows" in out
    assert "cuda_api" in out and "import statistics" in out


def test_info_json_is_machine_readable(parquet: Path) -> None:
    code, out, _ = run("info", "--json", parquet)
    assert code == 0
    doc = json.loads(out)
    assert doc["rows"] == 5
    assert doc["kinds"]["kernel"] == 1


def test_events_filters_by_kind_and_name(parquet: Path) -> None:
    code, out, _ = run("events", parquet, "--kind", "cuda_api", "--name", "Memcpy", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["cudaMemcpyAsync"]


def test_events_csv_has_a_header_and_one_line_per_row(parquet: Path) -> None:
    code, out, _ = run("events", parquet, "--format", "csv", "--limit", "0")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("kind,start_ns,end_ns,name")
    assert len(lines) == 6


def test_an_invalid_name_regex_is_one_line(parquet: Path) -> None:
    code, _, err = run("events", parquet, "--name", "(")
    assert code == 2
    assert "is not a valid regex" in err


def test_convert_writes_sqlite_and_refuses_to_overwrite(parquet: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.db"
    code, stdout, _ = run("convert", parquet, "-o", out)
    assert code == 0 and "5 rows" in stdout
    with sqlite3.connect(out) as db:
        assert db.execute("select count(*) from events").fetchone() == (5,)
    code, _, err = run("convert", parquet, "-o", out)
    assert code == 73 and "exists" in err and "--force" in err
    code, _, _ = run("convert", parquet, "-o", out, "--force")
    assert code == 0


def test_convert_refuses_an_unknown_output_suffix(parquet: Path, tmp_path: Path) -> None:
    code, _, err = run("convert", parquet, "-o", tmp_path / "x.csv")
    assert code == 2 and "use a .parquet, .db, .sqlite, .json or .json.gz output name" in err


def test_convert_to_parquet_round_trips(parquet: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.parquet"
    code, _, _ = run("convert", parquet, "-o", out)
    assert code == 0
    assert out.read_bytes()[:4] == b"PAR1"


def test_jobs_do_not_change_the_report(samples: Path, tmp_path: Path) -> None:
    """A directory of ranks is reported rank by rank: the JSON of the job loaded whole, any --jobs."""
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"r{jobs}.json"
        args = ["report", str(samples / "ranks"), "--no-html", "--no-cache", "-j", jobs, "-o", str(out)]
        code, _, err = run(*args)
        assert code == 0, err
        outputs.append(json.loads(out.read_text()))
    loaded = traceq.report(traceq.load(samples / "ranks")).to_dict()
    assert outputs[0] == outputs[1] == json.loads(json.dumps(loaded))
