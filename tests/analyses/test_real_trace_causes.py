"""On every real trace, the idle by cause partitions the idle exactly and no finding contradicts the
device's regime (issue 13's acceptance on ``../shared/sample_traces``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceq
from traceq.analyses.model import CAUSES, DeviceBreakdown, Finding
from traceq.report.model import Report

from ..conftest import SHARED_TRACES

TRACES = sorted(
    str(p.relative_to(SHARED_TRACES))
    for pattern in ("**/*.sqlite", "**/*.json.gz")
    for p in (SHARED_TRACES.glob(pattern) if SHARED_TRACES.is_dir() else [])
)
GRAPH_REPLAYED = 0.5
"""docs/findings.md: a device replays CUDA graphs when half its kernels came from a graph launch."""


def _device_of(report: Report, finding: Finding) -> DeviceBreakdown:
    """The device a finding's first evidence line names: the worst device it was measured on."""
    first = finding.evidence[0]
    (device,) = [d for d in report.devices if (d.rank, d.device) == (first.rank, first.device)]
    return device


def _recommends_cuda_graphs(fix: str) -> bool:
    return "CUDA graph" in fix and "already replays CUDA graphs" not in fix


@pytest.fixture(scope="module", params=TRACES or ["(none)"])
def analysed(request: pytest.FixtureRequest, shared_traces: Path) -> tuple[Report, pl.DataFrame]:
    trace = traceq.load(shared_traces / request.param)
    analysis = traceq.analyze(trace)
    return traceq.report(trace), analysis.gap_table


@pytest.mark.real
def test_every_idle_ns_has_exactly_one_cause(analysed: tuple[Report, pl.DataFrame]) -> None:
    report, gaps = analysed
    for d in report.devices:
        assert set(d.idle_by_cause_ns) == set(CAUSES)
        assert sum(d.idle_by_cause_ns.values()) == d.idle_ns, (d.rank, d.device)
        assert sum(d.steady.idle_by_cause_ns.values()) == d.steady.idle_ns, (d.rank, d.device)
        assert d.steady.idle_ns <= d.idle_ns
    for s in report.steps:
        assert sum(s.idle_by_cause_ns.values()) == s.idle_ns, (s.rank, s.device, s.step)
    columns = [f"{cause}_ns" for cause in CAUSES]
    assert gaps.select((pl.sum_horizontal(columns) == pl.col("dur_ns")).all()).item() in (True, None)
    assert gaps.select((pl.min_horizontal(columns) >= 0).all()).item() in (True, None)


@pytest.mark.real
def test_no_finding_contradicts_its_devices_regime(analysed: tuple[Report, pl.DataFrame]) -> None:
    report, _ = analysed
    for finding in report.findings:
        device = _device_of(report, finding)
        regime = device.regime
        graphs = regime is not None and regime.graph_share >= GRAPH_REPLAYED
        if graphs:
            assert not _recommends_cuda_graphs(finding.fix), (finding.id, device.rank, device.device)
        if finding.id == "memory_bound_kernels":
            assert regime is None or regime.verdict != "overhead-bound", (device.rank, device.device)
        if finding.id == "small_kernels":
            assert not graphs
            assert device.steady.idle_by_cause_ns["launch"] > 0, "CUDA-graph advice on a device with no launch idle"


@pytest.mark.real
def test_warm_up_is_at_most_half_the_steps_and_leading(analysed: tuple[Report, pl.DataFrame]) -> None:
    report, _ = analysed
    for d in report.devices:
        steps = [s for s in report.steps if (s.rank, s.device) == (d.rank, d.device)]
        flags = [s.warmup for s in sorted(steps, key=lambda s: s.start_ns)]
        assert sum(flags) == d.warmup_steps
        assert d.warmup_steps <= len(flags) // 2
        assert flags == sorted(flags, reverse=True), "warm-up steps lead"
