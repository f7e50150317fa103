"""``traceq diff`` and ``traceq check`` on the command line: what they print and write, and their exit
codes (check: 0 every budget held, 1 one failed, 2 bad input or usage), on the shipped before/after
sample (the input stall fixed: 925.5 µs -> 430.5 µs per steady step, all of it input idle)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import jsonschema
import pytest
from click.testing import CliRunner

from traceq.cli import cli

from .conftest import REPO

DIFF_SCHEMA = json.loads((REPO / "schemas" / "diff.schema.json").read_text())


@pytest.fixture(scope="module")
def pair(samples: Path) -> tuple[Path, Path]:
    folder = samples / "before_after"
    return folder / "input_stall.pt.trace.json.gz", folder / "input_ready.pt.trace.json.gz"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def snapshot(paths: tuple[Path, ...]) -> list[tuple[bytes, int]]:
    return [(p.read_bytes(), p.stat().st_mtime_ns) for p in paths]


# --- diff --------------------------------------------------------------------------------------


def test_diff_prints_the_verdict_and_the_decomposition_in_80_columns(pair: tuple[Path, Path]) -> None:
    before = snapshot(pair)
    code, out, err = run("diff", *pair)
    assert (code, err) == (0, "")
    text = click.unstyle(out)
    words = " ".join(text.split())
    assert "step −53.5% (−495 µs, 926 µs -> 430 µs): input stall −495 µs" in words
    assert "the change resolved the input stall finding" in words
    assert max(len(line) for line in text.splitlines()) <= 80
    assert snapshot(pair) == before, "the inputs are read only"


def test_diff_writes_html_and_a_json_diff_that_fits_its_schema(pair: tuple[Path, Path], tmp_path: Path) -> None:
    html, data = tmp_path / "diff.html", tmp_path / "diff.json"
    code, out, _ = run("diff", *pair, "-o", html, "--json", data)
    assert code == 0
    assert f"wrote {html}" in out and f"wrote {data}" in out
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "chart-waterfall" in page
    payload = json.loads(data.read_text())
    jsonschema.validate(payload, DIFF_SCHEMA)
    assert payload["decomposition"]["delta_ns"] == -495_000
    assert set(tmp_path.iterdir()) == {data, html}, "nothing else is written"


def test_diff_takes_a_saved_json_report_as_a_side(pair: tuple[Path, Path], tmp_path: Path) -> None:
    saved = tmp_path / "before.json"
    code, _, _ = run("report", pair[0], "--no-html", "--json", saved, "--top-kernels", "1000")
    assert code == 0
    code, out, err = run("diff", saved, pair[1])
    assert (code, err) == (0, "")
    assert "saved report: " in out and "input stall −495 µs" in click.unstyle(out)


@pytest.mark.parametrize(
    ("extra", "says", "status"),
    [
        (("-o", "diff.pdf"), "cannot tell what to write to diff.pdf", 2),
        (("--json", "INPUT"), "is one of the inputs", 73),
        (("--json", "EXISTS"), "exists", 73),
    ],
)
def test_diff_refuses_a_bad_output_before_any_import(
    pair: tuple[Path, Path], tmp_path: Path, extra: tuple[str, str], says: str, status: int
) -> None:
    exists = tmp_path / "old.json"
    exists.write_text("{}")
    saved = tmp_path / "saved.json"  # a saved report as the before side: an input with an output's name
    assert run("report", pair[0], "--no-html", "--json", saved)[0] == 0
    target = {"INPUT": str(saved), "EXISTS": str(exists)}.get(extra[1], str(tmp_path / extra[1]))
    before = snapshot((*pair, saved))
    code, out, err = run("diff", saved, pair[1], extra[0], target)
    assert code == status and out == ""
    assert err.startswith("traceq: error: ") and says in err and err.count("\n") == 1
    assert snapshot((*pair, saved)) == before and exists.read_text() == "{}"


def test_diff_of_a_missing_side_is_one_line_and_the_bad_input_exit(pair: tuple[Path, Path], tmp_path: Path) -> None:
    code, out, err = run("diff", pair[0], tmp_path / "absent.json")
    assert code == 65 and out == ""
    assert err.startswith("traceq: error: ") and "absent.json" in err and "Traceback" not in err


# --- check -------------------------------------------------------------------------------------


def test_check_exits_0_when_every_budget_holds(pair: tuple[Path, Path]) -> None:
    code, out, err = run(
        "check",
        pair[1],
        "--baseline",
        pair[0],
        "--max-idle",
        "10%",
        "--max-regression",
        "3%",
        "--forbid",
        "input_stall",
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["held"] * 3
    assert lines[-1] == "all 3 budget(s) held"


def test_check_exits_1_when_a_budget_fails_and_says_which(pair: tuple[Path, Path]) -> None:
    code, out, err = run("check", pair[0], "--max-idle", "0.10", "--max-step-ms", "1")
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "FAILED max_idle 10.0%: GPU idle 54.6% of the steady step on rank 0, GPU 0",
        "held   max_step_ms 1 ms: median steady step 926 µs (p10–p90 926 µs–926 µs, 4 steps)",
        "1 of 2 budget(s) failed",
    ]


def test_check_reads_budgets_from_toml_and_options_win(pair: tuple[Path, Path], tmp_path: Path) -> None:
    budget = tmp_path / "traceq.toml"
    budget.write_text('max_idle = "1%"\nforbid = ["input_stall"]\n')
    code, out, _ = run("check", pair[1], "--budget", budget)
    assert code == 1 and "FAILED max_idle 1.0%" in out and "held   forbid input_stall" in out
    code, out, _ = run("check", pair[1], "--budget", budget, "--max-idle", "5%")
    assert code == 0 and "held   max_idle 5.0%" in out


@pytest.mark.parametrize(
    ("args", "says", "status"),
    [
        ((), "no budget to check", 2),
        (("--max-idle", "lots"), "--max-idle 'lots' is not a share", 2),
        (("--budget", "BAD_TOML"), "max_idle 'lots' is not a share", 2),
        (("--max-regression", "3%"), "none was given", 2),
        (("--min-mfu", "0.4"), "min_mfu needs the MFU", 2),
        (("--forbid", "slow"), "'slow' is not a finding id", 2),
        (("--budget", "absent.toml"), "no such budget file", 65),
        (("--max-idle", "5%", "--junit", "INPUT"), "is one of the inputs", 73),
    ],
)
def test_check_exits_2_for_bad_usage_65_for_a_missing_input_73_for_a_refused_output(
    pair: tuple[Path, Path], args: tuple[str, ...], says: str, status: int, tmp_path: Path
) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text('max_idle = "lots"\n')  # a budget file's errors name its keys as written there
    args = tuple({"INPUT": str(pair[1]), "BAD_TOML": str(bad_toml)}.get(a, a) for a in args)
    code, out, err = run("check", pair[1], *args)
    assert code == status and out == ""
    assert err.startswith("traceq: error: ") and says in err and err.count("\n") == 1


def test_check_writes_junit_xml_that_parses_back(pair: tuple[Path, Path], tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    code, out, _ = run("check", pair[0], "--max-idle", "10%", "--forbid", "host_sync", "--junit", junit)
    assert code == 1 and out.endswith(f"wrote {junit}\n")
    root = ET.parse(junit).getroot()
    [suite] = root.iter("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["max_idle 10.0%", "forbid host_sync does not fire"]
    failure = cases["max_idle 10.0%"].find("failure")
    assert failure is not None and "GPU idle 54.6%" in (failure.get("message") or "")
    assert cases["forbid host_sync does not fire"].find("failure") is None
    code, _, err = run("check", pair[0], "--max-idle", "10%", "--junit", junit)
    assert code == 73 and "exists" in err, "an existing JUnit file is replaced only with --force"
