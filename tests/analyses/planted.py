"""The planted scenarios written once per test session, in both formats, with their events, oracle and report.

:class:`PlantedTraces` writes a scenario (``tracegen.planned.scenarios``) the first time a test
asks for it and keeps what was computed from it, so the oracle tests and the report tests share
one file, one import and one report per scenario and format.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

import traceq
from tracegen.planned import Format, PlannedJob
from tracegen.planned.scenarios import SCENARIOS, PlantedScenario

from .attribution_oracle import NCCL, Device, DeviceKey, attribute

SCENARIO_IDS = [s.name for s in SCENARIOS]


def comm_patterns(scenario: PlantedScenario) -> tuple[str, ...]:
    """The oracle's communication kernels: the scenario's, named exactly (else NCCL's prefix)."""
    return tuple(f"^{re.escape(name)}$" for name in scenario.comm_kernels) or NCCL


class PlantedTraces:
    """Scenario files under ``root``, built, written, loaded and analysed on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._jobs: dict[str, PlannedJob] = {}
        self._paths: dict[tuple[str, Format], Path] = {}
        self._events: dict[tuple[str, Format], pl.DataFrame] = {}
        self._oracle: dict[tuple[str, Format, str], dict[DeviceKey, Device]] = {}
        self._reports: dict[tuple[str, Format], dict[str, Any]] = {}

    def job(self, scenario: PlantedScenario) -> PlannedJob:
        if scenario.name not in self._jobs:
            self._jobs[scenario.name] = scenario.build()
        return self._jobs[scenario.name]

    def path(self, scenario: PlantedScenario, fmt: Format) -> Path:
        key = (scenario.name, fmt)
        if key not in self._paths:
            self._paths[key] = self.job(scenario).write(self.root / fmt, fmt)
        return self._paths[key]

    def events(self, scenario: PlantedScenario, fmt: Format) -> pl.DataFrame:
        key = (scenario.name, fmt)
        if key not in self._events:
            self._events[key] = traceq.load(self.path(scenario, fmt), cache=False, executor=1).events
        return self._events[key]

    def oracle(self, scenario: PlantedScenario, fmt: Format, percentile_method: str = "lower") -> dict[int, Device]:
        """The oracle's devices of the written trace, by rank (matched on the rank's pid and GPU)."""
        key = (scenario.name, fmt, percentile_method)
        if key not in self._oracle:
            self._oracle[key] = attribute(
                self.events(scenario, fmt),
                comm_patterns=comm_patterns(scenario),
                percentile_method=percentile_method,
            )
        pids = self.job(scenario).pids
        by_rank = {
            r: [d for k, d in self._oracle[key].items() if k[1] == pid and k[2] == r] for r, pid in enumerate(pids)
        }
        assert all(len(found) == 1 for found in by_rank.values()), f"{scenario.name}: devices {list(self._oracle[key])}"
        return {r: found[0] for r, found in by_rank.items()}

    def report(self, scenario: PlantedScenario, fmt: Format) -> dict[str, Any]:
        """``traceq.report`` of the written trace, as its JSON payload."""
        key = (scenario.name, fmt)
        if key not in self._reports:
            report = traceq.report(self.path(scenario, fmt), cache=False, executor=1).to_dict()
            self._reports[key] = report
        return self._reports[key]
