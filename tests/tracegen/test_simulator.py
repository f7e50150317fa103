"""The simulator: the same scenario gives the same timeline, and its ground truth is a well-formed
event table in which CPU rows nest, streams run one operation at a time and work follows its launch.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from tracegen import PRESETS, build_timeline, preset
from traceq.schema import validate

from .planted import GPU_KINDS, truth

# --------------------------------------------------------------------------- determinism


def test_same_scenario_gives_the_same_ground_truth() -> None:
    assert build_timeline(preset("straggler_job")).events().equals(truth("straggler_job"))
    reseeded = build_timeline(replace(preset("straggler_job"), seed=1)).events()
    assert not reseeded.equals(truth("straggler_job"))


# --------------------------------------------------------------------------- well-formed ground truth


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_ground_truth_is_a_valid_event_table_in_every_view(name: str) -> None:
    for view in ("truth", "nsys", "kineto"):
        validate(truth(name, view))


@pytest.mark.parametrize("name", ["training_step", "host_sync", "small_kernels", "straggler_job"])
def test_cpu_rows_nest_and_gpu_rows_queue_in_order(name: str) -> None:
    df = truth(name)
    for _, rows in df.filter(pl.col("tid").is_not_null()).group_by("pid", "tid"):
        stack: list[int] = []
        for s, e in (
            rows.sort(["start_ns", "end_ns"], descending=[False, True]).select("start_ns", "end_ns").iter_rows()
        ):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], "CPU ranges, ops and API calls must nest on a thread"
            stack.append(e)
    gpu = df.filter(pl.col("kind").is_in(GPU_KINDS))
    for _, rows in gpu.group_by("pid", "stream"):
        s, e = rows.sort("start_ns")["start_ns"].to_numpy(), rows.sort("start_ns")["end_ns"].to_numpy()
        assert (s[1:] >= e[:-1]).all(), "a stream runs one operation at a time"
    launched = gpu.join(
        df.filter(pl.col("kind") == "cuda_api").select("pid", "correlation", api_start="start_ns"),
        on=["pid", "correlation"],
    )
    assert launched.height == gpu.height
    assert (launched["api_start"] < launched["start_ns"]).all()


def test_stream_synchronize_returns_only_after_the_stream_has_drained() -> None:
    df = truth("training_step")
    syncs = df.filter((pl.col("kind") == "cuda_api") & (pl.col("name") == "cudaStreamSynchronize"))
    gpu = df.filter(pl.col("kind").is_in(GPU_KINDS) & (pl.col("stream") == 7))
    for s, e in syncs.select("start_ns", "end_ns").iter_rows():
        drained_at = int(gpu.filter(pl.col("start_ns") < s)["end_ns"].max())  # type: ignore[arg-type]
        assert drained_at <= e


def test_correlation_ids_are_unique_per_process() -> None:
    api = truth("straggler_job").filter(pl.col("kind") == "cuda_api")
    assert api.select("pid", "correlation").is_unique().all()


def test_profiled_steps_can_repeat_a_few_templates_at_vectorised_offsets() -> None:
    sc = replace(preset("training_step"), steps=6, distinct_steps=2)
    tl = build_timeline(sc)
    assert len(tl.templates) == 2 and [i.template for i in tl.instances] == [0, 1, 0, 1, 0, 1]
    df = tl.events()
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.height == 3 * sum(e.kind == "kernel" for t in tl.templates for e in t.events[0])
    step = [i.offset_ns for i in tl.instances]
    first = kernels.filter(pl.col("start_ns").is_between(step[0], step[1] - 1))["start_ns"].to_numpy()
    third = kernels.filter(pl.col("start_ns").is_between(step[2], step[3] - 1))["start_ns"].to_numpy()
    assert (third - first == step[2] - step[0]).all()
    steps = df.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#") & pl.col("tid").is_not_null())
    assert steps["name"].cast(pl.String).to_list() == [f"ProfilerStep#{n}" for n in range(2, 8)]
