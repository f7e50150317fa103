"""The sides of a diff: traces or saved JSON reports, told apart by content, and their devices paired."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

import traceq
from traceq.diff.sides import is_saved_report, pair_devices, read_saved_report, read_side
from traceq.errors import CorruptTraceError, EmptyTraceError, UnsupportedFormatError
from traceq.report.model import Report
from traceq.report.render import JsonRenderer

from ..builders import kernel, launch, step, trace


def saved(tmp_path: Path, report: Report, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(JsonRenderer().render(report))
    return path


def test_a_saved_report_is_told_apart_from_a_kineto_trace_by_its_content(samples: Path, tmp_path: Path) -> None:
    report = traceq.report(samples / "training_step.nsys.sqlite")
    path = saved(tmp_path, report)
    unsorted = tmp_path / "unsorted.json"
    unsorted.write_text("\ufeff  " + json.dumps(report.to_dict()))  # a BOM, and the dataclass order
    kineto = tmp_path / "kineto.json"
    kineto.write_bytes(gzip.decompress((samples / "training_step.pt.trace.json.gz").read_bytes()))
    assert is_saved_report(path) and is_saved_report(unsorted)
    assert not is_saved_report(kineto)
    assert not is_saved_report(samples / "training_step.pt.trace.json.gz")
    assert not is_saved_report(samples / "ranks")
    assert read_saved_report(path).to_dict() == report.to_dict()


def test_a_saved_report_diffs_as_the_trace_it_was_made_of(samples: Path, tmp_path: Path) -> None:
    sample = samples / "training_step.pt.trace.json.gz"
    path = saved(tmp_path, traceq.report(sample, top_kernels=1000))
    from_saved = traceq.diff(path, sample)
    assert from_saved.decomposition.delta_ns == 0
    assert all(t.delta_ns == 0 for t in from_saved.decomposition.terms)
    assert from_saved.before.saved_report and not from_saved.after.saved_report
    assert from_saved.warnings == ()
    assert all(k.status == "unchanged" for k in from_saved.kernels.changes)


def test_a_saved_report_with_its_top_kernels_only_is_compared_with_a_warning(samples: Path, tmp_path: Path) -> None:
    sample = samples / "clean_step.pt.trace.json.gz"
    path = saved(tmp_path, traceq.report(sample, top_kernels=5))
    diff = traceq.diff(sample, path)
    assert any("after side" in w and "lists 5 of its 18 kernel names" in w for w in diff.warnings)
    assert not diff.kernels.complete_after
    assert sum(1 for k in diff.kernels.changes if k.status == "unlisted") == 13


def test_the_model_options_on_a_saved_report_say_they_do_not_apply(samples: Path, tmp_path: Path) -> None:
    sample = samples / "training_step.pt.trace.json.gz"
    path = saved(tmp_path, traceq.report(sample, top_kernels=1000))
    model = traceq.ModelSpec(flops_per_step=1e15, tokens_per_step=4096)
    diff = traceq.diff(sample, path, model=model, peak_tflops=989)
    assert any("do not apply to the saved after report" in w for w in diff.warnings)
    assert diff.mfu is not None and diff.mfu.mfu_before is not None and diff.mfu.mfu_after is None


@pytest.mark.parametrize(
    ("content", "error", "says"),
    [
        (b'{"devices": [1, 2', CorruptTraceError, "not valid JSON"),
        (b'{"schema_version": 99, "devices": []}', UnsupportedFormatError, "schema_version: is 99"),
        (b'{"devices": "x", "schema_version": 1}', UnsupportedFormatError, "is missing"),
    ],
)
def test_a_saved_report_that_cannot_be_read_is_one_error_naming_it(
    tmp_path: Path, content: bytes, error: type[Exception], says: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(error) as caught:
        traceq.diff(path, path)
    assert str(path) in str(caught.value) and says in str(caught.value)


def test_a_side_without_gpu_work_cannot_be_compared(samples: Path) -> None:
    empty = trace(step(0, 10, 1))
    with pytest.raises(EmptyTraceError, match="the before side has no GPU device with step time"):
        traceq.diff(empty, samples / "training_step.nsys.sqlite")


def _two_gpus(rank_of: dict[int, int | None]) -> traceq.Trace:
    rows = []
    for device, rank in rank_of.items():
        pid = 100 + device
        rows += [step(0, 100, 1, pid=pid, tid=pid + 1, rank=rank), launch(1, 2, 10 + device, pid=pid, tid=pid + 1)]
        rows += [kernel(10, 90, corr=10 + device, device=device, pid=pid, rank=rank)]
    return trace(*rows)


def test_devices_pair_by_rank_and_gpu_else_in_order_else_not_at_all() -> None:
    def sides(b: traceq.Trace, a: traceq.Trace) -> tuple[str, tuple[str, ...], list[tuple[int, int]]]:
        from traceq.analyses.options import Options

        pairing = pair_devices(read_side(b, "before", Options()), read_side(a, "after", Options()))
        return pairing.basis, pairing.warnings, [(x.device, y.device) for x, y in pairing.pairs]

    basis, warnings, pairs = sides(_two_gpus({0: 0, 1: 1}), _two_gpus({1: 1, 0: 0}))
    assert (basis, warnings, pairs) == ("rank and GPU", (), [(0, 0), (1, 1)])
    basis, warnings, pairs = sides(_two_gpus({0: None, 1: None}), _two_gpus({0: None, 1: None}))
    assert (basis, pairs) == ("process order and GPU", [(0, 0), (1, 1)])
    basis, warnings, pairs = sides(_two_gpus({0: 0, 1: 1}), _two_gpus({0: 5, 1: 6}))
    assert basis == "device order" and "paired in report order: rank 0, GPU 0 -> rank 5, GPU 0" in warnings[0]
    basis, warnings, pairs = sides(_two_gpus({0: 0, 1: 1}), _two_gpus({0: 0}))
    assert (basis, pairs) == ("per-rank mean", []) and "before has 2 device(s)" in warnings[0]


def test_sides_of_different_world_sizes_are_compared_with_a_warning(samples: Path) -> None:
    report = traceq.report(samples / "training_step.pt.trace.json.gz", top_kernels=1000)

    def of_world(size: int) -> Report:
        files = tuple(dataclasses.replace(f, world_size=size) for f in report.source.files)
        return dataclasses.replace(report, source=dataclasses.replace(report.source, files=files))

    assert not traceq.diff(of_world(8), of_world(8)).warnings
    diff = traceq.diff(of_world(2), of_world(8))
    assert diff.after.world_size == 8
    assert any("world sizes differ (before" in w for w in diff.warnings)
    assert diff.decomposition.delta_ns == 0


def test_a_job_and_one_of_its_ranks_compare_as_the_per_rank_mean(samples: Path) -> None:
    job = traceq.diff(samples / "ranks", samples / "training_step.pt.trace.json.gz")
    assert job.basis == "per-rank mean" and job.devices == ()
    assert job.before.devices == 4 and job.after.devices == 1
    ranks = traceq.report(samples / "ranks")
    means = [d.steady.dur_ns / d.steady.windows for d in ranks.devices]
    assert job.decomposition.step_before_ns == pytest.approx(sum(means) / len(means), abs=1e-6)
