"""The Trace's views and ``traceq.events``: names as strings, durations, the step of every row,
and the GPU-side copy of a step range kept apart from the CPU range."""

from __future__ import annotations

import polars as pl

import traceq
from tests.builders import PID, kernel, launch, step, trace


def _gpu_step(start_ns: int, end_ns: int, n: int) -> dict[str, object]:
    # Kineto's gpu_user_annotation: the step range projected onto a stream (a device, no thread).
    return {
        "kind": "range",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": f"ProfilerStep#{n}",
        "pid": PID,
        "device": 0,
        "stream": 7,
    }


T = trace(
    step(0, 100, 1),
    step(100, 200, 2),
    _gpu_step(5, 95, 1),
    launch(10, 12, corr=1),
    kernel(20, 50, "gemm", corr=1),
    launch(110, 112, corr=2),
    kernel(150, 230, "add", corr=2),  # starts in step 2, runs past it
    launch(250, 252, corr=3),
    kernel(260, 270, "gemm", corr=3),  # after every step
)


def test_views_give_names_as_strings_and_durations() -> None:
    kernels = T.kernels
    assert kernels.schema["name"] == pl.String
    assert kernels.filter(pl.col("name").str.contains("gem")).get_column("dur_ns").to_list() == [30, 10]
    assert T.api.get_column("dur_ns").to_list() == [2, 2, 2]


def test_the_gpu_copy_of_a_step_range_is_its_own_view_so_a_per_step_join_counts_once() -> None:
    assert T.ranges.get_column("name").to_list() == ["ProfilerStep#1", "ProfilerStep#2"]
    assert T.gpu_ranges.select("name", "device", "tid").rows() == [("ProfilerStep#1", 0, None)]


def test_every_row_inside_a_step_window_carries_its_step() -> None:
    table = traceq.events(T)
    assert table.columns[-2:] == ["dur_ns", "step"]
    steps = dict(
        zip(
            table.select(pl.concat_str("kind", pl.lit("@"), "start_ns")).to_series().to_list(),
            table.get_column("step").to_list(),
            strict=True,
        )
    )
    assert steps["kernel@20"] == 1 and steps["cuda_api@10"] == 1
    assert steps["kernel@150"] == 2 and steps["cuda_api@110"] == 2
    assert steps["kernel@260"] is None and steps["cuda_api@250"] is None
    assert steps["range@0"] == 1 and steps["range@100"] == 2
    assert T.events.columns == table.columns[:-2]  # the trace's own table is unchanged
