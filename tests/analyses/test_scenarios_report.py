"""Issue 13's scenario suite, second half: traceq's report on every planted scenario says what was planted.

Per scenario and format (``test_scenarios.py`` shows the oracle agrees with the truth on the same
files): the idle ns by cause of every step, device and the steady state, to the ns; the launch
latency; the regime; the warm-up steps; the findings that must fire (with their fix's words), those
that must not, and no fix's forbidden word; the straggler and its host state; the kernels counted
as communication; the GPU work no call launched.  The field names they read are all in
``scenario_expectations.py``.  Each step's window, idle and exposed communication are also checked
against the plan: issue 13 must not change them where the communication pattern does not change.
"""

from __future__ import annotations

import pytest

from tracegen.planned import FORMATS, Format
from tracegen.planned.scenarios import BY_NAME, SCENARIOS, PlantedScenario

from . import scenario_expectations as expect
from .planted import PlantedTraces


def _cases(selected: list[PlantedScenario]) -> list[object]:
    return [pytest.param(s.name, fmt, id=f"{s.name}-{fmt}") for s in selected for fmt in FORMATS]


CASES = _cases(list(SCENARIOS))
NCCL_ONLY = _cases([s for s in SCENARIOS if all(k.startswith("nccl") for k in s.comm_kernels)])


def _ids(planted: PlantedTraces, scenario: PlantedScenario, rank: int) -> tuple[int, int]:
    return planted.job(scenario).pids[rank], rank


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_report_attributes_every_idle_ns_as_planted(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        pid, dev = _ids(planted, scenario, truth.rank)
        steps = expect.step_entries(report, pid, dev)
        assert [expect.idle_by_cause(s) for s in steps] == [dict(s) for s in truth.steps], f"rank {truth.rank}"
        assert expect.idle_by_cause(expect.device_entry(report, pid, dev)) == truth.all_steps()
        steady = [expect.idle_by_cause(s) for s in steps[scenario.warmup :]]
        assert {c: sum(s[c] for s in steady) for c in truth.steady(scenario.warmup)} == truth.steady(scenario.warmup)


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_report_estimates_the_launch_latency(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        device = expect.device_entry(report, *_ids(planted, scenario, truth.rank))
        assert expect.launch_latency_ns(device) == truth.launch_latency_ns


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_report_gives_each_device_its_regime(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        device = expect.device_entry(report, *_ids(planted, scenario, truth.rank))
        if truth.regime is not None:
            assert expect.regime(device) == truth.regime, f"rank {truth.rank}"
        assert expect.graph_replayed(device) == truth.graph_replayed


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_report_names_the_warmup_steps(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        pid, dev = _ids(planted, scenario, truth.rank)
        numbers = [s["step"] for s in expect.step_entries(report, pid, dev)]
        assert expect.warmup_step_numbers(report, pid, dev) == numbers[: scenario.warmup]


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_findings_agree_with_the_planted_diagnosis(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    fired = expect.fired(planted.report(scenario, fmt))
    assert [f for f in scenario.must_fire if f not in fired] == []
    assert [f for f in scenario.must_not_fire if f in fired] == []
    for fid, words in scenario.fix_keywords.items():
        fix = expect.fix_text(fired[fid]).lower()
        assert [w for w in words if w.lower() not in fix] == [], fid
    for finding in fired.values():
        fix = expect.fix_text(finding).lower()
        assert [w for w in scenario.forbidden_fix_words if w.lower() in fix] == [], finding["id"]


@pytest.mark.parametrize(("name", "fmt"), _cases([s for s in SCENARIOS if s.straggler is not None]))
def test_the_straggler_is_named_with_its_host_state(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    assert scenario.straggler is not None
    finding = expect.fired(planted.report(scenario, fmt))["straggler"]
    assert expect.straggler_rank(finding) == scenario.straggler.rank
    if scenario.straggler.words:
        text = expect.finding_text(finding).lower()
        assert any(w.lower() in text for w in scenario.straggler.words), text


@pytest.mark.parametrize(("name", "fmt"), _cases([s for s in SCENARIOS if s.comm_kernels]))
def test_the_report_lists_the_kernels_it_counted_as_communication(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    assert set(scenario.comm_kernels) <= expect.comm_kernel_names(planted.report(scenario, fmt))


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_report_counts_the_gpu_work_no_call_launched(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        device = expect.device_entry(report, *_ids(planted, scenario, truth.rank))
        assert expect.unlaunched_activities(device) == truth.unlaunched_activities


@pytest.mark.parametrize(("name", "fmt"), NCCL_ONLY)
def test_the_report_keeps_every_step_s_window_idle_and_exposed_communication(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    report = planted.report(scenario, fmt)
    for truth in scenario.devices:
        pid, dev = _ids(planted, scenario, truth.rank)
        windows = planted.oracle(scenario, fmt)[truth.rank].windows
        steps = expect.step_entries(report, pid, dev)
        assert [(s["start_ns"], s["end_ns"]) for s in steps] == [(w.start_ns, w.end_ns) for w in windows]
        assert [s["idle_ns"] for s in steps] == [sum(t.values()) for t in truth.steps]
        assert tuple(s["exposed_comm_ns"] for s in steps) == truth.exposed_comm_ns


@pytest.mark.parametrize(("name", "fmt"), _cases([s for s in SCENARIOS if s.kernel_ns]))
def test_the_report_s_kernel_table_holds_the_planted_kernel_time(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    totals = expect.kernel_total_ns(planted.report(scenario, fmt))
    assert {k: totals.get(k) for k in scenario.kernel_ns} == dict(scenario.kernel_ns)
