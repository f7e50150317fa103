"""GPU work with no launching call: counted per device and per source, and named beside ``unknown`` idle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import traceq
from traceq.analyses import analyze
from traceq.analyses.unlaunched import launch_coverage, unlaunched_activity
from traceq.cli import cli
from traceq.report.notes import unknown_idle_note
from traceq.report.text import render_text

from ..builders import SOURCE, api, kernel, launch, memcpy, memset, step, table, trace
from .test_launch_link import GPU, ROW, SETTINGS, frame_of, key_of

OTHER_PID = 300


def rows() -> list[dict[str, object]]:
    """One step on GPU 0: a launched kernel, a kernel whose launch was not recorded, one without a
    correlation id, a memcpy whose only call carries its id in another process, a launched memset."""
    return [
        step(0, 1_000),
        launch(0, 10, 1),
        kernel(20, 100, corr=1),
        kernel(300, 400, corr=2),
        kernel(500, 600),
        api("cudaMemcpyAsync", 610, 620, corr=3, pid=OTHER_PID, tid=OTHER_PID),
        memcpy(700, 750, corr=3),
        api("cudaMemsetAsync", 760, 770, corr=4),
        memset(800, 850, corr=4),
    ]


def test_unlaunched_activity_is_every_gpu_row_without_a_call_of_its_process_and_id() -> None:
    events = table(*rows())
    missing = unlaunched_activity(events)
    assert missing.select("kind", "pid").rows() == [("kernel", 100), ("kernel", 100), ("memcpy", 100)]
    coverage = launch_coverage(events)
    assert coverage.to_dicts() == [
        {
            "source": SOURCE,
            "activities": 5,
            "unlaunched": 3,
            "unlaunched_kernels": 2,
            "unlaunched_memcpys": 1,
            "unlaunched_memsets": 0,
        }
    ]


@SETTINGS
@given(st.lists(ROW, max_size=30), st.booleans(), st.sampled_from(["importer", "as drawn"]))
def test_unlaunched_activity_is_what_a_row_by_row_reading_finds(
    rows: list[dict[str, Any]], recorded_whole: bool, order: str
) -> None:
    """Every GPU row whose key (source, pid, correlation) is missing or has no ``cuda_api`` row, in
    table order; drawn half the time with a call for every key of activity (a trace recorded whole,
    where only the rows without a key are unlaunched), half the time as drawn."""
    if recorded_whole:
        calls = {key_of(r) for r in rows if r["kind"] in GPU} - {None}
        rows = rows + [
            {"kind": "cuda_api", "source": s, "pid": p, "tid": 5, "correlation": c, "start_ns": 0}
            for s, p, c in sorted(calls)
        ]
    events = frame_of(rows, order)
    table_rows = events.to_dicts()
    called = {key_of(r) for r in table_rows if r["kind"] == "cuda_api"} - {None}
    want = [
        (r["source"], r["pid"], r["device"], r["kind"])
        for r in table_rows
        if r["kind"] in GPU and (key_of(r) is None or key_of(r) not in called)
    ]
    assert unlaunched_activity(events).rows() == want


def test_the_device_counts_them_and_the_report_explains_its_unknown_idle_by_them() -> None:
    (d,) = analyze(table(*rows())).devices
    assert (d.kernels, d.memcpys, d.memsets, d.unlaunched_activities) == (3, 1, 1, 3)
    assert d.idle_by_cause_ns["unknown"] > 0
    share = 100 * d.idle_by_cause_ns["unknown"] / d.dur_ns
    note = unknown_idle_note(d)
    assert note == (
        f"unknown idle {share:.1f}%: 60.0% of its GPU activities (3 of 5) have no recorded launch "
        "(the profiler did not record their CPU side)"
    )
    text = click.unstyle(render_text(traceq.report(trace(*rows()))))
    assert "GPU 0: unknown idle" in text and "have no recorded launch" in " ".join(text.split())


def test_a_fully_launched_device_has_none_and_no_note_without_unknown_idle() -> None:
    launched = [step(0, 1_000), launch(0, 10, 1), kernel(20, 990, corr=1)]
    (d,) = analyze(table(*launched)).devices
    assert d.unlaunched_activities == 0
    assert unknown_idle_note(d) is None


def test_info_says_it_per_source_in_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    trace(*rows()).to_parquet(path)
    runner = CliRunner()
    text = runner.invoke(cli, ["info", str(path)])
    assert text.exit_code == 0, text.output
    assert "GPU activities without a launching call" in text.output
    assert "3 of 5" not in text.output  # the table gives counts and a share, not a sentence
    line = next(x for x in text.output.splitlines() if x.strip().startswith("all"))
    assert line.split()[1:] == ["5", "3", "60.0%"]
    assert "2 kernels, 1 memcpys" in text.output
    as_json = runner.invoke(cli, ["info", str(path), "--json"])
    assert '"launch_coverage"' in as_json.output and '"unlaunched": 3' in as_json.output


@pytest.mark.real
def test_a_real_export_with_unlaunched_work_names_it_beside_its_unknown_idle(shared_traces: Path) -> None:
    """nsys ``nsysai_h100_2gpu_1s``: half its GPU activities have no runtime call in the export."""
    loaded = traceq.load(shared_traces / "nsys" / "nsysai_h100_2gpu_1s_2026.2.1.sqlite")
    report = traceq.report(loaded)
    coverage = launch_coverage(loaded.events).row(0, named=True)
    on_devices = unlaunched_activity(loaded.events).filter(pl.col("device").is_not_null()).height
    assert sum(d.unlaunched_activities for d in report.devices) == on_devices <= coverage["unlaunched"]
    assert coverage["unlaunched"] > 0.4 * coverage["activities"]
    noted = [d for d in report.devices if unknown_idle_note(d) is not None]
    assert noted and all("have no recorded launch" in (unknown_idle_note(d) or "") for d in noted)
