"""The JSON report: valid against the generated schema, identical across source formats."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
from click.testing import CliRunner

import traceq
from tracegen import build_timeline, preset, write_nsys_sqlite
from traceq.cli import cli
from traceq.report.jsonschema import PayloadError
from traceq.report.model import Report, report_json_schema

from ..conftest import REPO

SCHEMA = json.loads((REPO / "schemas" / "report.schema.json").read_text())


def _numbers(report: dict[str, Any]) -> dict[str, Any]:
    """The analysis numbers of a report, without what legitimately differs between formats."""
    per_file = ("source", "rank", "pid")
    return {
        "devices": [{k: v for k, v in d.items() if k not in per_file} for d in report["devices"]],
        "steps": [{k: v for k, v in s.items() if k not in per_file} for s in report["steps"]],
        "gaps": [
            {k: g[k] for k in ("start_ns", "end_ns", "cause", "launch", "sync", "in_steps_ns")} for g in report["gaps"]
        ],
        "kernels": report["kernels"],
    }


@pytest.mark.parametrize(
    "sample",
    ["training_step.nsys.sqlite", "training_step.pt.trace.json.gz", "ranks"],
)
def test_sample_reports_validate_against_the_checked_in_schema(samples: Path, sample: str) -> None:
    report = traceq.report(traceq.load(samples / sample)).to_dict()
    jsonschema.validate(report, SCHEMA)
    assert report["schema_version"] == 1
    assert report["devices"], "the sample has GPU activity"


def test_the_checked_in_schema_is_the_generated_one() -> None:
    assert report_json_schema() == SCHEMA


HOST_DETAIL = ("idle_by_cause_ns", "gaps_by_cause", "steady", "regime")
"""Device fields that depend on what the host recorded besides its API calls: the op ranges that say
where the host began issuing a kernel (``launch`` against ``cpu`` idle)."""


def _gpu_numbers(report: dict[str, Any]) -> dict[str, Any]:
    """:func:`_numbers` without what the host's op ranges decide: what the GPU rows alone give."""
    numbers = _numbers(report)
    return {
        "devices": [{k: v for k, v in d.items() if k not in HOST_DETAIL} for d in numbers["devices"]],
        "steps": [{k: v for k, v in s.items() if k != "idle_by_cause_ns"} for s in numbers["steps"]],
        "gaps": [{k: v for k, v in g.items() if k in ("start_ns", "end_ns", "in_steps_ns")} for g in numbers["gaps"]],
        "kernels": numbers["kernels"],
    }


def test_nsys_and_kineto_versions_of_one_timeline_give_identical_numbers(samples: Path, tmp_path: Path) -> None:
    """The shipped nsys export holds no op ranges (an ``nsys profile`` without PyTorch's
    ``emit_nvtx``), the Kineto trace does: the GPU-side numbers agree; and an nsys export of the same
    timeline written with the ops as NVTX ranges gives the Kineto report's numbers, causes included."""
    nsys = traceq.report(traceq.load(samples / "training_step.nsys.sqlite")).to_dict()
    kineto = traceq.report(traceq.load(samples / "training_step.pt.trace.json.gz")).to_dict()
    assert _gpu_numbers(nsys) == _gpu_numbers(kineto)
    assert nsys["devices"][0]["steps"] == 4
    # With ops as NVTX ranges: the control (clean_step.* is preset training_step, make_samples.CONTROL_PRESET).
    control = traceq.report(traceq.load(samples / "clean_step.pt.trace.json.gz")).to_dict()
    timeline = dataclasses.replace(build_timeline(preset("training_step")), nsys_cpu_ops=True)
    with_ops = traceq.report(write_nsys_sqlite(timeline, tmp_path / "ops.nsys.sqlite"), cache=False).to_dict()
    assert _numbers(with_ops) == _numbers(control)


