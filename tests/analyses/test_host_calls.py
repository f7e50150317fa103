"""Launches and syncs per steady step: counted as the docs define them, against counts made by hand
(a tiny table), by the plan of a planted scenario, and by a plain scan of a sample's rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceq
from tracegen.planned import Format
from tracegen.planned.scenarios import BY_NAME
from traceq import intervals as iv
from traceq.analyses import analyze
from traceq.analyses.host_calls import count_in_windows
from traceq.analyses.host_state import SYNC_CALL_PATTERN

from ..builders import api, kernel, launch, memcpy, step, table
from .planted import PlantedTraces


def test_a_call_counts_in_the_window_its_start_lies_in() -> None:
    windows = iv.Intervals.from_arrays([10, 30], [20, 40])
    starts = np.array([9, 10, 19, 20, 29, 30, 39, 40], np.int64)
    assert count_in_windows(starts, windows) == 4  # 10, 19, 30, 39: half-open windows
    assert count_in_windows(np.empty(0, np.int64), windows) == 0
    assert count_in_windows(starts, iv.Intervals.empty()) == 0


def test_launches_and_syncs_are_counted_in_the_steady_windows_only() -> None:
    events = table(
        step(0, 100, 1),
        launch(1, 2, 1),
        kernel(5, 10, corr=1),
        api("cudaMemcpyAsync", 3, 4, corr=2),
        memcpy(10, 12, corr=2),
        api("cudaStreamSynchronize", 4, 13),
        api("cudaMemcpy", 14, 20, corr=3),  # a synchronous copy: a launch and a sync
        memcpy(15, 18, corr=3),
        launch(21, 22, 4),  # its kernel is on another process: not this device's launch
        kernel(30, 31, corr=4, pid=999),
        step(100, 200, 2),
        launch(101, 102, 5),
        kernel(105, 110, corr=5),
        api("cudaDeviceSynchronize", 111, 112),
        api("cudaEventRecord", 113, 114),
        launch(200, 201, 6),  # after the last window
        kernel(205, 206, corr=6),
    )
    [device, _other] = analyze(events).devices
    assert device.steady.windows == 2
    assert device.steady.launches == 4  # corr 1, 2, 3 in step 1; corr 5 in step 2
    assert device.steady.syncs == 3  # cudaStreamSynchronize, cudaMemcpy, cudaDeviceSynchronize


PLANNED = {
    # per step: the copy's cudaMemcpyAsync and four gemm launches; one cudaStreamSynchronize
    "input_stall": (4, 5, 1),
    # per step: four gemm launches and two .item()s, each a cudaMemcpyAsync and a cudaStreamSynchronize
    "host_sync": (4, 6, 2),
}


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
@pytest.mark.parametrize("name", sorted(PLANNED))
def test_the_planted_launches_and_syncs_per_step(planted: PlantedTraces, name: str, fmt: Format) -> None:
    steps, launches, syncs = PLANNED[name]
    [device] = planted.report(BY_NAME[name], fmt)["devices"]
    assert device["steady"]["windows"] == steps
    assert (device["steady"]["launches"], device["steady"]["syncs"]) == (steps * launches, steps * syncs)


def test_on_a_sample_the_counts_equal_a_plain_scan_of_its_rows(samples: Path) -> None:
    trace = traceq.load(samples / "training_step.pt.trace.json.gz")
    [device] = analyze(trace.events).devices
    rows = trace.events.with_columns(pl.col("name").cast(pl.String))
    windows = rows.filter((pl.col("kind") == "range") & pl.col("name").str.starts_with("ProfilerStep#"))
    spans = sorted(zip(windows["start_ns"], windows["end_ns"], strict=True))
    spans = spans[device.warmup_steps :]
    gpu = set(rows.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))["correlation"].drop_nulls())
    calls = rows.filter(pl.col("kind") == "cuda_api").select("name", "start_ns", "correlation").rows()

    def inside(t: int) -> bool:
        return any(a <= t < b for a, b in spans)

    launches = sum(1 for _, t, corr in calls if corr in gpu and inside(t))
    syncs = sum(1 for name, t, _ in calls if re.search(SYNC_CALL_PATTERN, name) and inside(t))
    assert (device.steady.launches, device.steady.syncs) == (launches, syncs)
    assert launches > 0 and syncs > 0
