"""The command line's conventions: colour only where wanted (NO_COLOR, TERM=dumb), a report on
stdout (``--json -``, ``-o -``), ``--quiet``, contradictory options refused, and the documented
exit codes (:class:`traceq.errors.ExitCode`) for each way a command ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceq.cli import cli, no_colour
from traceq.errors import ExitCode

from .builders import api, kernel, step, trace

SEVERITY_ESCAPE = "\x1b["


@pytest.fixture()
def stall(tmp_path: Path) -> Path:
    """A trace whose one step is mostly a host sync: the host_sync finding fires, in colour."""
    t = trace(
        step(0, 10_000, 1),
        api("cudaLaunchKernel", 10, 20, corr=1),
        kernel(30, 200, "gemm", corr=1),
        api("cudaStreamSynchronize", 210, 9_000),
        api("cudaLaunchKernel", 9_010, 9_020, corr=2),
        kernel(9_030, 9_900, "gemm", corr=2),
    )
    return t.to_parquet(tmp_path / "t.parquet")


def invoke(*args: str | Path, env: dict[str, str] | None = None, color: bool = False) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env, color=color)
    return result.exit_code, result.stdout, result.stderr


def test_no_color_and_a_dumb_terminal_get_no_escape_codes(stall: Path, tmp_path: Path) -> None:
    code, out, _ = invoke("report", stall, "--no-html", color=True)  # as on a terminal
    assert code == 0 and SEVERITY_ESCAPE in out
    for env in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        code, out, _ = invoke("report", stall, "--no-html", env=env, color=True)
        assert code == 0 and SEVERITY_ESCAPE not in out and "where the step time went" in out
    assert no_colour({"NO_COLOR": "0"}) and not no_colour({"NO_COLOR": ""}) and not no_colour({"TERM": "xterm"})


def test_json_dash_writes_the_report_to_stdout_and_the_summary_to_stderr(stall: Path, tmp_path: Path) -> None:
    code, out, err = invoke("report", stall, "--json", "-")
    assert code == 0
    report = json.loads(out)
    assert report["schema_version"] and report["devices"]
    assert "where the step time went" in err  # the summary, for the person at the terminal
    assert not (tmp_path / "t.report.html").exists()  # a report on stdout replaces the default HTML file


def test_o_dash_writes_the_html_to_stdout(stall: Path, tmp_path: Path) -> None:
    code, out, err = invoke("report", stall, "-o", "-")
    assert code == 0
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert not (tmp_path / "t.report.html").exists()
    assert err != ""  # the summary


def test_quiet_prints_nothing_but_writes_the_files(stall: Path, tmp_path: Path) -> None:
    code, out, err = invoke("report", stall, "--quiet", "--json", tmp_path / "r.json")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "r.json").exists() and (tmp_path / "t.report.html").exists()
    code, out, err = invoke("report", stall, "-q", "--json", "-", "--no-html")
    assert code == 0 and json.loads(out)["devices"] and err == ""


@pytest.mark.parametrize(
    "args",
    [
        ("--no-html", "-o", "t.html"),
        ("-o", "-", "--json", "-"),
        ("--no-such-option",),
    ],
)
def test_contradictory_or_unknown_options_are_usage_errors(stall: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out, err = invoke("report", stall, *[str(tmp_path / a) if a.endswith(".html") else a for a in args])
    assert code == ExitCode.USAGE
    assert out == "" and "error" in err.lower()
    assert not (tmp_path / "t.html").exists()


def test_every_command_exits_with_the_documented_codes(stall: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json.gz"
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{ this is not json", encoding="utf-8")
    for command in ("report", "info", "events"):
        assert invoke(command, stall, *(["--no-html"] if command == "report" else []))[0] == ExitCode.OK
        for bad in (missing, corrupt):
            code, _, err = invoke(command, bad)
            assert code == ExitCode.BAD_INPUT, (command, bad, err)
            assert err.startswith("traceq: error:") and len(err.strip().splitlines()) == 1
    assert invoke("convert", stall, "-o", tmp_path / "t.txt")[0] == ExitCode.USAGE
    assert invoke("diff", stall, stall)[0] == ExitCode.OK
    assert invoke("diff", stall, missing)[0] == ExitCode.BAD_INPUT
    assert invoke("check", stall, "--forbid", "launch_bound")[0] == ExitCode.OK
    code, _, err = invoke("check", stall, "--max-idle", "1%")
    assert code == ExitCode.CHECK_FAILED, err  # a failed budget, and only that, exits 1
    assert invoke("check", missing, "--max-idle", "1%")[0] == ExitCode.BAD_INPUT
