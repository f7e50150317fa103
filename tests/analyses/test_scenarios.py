"""Issue 13's scenario suite, first half: the oracle, run on every written scenario, equals the planted truth.

Every scenario of ``tracegen.planned.scenarios`` is written as an nsys export and as Kineto JSON
and read back with traceq's importers; the brute-force oracle of the spec
(``attribution_oracle.py``, no traceq analysis code) must then find, per rank and step window,
exactly the idle ns by cause written by hand beside the scenario, the exposed communication, the
launch latency, the warm-up steps and the GPU work no call launched.  The second half (what
traceq's report says) is ``test_scenarios_report.py``.
"""

from __future__ import annotations

import polars as pl
import pytest

from tracegen.planned import FORMATS, Format
from tracegen.planned.scenarios import BY_NAME, CAUSES, FINDINGS, REQUIRED, SCENARIOS

from .planted import SCENARIO_IDS, PlantedTraces

CASES = [pytest.param(name, fmt, id=f"{name}-{fmt}") for name in SCENARIO_IDS for fmt in FORMATS]
KERNEL_TIME_CASES = [
    pytest.param(s.name, fmt, id=f"{s.name}-{fmt}") for s in SCENARIOS if s.kernel_ns for fmt in FORMATS
]


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_oracle_finds_the_planted_idle_by_cause_in_every_step(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    devices = planted.oracle(scenario, fmt)
    assert sorted(devices) == sorted(d.rank for d in scenario.devices)
    for truth in scenario.devices:
        found = devices[truth.rank]
        assert [w.causes_ns for w in found.windows] == [dict(s) for s in truth.steps], f"rank {truth.rank}"
        assert [w.idle_ns for w in found.windows] == [sum(s.values()) for s in truth.steps]
        assert tuple(w.exposed_comm_ns for w in found.windows) == truth.exposed_comm_ns, f"rank {truth.rank}"


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_oracle_finds_the_launch_latency_warmup_and_unlaunched_work(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    for truth in scenario.devices:
        found = planted.oracle(scenario, fmt)[truth.rank]
        assert found.launch_latency_ns == truth.launch_latency_ns
        assert found.warmup == tuple(w.name for w in found.windows[: scenario.warmup])
        assert found.unlaunched == truth.unlaunched_activities


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_truth_does_not_hang_on_how_the_latency_percentile_is_taken(
    planted: PlantedTraces, name: str, fmt: Format
) -> None:
    scenario = BY_NAME[name]
    lower, higher = planted.oracle(scenario, fmt, "lower"), planted.oracle(scenario, fmt, "higher")
    for rank, device in lower.items():
        assert device.launch_latency_ns == higher[rank].launch_latency_ns
        assert device.windows == higher[rank].windows


STEP_TIME_CASES = [
    pytest.param(s.name, fmt, id=f"{s.name}-{fmt}")
    for s in SCENARIOS
    if any(d.step_ns for d in s.devices)
    for fmt in FORMATS
]


@pytest.mark.parametrize(("name", "fmt"), STEP_TIME_CASES)
def test_the_oracle_finds_the_planted_step_durations(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    for truth in scenario.devices:
        found = planted.oracle(scenario, fmt)[truth.rank]
        assert tuple(w.end_ns - w.start_ns for w in found.windows) == truth.step_ns, f"rank {truth.rank}"


@pytest.mark.parametrize(("name", "fmt"), KERNEL_TIME_CASES)
def test_the_kernel_table_holds_the_planted_kernel_time(planted: PlantedTraces, name: str, fmt: Format) -> None:
    scenario = BY_NAME[name]
    kernels = planted.events(scenario, fmt).filter(pl.col("kind") == "kernel")
    totals = dict(
        kernels.group_by(pl.col("name").cast(pl.String)).agg((pl.col("end_ns") - pl.col("start_ns")).sum()).rows()
    )
    assert {k: totals.get(k) for k in scenario.kernel_ns} == dict(scenario.kernel_ns)


def test_the_catalogue_covers_the_seeds_rows_exercises_regimes_and_the_issue_s_cases() -> None:
    expressed = [e for s in SCENARIOS for e in s.expresses]
    assert [r for r in REQUIRED if not any(e.startswith(r) for e in expressed)] == []
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)


def test_every_scenario_says_what_fires_and_what_must_not() -> None:
    for s in SCENARIOS:
        assert set(s.must_fire) | set(s.must_not_fire) <= set(FINDINGS)
        assert s.must_fire or s.must_not_fire, s.name
        for truth in s.devices:
            assert all(set(step) == set(CAUSES) and min(step.values()) >= 0 for step in truth.steps), s.name
