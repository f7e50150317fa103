"""``traceq check``'s budgets: written as shares or numbers, from options and TOML, each checked on a
report with the figure behind it; and the JUnit XML a CI system reads, parsed back.

The reports are the shipped before/after sample (issue 15's planned pair "input stall fixed"): per
steady step 925.5 µs before and 430.5 µs after; idle 505.5 µs before (input 500 µs, sync 4.375 µs,
launch 1.125 µs) and 10.5 µs after (input 5 µs); the input stall finding fires before only.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import traceq
from traceq.analyses.model import Mfu, WithheldFinding
from traceq.diff.check import Budgets, budgets_of, check_budgets, parse_share, read_budget_file, render_check_text
from traceq.diff.junit import junit_xml
from traceq.errors import InputNotFoundError, InvalidArgumentError
from traceq.report.model import Report

STEP_BEFORE_NS, STEP_AFTER_NS = 925_500, 430_500
IDLE_BEFORE_NS, IDLE_AFTER_NS = 505_500, 10_500


@pytest.fixture(scope="module")
def pair(samples: Path) -> tuple[Report, Report]:
    folder = samples / "before_after"
    return (
        traceq.report(folder / "input_stall.pt.trace.json.gz", cache=False),
        traceq.report(folder / "input_ready.pt.trace.json.gz", cache=False),
    )


def check(report: Report, budgets: Budgets, baseline: Report | None = None) -> dict[str, tuple[bool, float | None]]:
    result = check_budgets(report, budgets, baseline=baseline, names=("trace", "base" if baseline else None))
    return {r.name: (r.held, r.value) for r in result.results}


# --- budgets as written ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "share"), [("10%", 0.10), ("0.1", 0.10), (0.1, 0.10), ("  3.5% ", 0.035), (0, 0.0)]
)
def test_a_share_is_written_with_a_percent_sign_or_as_a_fraction(written: object, share: float) -> None:
    assert parse_share(written, "max_idle") == pytest.approx(share)


@pytest.mark.parametrize("written", ["10", "150%", "-1%", "ten", "", True, None, [0.1], "nan"])
def test_anything_else_is_one_clear_error(written: object) -> None:
    with pytest.raises(InvalidArgumentError, match="max_idle"):
        parse_share(written, "max_idle")


def test_a_misspelt_budget_or_finding_is_an_error_not_a_budget_that_never_fails() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown budget 'max_idel'"):
        budgets_of({"max_idel": "10%"})
    with pytest.raises(InvalidArgumentError, match="'host_synch' is not a finding id"):
        budgets_of({"forbid": ["host_synch"]})
    with pytest.raises(InvalidArgumentError, match="above 0"):
        budgets_of({"max_step_ms": 0})


def test_a_toml_file_gives_budgets_at_the_top_or_in_a_check_table(tmp_path: Path) -> None:
    top = tmp_path / "traceq.toml"
    top.write_text('max_idle = "10%"\nmin_mfu = 0.40\nmax_step_ms = 120\nforbid = ["host_sync"]\n')
    assert read_budget_file(top) == Budgets(max_idle=0.10, min_mfu=0.40, max_step_ms=120.0, forbid=("host_sync",))
    table = tmp_path / "check.toml"
    table.write_text('[check]\nmax_exposed_comm = "5%"\nmax_regression = "3%"\n')
    assert read_budget_file(table) == Budgets(max_exposed_comm=0.05, max_regression=0.03)


def test_options_win_over_the_file_and_forbidden_findings_add_up() -> None:
    file = Budgets(max_idle=0.10, max_step_ms=120.0, forbid=("host_sync",))
    options = Budgets(max_idle=0.05, forbid=("input_stall", "host_sync"))
    assert options.over(file) == Budgets(max_idle=0.05, max_step_ms=120.0, forbid=("host_sync", "input_stall"))
    assert Budgets().empty and not file.empty


def test_a_broken_or_missing_budget_file_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("max_idle = \n")
    with pytest.raises(InvalidArgumentError, match="not valid TOML") as raised:
        read_budget_file(bad)
    assert raised.value.path == str(bad)
    with pytest.raises(InputNotFoundError):
        read_budget_file(tmp_path / "absent.toml")
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('max_idle = "lots"\n')
    with pytest.raises(InvalidArgumentError, match=r"wrong\.toml"):
        read_budget_file(wrong)


# --- budgets checked ---------------------------------------------------------------------------


def test_idle_is_the_share_of_the_steady_step(pair: tuple[Report, Report]) -> None:
    before, after = pair
    assert check(before, Budgets(max_idle=0.10)) == {"max_idle": (False, IDLE_BEFORE_NS / STEP_BEFORE_NS)}
    assert check(after, Budgets(max_idle=0.10)) == {"max_idle": (True, IDLE_AFTER_NS / STEP_AFTER_NS)}


def test_the_step_budget_is_the_median_steady_step_in_ms(pair: tuple[Report, Report]) -> None:
    _, after = pair
    assert check(after, Budgets(max_step_ms=0.5)) == {"max_step_ms": (True, STEP_AFTER_NS / 1e6)}
    assert check(after, Budgets(max_step_ms=0.43)) == {"max_step_ms": (False, STEP_AFTER_NS / 1e6)}


def test_a_regression_compares_the_medians_with_the_baseline(pair: tuple[Report, Report]) -> None:
    before, after = pair
    faster = (STEP_AFTER_NS - STEP_BEFORE_NS) / STEP_BEFORE_NS
    assert check(after, Budgets(max_regression=0.03), baseline=before) == {"max_regression": (True, faster)}
    slower = (STEP_BEFORE_NS - STEP_AFTER_NS) / STEP_AFTER_NS
    assert check(before, Budgets(max_regression=0.03), baseline=after) == {"max_regression": (False, slower)}
    result = check_budgets(before, Budgets(max_regression=0.03), baseline=after, names=("b", "a"))
    assert "p10–p90" in result.results[0].figure and "standard error" in result.results[0].figure


def test_a_regression_needs_a_baseline(pair: tuple[Report, Report]) -> None:
    with pytest.raises(InvalidArgumentError, match="baseline"):
        check(pair[0], Budgets(max_regression=0.03))


def test_a_forbidden_finding_fails_where_it_fires_or_was_withheld(pair: tuple[Report, Report]) -> None:
    before, after = pair
    budgets = Budgets(forbid=("input_stall", "host_sync"))
    assert check(before, budgets) == {"forbid input_stall": (False, 1.0), "forbid host_sync": (True, 0.0)}
    assert check(after, budgets) == {"forbid input_stall": (True, 0.0), "forbid host_sync": (True, 0.0)}
    withheld = dataclasses.replace(
        after, withheld_findings=(WithheldFinding("host_sync", "a sync", "a third missing"),)
    )
    assert check(withheld, budgets)["forbid host_sync"] == (False, 1.0)


def test_mfu_is_checked_where_the_report_has_it(pair: tuple[Report, Report]) -> None:
    _, after = pair
    with pytest.raises(InvalidArgumentError, match="model options"):
        check(after, Budgets(min_mfu=0.4))
    with_mfu = dataclasses.replace(after, mfu=Mfu(6e9, None, 4096.0, 1, 989e12, "given", 0.45, None, ()))
    assert check(with_mfu, Budgets(min_mfu=0.4)) == {"min_mfu": (True, 0.45)}
    assert check(with_mfu, Budgets(min_mfu=0.5)) == {"min_mfu": (False, 0.45)}


def test_a_share_budget_holds_on_every_device_so_the_worst_one_counts(samples: Path) -> None:
    job = traceq.report(samples / "ranks", cache=False, executor=1)
    shares = {d.rank: d.steady.exposed_comm_ns / d.steady.dur_ns for d in job.devices}
    worst = max(shares, key=lambda r: shares[r])
    result = check_budgets(job, Budgets(max_exposed_comm=0.05), names=("ranks", None))
    [line] = result.results
    assert line.value == shares[worst] and not line.held
    assert f"rank {worst}" in line.figure and "the worst of 4 devices" in line.figure


def test_the_text_is_one_line_per_budget_then_the_outcome(pair: tuple[Report, Report]) -> None:
    before, _ = pair
    result = check_budgets(before, Budgets(max_idle=0.10, forbid=("host_sync",)), names=("t", None))
    lines = render_check_text(result).splitlines()
    assert lines[0].startswith("FAILED max_idle 10.0%: GPU idle 54.6% of the steady step")
    assert lines[1].startswith("held   forbid host_sync")
    assert lines[2] == "1 of 2 budget(s) failed"


# --- JUnit XML ---------------------------------------------------------------------------------


def test_the_junit_xml_has_one_testcase_per_budget_and_a_failure_where_one_failed(pair: tuple[Report, Report]) -> None:
    before, after = pair
    budgets = Budgets(max_idle=0.10, max_regression=0.03, forbid=("input_stall",))
    result = check_budgets(before, budgets, baseline=after, names=("before.json", "after.json"))
    root = ET.fromstring(junit_xml(result))
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "3"
    [suite] = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "3", "0")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"trace": "before.json", "baseline": "after.json"}
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "max_idle 10.0%",
        "max_regression 3.0%",
        "forbid input_stall does not fire",
    ]
    for case, line in zip(cases, result.results, strict=True):
        failure = case.find("failure")
        assert failure is not None and failure.get("message") == line.figure
        assert case.findtext("system-out") == line.figure
    passed = check_budgets(after, Budgets(max_idle=0.10), names=("after", None))
    [case] = ET.fromstring(junit_xml(passed)).iter("testcase")
    assert case.find("failure") is None


def test_the_junit_xml_holds_hostile_strings_as_valid_xml(pair: tuple[Report, Report]) -> None:
    _, after = pair
    name = 'run\x07\x1b[2J<"&\ud800\uffff>.json'
    result = check_budgets(after, Budgets(max_idle=0.10), names=(name, None))
    root = ET.fromstring(junit_xml(result).encode("utf-8"))
    [prop] = root.iter("property")
    assert prop.get("value") == 'run\\x07\\x1b[2J<"&\\ud800\\uffff>.json'
