"""The named tables: each row's step, the views of the event table, the analysis run only when a
table needs it, and queries that fail as one clear error."""

from __future__ import annotations

import pytest

import traceq
from traceq.errors import InvalidArgumentError
from traceq.exports.tables import TABLES

from ..builders import api, kernel, launch, step, trace

# Two steps of one process; a kernel in each, one after the last; a sync call on the CPU in step 2.
TRACE = trace(
    step(0, 1000, 1),
    step(1000, 2000, 2),
    launch(10, 20, corr=1),
    kernel(100, 300, "gemm", corr=1),
    launch(1010, 1020, corr=2),
    kernel(1500, 1600, "relu", corr=2),
    api("cudaStreamSynchronize", 1600, 1900),
    launch(1950, 1960, corr=3),
    kernel(2500, 2600, "late", corr=3),
)


def test_every_row_knows_its_step_gpu_rows_by_device_cpu_rows_by_process() -> None:
    tables = traceq.tables(TRACE)
    kernels = tables.frame("kernels").select("name", "step", "dur_ns").rows()
    assert kernels == [("gemm", 1, 200), ("relu", 2, 100), ("late", None, 100)]
    calls = tables.frame("api").select("name", "start_ns", "step").rows()
    assert calls == [
        ("cudaLaunchKernel", 10, 1),
        ("cudaLaunchKernel", 1010, 2),
        ("cudaStreamSynchronize", 1600, 2),
        ("cudaLaunchKernel", 1950, 2),
    ]


def test_gaps_carry_their_step_and_sum_to_the_idle_time() -> None:
    tables = traceq.tables(TRACE)
    gaps = tables.frame("gaps")
    # The gap from 1600 starts in step 2 and runs past its end: its step is where it starts.
    assert gaps.select("start_ns", "end_ns", "step", "in_steps_ns").rows() == [
        (0, 100, 1, 100),
        (300, 1500, 1, 1200),
        (1600, 2500, 2, 400),
    ]
    steps = tables.frame("steps")
    assert steps.get_column("idle_ns").sum() == gaps.get_column("in_steps_ns").sum()


def test_text_columns_are_strings_so_like_works() -> None:
    found = traceq.sql(TRACE, "SELECT name FROM events WHERE name LIKE 'cuda%Sync%'")
    assert found.rows() == [("cudaStreamSynchronize",)]


def test_a_query_over_the_events_never_runs_the_analysis() -> None:
    tables = traceq.tables(TRACE)
    tables.sql("SELECT count(*) AS n FROM kernels WHERE step = 2")
    assert tables._analysis is None
    tables.sql("SELECT count(*) AS n FROM gaps")
    assert tables._analysis is not None


def test_every_registered_table_builds_on_a_trace_without_steps() -> None:
    plain = trace(launch(0, 10, corr=1), kernel(50, 60, corr=1))
    tables = traceq.tables(plain)
    for name in TABLES:
        tables.frame(name)
    assert tables.frame("kernels").get_column("step").to_list() == [None]


@pytest.mark.parametrize(
    ("query", "says"),
    [("SELECT nope FROM gaps", "nope"), ("SELECT * FROM nowhere", "nowhere"), ("SELEC 1", "the query failed")],
)
def test_a_failing_query_is_one_invalid_argument_error(query: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match="the query failed") as caught:
        traceq.sql(TRACE, query)
    assert says in caught.value.one_line() and "\n" not in caught.value.one_line()


def test_a_steps_gpu_side_copy_is_in_gpu_ranges_so_a_join_over_ranges_counts_each_step_once() -> None:
    # Kineto draws ProfilerStep#N twice: the CPU range, and a gpu_user_annotation on the stream
    # (kind 'range', a device, no thread).
    gpu_copy = {**step(100, 1000, 1), "tid": None, "device": 0, "stream": 7}
    tables = traceq.tables(trace(step(0, 1000, 1), gpu_copy, launch(10, 20, corr=1), kernel(100, 300, "gemm", corr=1)))

    assert tables.frame("ranges").select("name", "start_ns").rows() == [("ProfilerStep#1", 0)]
    assert tables.frame("gpu_ranges").select("name", "start_ns", "device").rows() == [("ProfilerStep#1", 100, 0)]
    per_step = tables.sql(
        "SELECT r.name, count(*) AS kernels FROM ranges r JOIN kernels k ON k.step = 1 GROUP BY r.name"
    )
    assert per_step.rows() == [("ProfilerStep#1", 1)]
