"""The shipped samples (``sample_traces/``): up to date with the generator, small, and imported by
traceq as planted.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

import traceq
import traceq.importers
from tracegen import preset

from .planted import MIB, REPO, kinds, truth
from .test_scenario import idle_after_sync_ns, per_step

# --------------------------------------------------------------------------- shipped samples

SAMPLE_FILES = (
    "training_step.nsys.sqlite",
    "training_step.pt.trace.json.gz",
    "clean_step.nsys.sqlite",
    "clean_step.pt.trace.json.gz",
    *(f"ranks/rank{r}.pt.trace.json.gz" for r in range(4)),
)


def make_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_samples", REPO / "sample_traces" / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_samples_are_up_to_date_and_small(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert make_samples().main(["--check", "--out", str(samples)]) == 0, capsys.readouterr().err
    for name in SAMPLE_FILES:
        assert (samples / name).stat().st_size < MIB, name


# --------------------------------------------------------------------------- headline and control


@pytest.mark.parametrize("stem", ["training_step", "clean_step"])
@pytest.mark.parametrize("suffix", [".nsys.sqlite", ".pt.trace.json.gz"])
def test_the_headline_sample_has_its_planted_problem_found_and_the_control_none(
    samples: Path, stem: str, suffix: str
) -> None:
    """The README's first command reports a step with a problem worth finding; the control is clean.
    What must fire comes from the generator's plan (the preset's knobs and its ground-truth timeline),
    never from traceq."""
    module = make_samples()
    name = module.HEADLINE_PRESET if stem == "training_step" else module.CONTROL_PRESET
    planted = {k for k, on in vars(preset(name).knobs).items() if on}
    sync_share = per_step(name, idle_after_sync_ns)  # the ground truth's GPU idle after syncs, per step
    if stem == "training_step":
        assert planted == {"host_sync"} and sync_share >= 0.20
    else:
        assert planted == set() and sync_share <= 0.10
    report = traceq.report(samples / f"{stem}{suffix}")
    assert {f.id for f in report.findings} == planted
    if planted:
        (finding,) = report.findings
        assert ".item()" in finding.fix and finding.share == pytest.approx(sync_share, abs=0.05)


# --------------------------------------------------------------------------- traceq's own importers


GPU_API_COLUMNS = ["kind", "start_ns", "end_ns", "pid", "device", "stream", "correlation", "is_comm"]


def comparable(df: pl.DataFrame, kinds_: Iterable[str], columns: list[str]) -> pl.DataFrame:
    rows = df.filter(pl.col("kind").cast(pl.String).is_in(list(kinds_)))
    rows = rows.select([pl.col(c).cast(pl.String) if c in ("kind", "name") else pl.col(c) for c in columns])
    return rows.sort(columns, nulls_last=True)


@pytest.mark.parametrize(
    ("sample", "view", "name"),
    [
        ("training_step.nsys.sqlite", "nsys", "host_sync"),
        ("training_step.pt.trace.json.gz", "kineto", "host_sync"),
        ("clean_step.nsys.sqlite", "nsys", "training_step"),
        ("clean_step.pt.trace.json.gz", "kineto", "training_step"),
    ],
)
def test_traceq_imports_the_samples_as_planted(samples: Path, sample: str, view: str, name: str) -> None:
    imported = pl.from_arrow(traceq.importers.read_file(samples / sample).events)
    assert isinstance(imported, pl.DataFrame)
    planted = truth(name, view)
    got = kinds(imported)
    assert {k: got.get(k, 0) for k in kinds(planted)} == kinds(planted)
    gpu_api = ("kernel", "memcpy", "memset", "gpu_sync", "cuda_api")
    assert comparable(imported, gpu_api, GPU_API_COLUMNS).equals(comparable(planted, gpu_api, GPU_API_COLUMNS))
    named = ["kind", "start_ns", "end_ns", "name"]
    assert comparable(imported, ("kernel", "cuda_api", "range"), named).equals(
        comparable(planted, ("kernel", "cuda_api", "range"), named)
    )