def test_cli_writes_the_json_report_and_refuses_to_overwrite(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    sample = samples / "training_step.pt.trace.json.gz"
    args = ["report", str(sample), "--no-html", "--json", str(out), "--max-gaps", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert len(doc["gaps"]) == 2
    assert doc["gaps"][0]["dur_ns"] >= doc["gaps"][1]["dur_ns"]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 73 and "--force" in again.stderr


def test_report_json_is_deterministic(samples: Path) -> None:
    path = samples / "training_step.nsys.sqlite"
    first = json.dumps(traceq.report(traceq.load(path)).to_dict(), sort_keys=True)
    second = json.dumps(traceq.report(traceq.load(path)).to_dict(), sort_keys=True)
    assert first == second


def _job_numbers(report: dict[str, Any]) -> dict[str, Any]:
    """The job's numbers without what names files, processes, ranks or the clock method."""
    job = report["job"]
    per_file = ("source", "rank", "pid")
    return {
        **{k: v for k, v in job.items() if k not in ("clock", "ranks", "note")},
        "ranks": [{k: v for k, v in r.items() if k not in per_file} for r in job["ranks"]],
        "residual_skew_ns": job["clock"]["residual_skew_ns"],
    }


def test_the_job_is_in_the_json_report_and_identical_across_formats(samples: Path, tmp_path: Path) -> None:
    """``sample_traces/ranks`` (Kineto, one file per rank) and the same job as one nsys export of
    four processes: the same collectives, waits, per-rank numbers and verdict."""
    from tracegen import build_timeline, preset, write_nsys_sqlite

    kineto = traceq.report(traceq.load(samples / "ranks")).to_dict()
    nsys_path = write_nsys_sqlite(build_timeline(preset("straggler_job")), tmp_path / "job.nsys.sqlite")
    nsys = traceq.report(traceq.load(nsys_path)).to_dict()
    for doc in (kineto, nsys):
        jsonschema.validate(doc, SCHEMA)
        assert doc["job"]["verdict"] == "slow_rank" and doc["job"]["straggler"] == 2
        assert len(doc["job"]["collectives"]) == doc["job"]["collectives_total"] == 12
        assert all(len(c["waits_ns"]) == 4 for c in doc["job"]["collectives"])
    assert (kineto["job"]["clock"]["method"], nsys["job"]["clock"]["method"]) == ("anchor", "single_clock")
    assert _job_numbers(kineto) == _job_numbers(nsys)


def test_a_single_device_report_has_no_job(samples: Path) -> None:
    doc = traceq.report(traceq.load(samples / "training_step.nsys.sqlite")).to_dict()
    assert doc["job"] is None
    jsonschema.validate(doc, SCHEMA)


@pytest.mark.parametrize("sample", ["training_step.nsys.sqlite", "training_step.pt.trace.json.gz", "ranks"])
def test_a_saved_json_report_reads_back_as_the_report(samples: Path, sample: str) -> None:
    report = traceq.report(traceq.load(samples / sample))
    saved = json.loads(json.dumps(report.to_dict(), sort_keys=True))
    assert Report.from_dict(saved).to_dict() == report.to_dict()


@pytest.mark.parametrize("sample", ["training_step.pt.trace.json.gz", "ranks"])
def test_the_report_counts_every_distinct_kernel_name_however_few_it_lists(samples: Path, sample: str) -> None:
    trace = traceq.load(samples / sample)
    names = trace.events.filter(pl.col("kind") == "kernel").get_column("name").cast(pl.String).n_unique()
    listed = traceq.report(trace, top_kernels=3)
    assert (listed.kernel_names, len(listed.kernels)) == (names, 3)
    assert traceq.report(samples / sample, top_kernels=10_000).kernel_names == names  # file by file, too
    assert len(traceq.report(samples / sample, top_kernels=10_000).kernels) == names


def test_fields_a_report_saved_before_them_lacks_read_as_unknown(samples: Path) -> None:
    payload = traceq.report(traceq.load(samples / "training_step.nsys.sqlite")).to_dict()
    del payload["kernel_names"]
    for device in payload["devices"]:
        del device["steady"]["launches"], device["steady"]["syncs"]
    old = Report.from_dict(payload)
    assert old.kernel_names is None
    assert (old.devices[0].steady.launches, old.devices[0].steady.syncs) == (None, None)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda p: p.update(schema_version=2), "schema_version: is 2; this traceq reads version 1"),
        (lambda p: p["devices"][0].pop("steady"), "devices[0].steady: is missing"),
        (lambda p: p["devices"][0].update(dur_ns="12"), "devices[0].dur_ns: should be an integer, not a string"),
        (lambda p: p["devices"][0].update(dur_ns=True), "devices[0].dur_ns: should be an integer, not a boolean"),
        (lambda p: p["findings"].append({"id": "x"}), "findings[0].severity: is missing"),
        (lambda p: p["devices"][0].update(window="weekly"), "devices[0].window: should be one of steps, activity"),
        (lambda p: p["devices"][0]["idle_by_cause_ns"].update(input=None), "devices[0].idle_by_cause_ns.input"),
        (lambda p: p.update(steps={}), "steps: should be an array"),
    ],
)
def test_a_json_report_that_does_not_fit_names_the_place(samples: Path, change: Any, where: str) -> None:
    payload = traceq.report(traceq.load(samples / "clean_step.nsys.sqlite")).to_dict()  # no findings
    change(payload)
    with pytest.raises(PayloadError) as caught:
        Report.from_dict(payload)
    assert str(caught.value).startswith(where)


def test_a_json_report_is_an_object() -> None:
    with pytest.raises(PayloadError, match="a JSON report is an object"):
        Report.from_dict([1, 2])
