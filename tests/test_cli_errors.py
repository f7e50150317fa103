"""The command line's edge: every way a command ends has its exit code and at most one line on
stderr -- usage and input errors, traceq bugs, Ctrl-C, a stdout that closes early -- and files
that click would misread (a name starting with '-', no read permission) get traceq's wording."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceq import api, schema
from traceq.cli import cli
from traceq.errors import ExitCode

from .conftest import REPO, SAMPLES
from .permissions import TRACEQ, run_unprivileged

SAMPLE = SAMPLES / "training_step.pt.trace.json.gz"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


# --------------------------------------------------------------------------------------------
# exit codes


def test_help_lists_every_exit_code_and_the_generated_reference_has_them() -> None:
    code, out, _ = run("--help")
    assert code == ExitCode.OK
    reference = (REPO / "docs" / "cli.md").read_text()
    for exit_code in ExitCode:
        line = f"{exit_code.value:<4} {exit_code.meaning}"
        assert line in out and line in reference


def test_a_command_that_works_exits_0() -> None:
    assert run("info", SAMPLE)[0] == ExitCode.OK == 0


@pytest.mark.parametrize(
    ("args", "start", "status"),
    [
        (["info", "--no-such-option", str(SAMPLE)], "Usage: ", 2),
        (["info"], "Usage: ", 2),
        (["events", str(SAMPLE), "--name", "("], "traceq: error: --name '(' is not a valid regex", 2),
        (["info", "/nonexistent/t.json"], "traceq: error: /nonexistent/t.json: no such file", 65),
        (
            ["convert", str(SAMPLE), "-o", "/nonexistent/x.parquet"],
            "traceq: error: /nonexistent/x.parquet: cannot",
            73,
        ),
    ],
    ids=["unknown option", "missing argument", "bad argument value", "missing input", "unwritable output"],
)
def test_usage_input_and_output_errors_each_have_their_exit_status(args: list[str], start: str, status: int) -> None:
    # 2: the command line; 65: an input; 73: an output (sysexits' EX_USAGE-like, EX_DATAERR, EX_CANTCREAT)
    code, out, err = run(*args)
    assert code == status
    assert out == "" and err.startswith(start) and "Traceback" not in err


def test_an_unexpected_exception_is_an_internal_error_exit_70(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(api, "info", broken)
    code, out, err = run("info", SAMPLE)
    assert (code, out) == (ExitCode.INTERNAL, "") and code == 70
    assert err == (
        "traceq: internal error: ZeroDivisionError: a bug (rerun with --debug for the traceback and report it)\n"
    )


def test_a_table_that_breaks_the_schema_contract_is_an_internal_error_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def breaks_the_contract(*args: object, **kwargs: object) -> None:
        raise schema.SchemaViolation("1 rows have end_ns < start_ns")

    monkeypatch.setattr(api, "info", breaks_the_contract)
    code, _, err = run("info", SAMPLE)
    assert code == ExitCode.INTERNAL
    assert err.startswith("traceq: internal error: 1 rows have end_ns < start_ns. (rerun with --debug")


def test_ctrl_c_exits_130_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "info", interrupted)
    code, _, err = run("info", SAMPLE)
    assert (code, err) == (ExitCode.INTERRUPTED, "traceq: interrupted\n")


# --------------------------------------------------------------------------------------------
# a stdout that closes early: quiet, as a process SIGPIPE ends


def test_a_reader_that_goes_away_after_one_line_ends_traceq_quietly(tmp_path: Path) -> None:
    # `traceq events ... | head -1`: far more CSV than a pipe holds, so traceq is mid-write when the
    # reader goes.  The rest of that write is lost (Python's buffered writer reports a short write,
    # not an error); a later write would find the pipe broken.  Either way: no message at all.
    child = subprocess.Popen(
        [*TRACEQ, "events", str(SAMPLE), "--limit", "0", "--format", "csv", "--all-columns"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline().startswith(b"kind,start_ns,end_ns")
    child.stdout.close()
    err = child.stderr.read()
    assert child.wait() in (ExitCode.OK, ExitCode.STDOUT_CLOSED)
    assert err == b""


def test_a_stdout_without_a_reader_ends_traceq_quietly_with_141(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before traceq writes: its first write finds the pipe broken
    try:
        done = subprocess.run(
            [*TRACEQ, "info", str(SAMPLE)], stdout=write_end, stderr=subprocess.PIPE, cwd=tmp_path, check=False
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (ExitCode.STDOUT_CLOSED, b"")
    assert ExitCode.STDOUT_CLOSED == 128 + 13  # what a shell reports for a process SIGPIPE ended


def test_a_closed_stdout_still_gets_every_output_file_written(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader at all: the first line traceq prints finds the pipe broken
    try:
        done = subprocess.run(
            [*TRACEQ, "report", str(SAMPLE), "-o", "r.json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (ExitCode.STDOUT_CLOSED, b"")
    assert (tmp_path / "r.json").read_text().startswith("{")


# --------------------------------------------------------------------------------------------
# files click would misread


@pytest.fixture()
def dash_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    shutil.copy(SAMPLE, tmp_path / "-x.pt.trace.json.gz")
    monkeypatch.chdir(tmp_path)
    return "-x.pt.trace.json.gz"


def test_a_file_name_starting_with_a_dash_is_named_in_traceqs_wording(dash_file: str) -> None:
    code, out, err = run("info", dash_file)
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == (
        "traceq: error: -x.pt.trace.json.gz: starts with '-', so it reads as an option. "
        "Pass it as ./-x.pt.trace.json.gz, or after --.\n"
    )


def test_a_file_name_starting_with_a_dash_reads_after_double_dash_or_as_dot_slash(dash_file: str) -> None:
    for args in (["info", "--", dash_file], ["info", f"./{dash_file}"], ["report", "--no-html", "--", dash_file]):
        code, out, err = run(*args)
        assert code == 0, err
        assert dash_file in out


def test_an_unknown_option_that_is_no_file_keeps_clicks_usage_error(dash_file: str) -> None:
    code, _, err = run("info", "-y.json")
    assert code == ExitCode.USAGE and "No such option '-y'" in err


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("t.pt.trace.json.gz", ["info"]),
        ("t.pt.trace.json.gz", ["report", "--no-html"]),
        ("t.pt.trace.json.gz", ["info", "--input-format", "kineto-json"]),
        ("s.nsys.sqlite", ["info"]),
        ("s.nsys.sqlite", ["info", "--input-format", "nsys-sqlite"]),
    ],
)
def test_an_unreadable_input_is_one_line_naming_it(tmp_path: Path, name: str, args: list[str]) -> None:
    source = SAMPLE if name.endswith(".gz") else SAMPLES / "training_step.nsys.sqlite"
    shutil.copy(source, tmp_path / name)
    (tmp_path / name).chmod(0)
    done = run_unprivileged([*TRACEQ, *args, name], cwd=tmp_path)
    assert done.returncode == ExitCode.BAD_INPUT and done.stdout == ""
    assert done.stderr == f"traceq: error: {name}: cannot be read (Permission denied). Check permissions.\n"


def test_convert_into_a_read_only_directory_is_one_line_naming_it(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "t.pt.trace.json.gz")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        done = run_unprivileged([*TRACEQ, "convert", "t.pt.trace.json.gz", "-o", "ro/events.parquet"], cwd=tmp_path)
    finally:
        (tmp_path / "ro").chmod(0o755)
    assert done.returncode == ExitCode.OUTPUT_REFUSED and done.stdout == ""
    assert done.stderr == (
        f"traceq: error: ro/events.parquet: cannot be written: directory {tmp_path}/ro is not writable. "
        "Pass -o with a path in a writable directory.\n"
    )
    assert list((tmp_path / "ro").iterdir()) == []
