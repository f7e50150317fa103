"""The analysis runs on every real trace and its totals hold together."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click
import jsonschema
import pytest

import traceq
from traceq.report.html.page import render_html
from traceq.report.text import render_text

from ..conftest import REPO, SHARED_TRACES

TRACES = sorted(
    str(p.relative_to(SHARED_TRACES))
    for pattern in ("**/*.sqlite", "**/*.json.gz")
    for p in (SHARED_TRACES.glob(pattern) if SHARED_TRACES.is_dir() else [])
)
SCHEMA = __import__("json").loads((REPO / "schemas" / "report.schema.json").read_text())


@pytest.mark.real
@pytest.mark.parametrize("relative", TRACES or ["(none)"])
def test_report_runs_and_its_numbers_add_up(shared_traces: Path, relative: str) -> None:
    trace = traceq.load(shared_traces / relative)
    report = traceq.report(trace)
    jsonschema.validate(report.to_dict(), SCHEMA)
    for d in report.devices:
        assert d.dur_ns == d.compute_ns + d.exposed_comm_ns + d.idle_ns
        assert 0 <= d.exposed_comm_ns <= d.comm_ns
        assert sum(d.idle_by_cause_ns.values()) <= d.idle_ns
    for s in report.steps:
        assert s.dur_ns == s.compute_ns + s.exposed_comm_ns + s.idle_ns
    gaps = traceq.analyze(trace).gap_table
    assert gaps.height == report.gap_count
    assert (gaps["end_ns"] > gaps["start_ns"]).all()
    for finding in report.findings:
        assert finding.evidence, finding.id
    text = click.unstyle(render_text(report))
    assert max(len(line) for line in text.splitlines()) <= 80
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


@pytest.mark.real
def test_hta_agrees_exactly_where_nothing_is_filtered(shared_traces: Path) -> None:
    """The autograd-API trace has no ProfilerStep, so HTA filters nothing: span and idle agree (µs)."""
    path = shared_traces / "kineto/02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz"
    (device,) = traceq.report(traceq.load(path)).devices
    assert device.window == "activity"
    assert device.dur_ns == 5_243_667_000
    assert device.idle_ns == 4_264_063_000


@pytest.mark.real
@pytest.mark.parametrize(
    ("relative", "hta_span_us", "hta_idle_us"),
    [
        ("hta/df_index_resolver/df_index_resolver.json.gz", 1_396_669, 643_612),
        ("hta/trace_diff/control/control.json.gz", 383_404, 62_119),
        ("hta/trace_diff/test/test.json.gz", 628_371, 46_910),
        ("hta/negative_queue_length_values_check/rank0.json.gz", 1_016_554, 705_853),
        ("kineto/be239c04/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", 830_494, 327_463),
        ("kineto/be239c04/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz", 677_173, 164_699),
    ],
)
def test_with_htas_load_filter_applied_span_and_idle_equal_htas(
    shared_traces: Path, relative: str, hta_span_us: int, hta_idle_us: int
) -> None:
    """HTA 0.5.0's published temporal breakdown, reproduced once its load filter is applied."""
    spec = importlib.util.spec_from_file_location("compare_hta", REPO / "scripts" / "compare_hta.py")
    assert spec is not None and spec.loader is not None
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    trace = compare.hta_filtered(traceq.load(shared_traces / relative))
    (device,) = [d for d in traceq.report(trace, step_pattern="a^").devices if d.kernels]
    assert device.dur_ns // 1000 == hta_span_us
    assert device.idle_ns // 1000 == hta_idle_us
