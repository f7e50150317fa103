"""The Kineto / Chrome-trace importer, specified by tiny inline traces.

Each test writes a trace of a few events and states the rows (or the error) it must give.  Real
traces are in ``test_real_traces.py``; the fast-path/lenient-path equivalence and the repairs in
``test_two_parsers.py``; the gzip inflater in ``test_trace_bytes.py``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceq import schema
from traceq.errors import CorruptTraceError, EmptyTraceError, UnsupportedFormatError
from traceq.importers import read_file
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.result import ImportResult

API_PID = 4242
API_TID = 4243


def write(tmp_path: Path, trace: Any, name: str = "trace.json", *, gz: bool = False) -> Path:
    """Write ``trace`` (a JSON-able value, or raw text) to ``tmp_path/name``."""
    text = trace if isinstance(trace, str) else json.dumps(trace, indent=1)
    data = text.encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def load(tmp_path: Path, trace: Any, **kwargs: Any) -> tuple[pl.DataFrame, ImportResult]:
    result = read_kineto(write(tmp_path, trace, **kwargs))
    return schema.to_polars(result.events), result


def pick(df: pl.DataFrame, *columns: str) -> list[dict[str, Any]]:
    return df.select(columns).with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String)).to_dicts()


def stats(result: ImportResult) -> dict[str, tuple[int, int, dict[str, int]]]:
    return {c.category: (c.events, c.rows, dict(c.skipped)) for c in result.stats.counts}


def x(
    cat: str | None, name: str, ts: float, dur: float, pid: Any = API_PID, tid: Any = API_TID, **args: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if cat is not None:
        event["cat"] = cat
    if args:
        event["args"] = args
    return event


def launch(ts: float, corr: int, name: str = "cudaLaunchKernel", cat: str = "cuda_runtime") -> dict[str, Any]:
    return x(cat, name, ts, 5, correlation=corr, cbid=211)


def kernel(ts: float, dur: float, corr: int, name: str = "gemm", stream: int = 7, **args: Any) -> dict[str, Any]:
    return x("kernel", name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **args)


# --------------------------------------------------------------------------------------------
# Times


def test_complete_event_times_are_integer_ns_on_the_trace_clock(tmp_path: Path) -> None:
    df, result = load(tmp_path, {"traceEvents": [x("cpu_op", "aten::mm", 1000.5, 2.25)]})
    assert pick(df, "kind", "name", "start_ns", "end_ns", "pid", "tid", "category", "source") == [
        {
            "kind": "cpu_op",
            "name": "aten::mm",
            "start_ns": 1_000_500,
            "end_ns": 1_002_750,
            "pid": API_PID,
            "tid": API_TID,
            "category": "cpu_op",
            "source": str(tmp_path / "trace.json"),
        }
    ]
    assert result.meta.clock_offset_ns is None  # small relative ts without a base: unknown anchor


def test_pytorch_24_fractional_ts_is_exact_and_base_time_is_the_clock_offset(tmp_path: Path) -> None:
    trace = {
        "schemaVersion": 1,
        "displayTimeUnit": "ns",  # a display hint only: ts stays in µs
        "baseTimeNanoseconds": 1711964646000000000,
        "traceEvents": [
            x("cpu_op", "op", 4458676522690.655, 156.777),
            x("kernel", "k", 4458676983543.183, 41.407, 0, 7),
        ],
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "start_ns", "end_ns") == [
        {"start_ns": 4458676522690655, "end_ns": 4458676522847432},
        {"start_ns": 4458676983543183, "end_ns": 4458676983584590},
    ]
    assert result.meta.clock_offset_ns == 1711964646000000000
    assert result.meta.format_version == "schemaVersion 1, PyTorch >= 2.4 layout (relative ts, baseTimeNanoseconds)"
    assert result.meta.producer == "PyTorch profiler (Kineto)"


def test_epoch_microsecond_integers_convert_exactly_and_anchor_at_zero(tmp_path: Path) -> None:
    # 1610366387140599 * 1000 is not representable as a double; the importer must not round it.
    df, result = load(tmp_path, {"schemaVersion": 1, "traceEvents": [x("cpu_op", "op", 1610366387140599, 14)]})
    assert pick(df, "start_ns", "end_ns") == [{"start_ns": 1610366387140599000, "end_ns": 1610366387140613000}]
    assert result.meta.clock_offset_ns == 0
    assert result.meta.format_version == "schemaVersion 1, PyTorch 1.12-2.3 layout (absolute epoch µs)"


def test_negative_duration_is_clamped_to_zero_and_warned(tmp_path: Path) -> None:
    df, result = load(tmp_path, {"traceEvents": [x("kernel", "k", 10, -3, 0, 7)]})
    assert pick(df, "start_ns", "end_ns") == [{"start_ns": 10_000, "end_ns": 10_000}]
    assert "1 X events have a negative dur; clamped to 0" in result.meta.warnings


def test_complete_event_without_dur_is_zero_length_and_warned(tmp_path: Path) -> None:
    df, result = load(
        tmp_path, {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 5}]}
    )
    assert pick(df, "start_ns", "end_ns") == [{"start_ns": 5000, "end_ns": 5000}]
    assert "1 X events have no dur; read as zero-length" in result.meta.warnings


def test_events_without_usable_ts_are_skipped_with_reasons(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            x("cpu_op", "ok", 1, 1),
            {"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 1, "dur": 1},
            x("cpu_op", "far future", 9e15, 1),
        ]
    }
    df, result = load(tmp_path, trace)
    assert df["name"].cast(pl.String).to_list() == ["ok"]
    assert stats(result)["cpu_op"] == (3, 1, {"no ts": 1, "ts or dur out of range": 1})


def test_rows_are_sorted_by_start_then_end(tmp_path: Path) -> None:
    trace = {"traceEvents": [x("cpu_op", "c", 5, 1), x("cpu_op", "b", 1, 9), x("cpu_op", "a", 1, 2)]}
    df, _ = load(tmp_path, trace)
    assert df["name"].cast(pl.String).to_list() == ["a", "b", "c"]


# --------------------------------------------------------------------------------------------
# Categories and kinds


@pytest.mark.parametrize(
    ("cat", "kind"),
    [
        ("kernel", "kernel"),
        ("Kernel", "kernel"),
        ("gpu_memcpy", "memcpy"),
        ("Memcpy", "memcpy"),
        ("gpu_memset", "memset"),
        ("Memset", "memset"),
        ("cuda_runtime", "cuda_api"),
        ("Runtime", "cuda_api"),
        ("cuda_driver", "cuda_api"),
        ("xpu_runtime", "cuda_api"),
        ("privateuse1_driver", "cuda_api"),
        ("cuda_sync", "gpu_sync"),
        ("cpu_op", "cpu_op"),
        ("Operator", "cpu_op"),
        ("user_annotation", "range"),
        ("gpu_user_annotation", "range"),
        ("gpu_user_Annotation", "range"),
        ("python_function", "python"),
        ("overhead", "other"),
        ("Trace", "other"),
        ("something_new", "other"),
        ("cpu_instant_event", "other"),  # only as ph=i is it an instant
        (None, "other"),
    ],
)
def test_category_decides_the_kind_case_insensitively(tmp_path: Path, cat: str | None, kind: str) -> None:
    df, _ = load(tmp_path, {"traceEvents": [x(cat, "e", 1, 1)]})
    assert pick(df, "kind", "category") == [{"kind": kind, "category": cat}]


def test_hip_launches_are_cuda_api(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            launch(1, 117, "hipLaunchKernel"),
            launch(9, 118, "hipExtModuleLaunchKernel"),
            kernel(20, 3, 117, "Cijk_gemm"),
            kernel(30, 3, 118, "elementwise"),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "name", "correlation", "pid") == [
        {"kind": "cuda_api", "name": "hipLaunchKernel", "correlation": 117, "pid": API_PID},
        {"kind": "cuda_api", "name": "hipExtModuleLaunchKernel", "correlation": 118, "pid": API_PID},
        {"kind": "kernel", "name": "Cijk_gemm", "correlation": 117, "pid": API_PID},
        {"kind": "kernel", "name": "elementwise", "correlation": 118, "pid": API_PID},
    ]


# --------------------------------------------------------------------------------------------
# GPU rows: device, stream, pid of the launching process, kernel details


def test_kernel_row_takes_device_stream_and_the_launching_pid(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            launch(100, 57541),
            kernel(
                120,
                41.5,
                57541,
                "void cudnn::bn_bw<float>(float, float)",
                stream=7,
                context=1,
                grid=[512, 2, 1],
                block=[128, 1, 1],
                **{"registers per thread": 40, "shared memory": 400, "External id": 12353, "graph id": 3},
            ),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(
        df.filter(pl.col("kind") == "kernel"), *schema.COLUMN_NAMES[:9], "context", "external_id", "graph_id"
    ) == [
        {
            "kind": "kernel",
            "start_ns": 120_000,
            "end_ns": 161_500,
            "name": "void cudnn::bn_bw<float>(float, float)",
            "pid": API_PID,
            "tid": None,
            "device": 0,
            "stream": 7,
            "correlation": 57541,
            "context": 1,
            "external_id": 12353,
            "graph_id": 3,
        }
    ]
    kernel_row = df.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert [kernel_row[f"grid_{a}"] for a in "xyz"] == [512, 2, 1]
    assert [kernel_row[f"block_{a}"] for a in "xyz"] == [128, 1, 1]
    assert (kernel_row["registers_per_thread"], kernel_row["shared_memory_bytes"]) == (40, 400)


def test_device_and_stream_come_from_pid_and_tid_when_args_lack_them(tmp_path: Path) -> None:
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 14, "ts": 1, "dur": 1}
    df, _ = load(tmp_path, {"traceEvents": [event]})
    assert pick(df, "device", "stream", "pid", "tid") == [{"device": 3, "stream": 14, "pid": None, "tid": None}]


def test_gpu_pid_without_a_matching_launch_is_the_dominant_api_pid(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            x("cuda_runtime", "cudaMalloc", 1, 1, pid=10, correlation=1),
            x("cuda_runtime", "cudaMalloc", 2, 1, pid=20, correlation=2),
            x("cuda_runtime", "cudaMalloc", 3, 1, pid=20, correlation=3),
            kernel(10, 1, 999),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert df.filter(pl.col("kind") == "kernel")["pid"].to_list() == [20]


def test_gpu_pid_is_null_when_no_process_launched_anything(tmp_path: Path) -> None:
    df, _ = load(tmp_path, {"traceEvents": [kernel(10, 1, 5)]})
    assert pick(df, "pid", "device", "stream") == [{"pid": None, "device": 0, "stream": 7}]


@pytest.mark.parametrize(
    ("name", "copy_kind"),
    [
        ("Memcpy HtoD (Pinned -> Device)", "HtoD"),
        ("Memcpy DtoH (Device -> Pageable)", "DtoH"),
        ("Memcpy DtoD (Device -> Device)", "DtoD"),
        ("Memcpy PtoP (Device -> Device)", "PtoP"),
        ("Memcpy HtoH (Pinned -> Pinned)", "HtoH"),
        ("Memcpy Something", "unknown"),
        ("copy", "unknown"),
    ],
)
def test_memcpy_copy_kind_comes_from_the_name_and_bytes_from_args(tmp_path: Path, name: str, copy_kind: str) -> None:
    event = x("gpu_memcpy", name, 1, 2, pid=0, tid=7, device=0, stream=7, correlation=11, bytes=19267584)
    df, _ = load(tmp_path, {"traceEvents": [event]})
    assert pick(df, "kind", "copy_kind", "bytes") == [{"kind": "memcpy", "copy_kind": copy_kind, "bytes": 19267584}]


def test_memset_has_bytes_and_no_copy_kind(tmp_path: Path) -> None:
    event = x("gpu_memset", "Memset (Device)", 1, 2, pid=0, tid=7, device=0, stream=7, correlation=3, bytes=512)
    df, _ = load(tmp_path, {"traceEvents": [event]})
    assert pick(df, "kind", "copy_kind", "bytes") == [{"kind": "memset", "copy_kind": None, "bytes": 512}]


def test_cuda_sync_rows_say_what_they_waited_for(tmp_path: Path) -> None:
    def sync(name: str, ts: float, stream: int, tid: int) -> dict[str, Any]:
        return x(
            "cuda_sync", name, ts, 1, pid=0, tid=tid, cuda_sync_kind=name, stream=stream, device=0, correlation=int(ts)
        )

    trace = {
        "traceEvents": [
            sync("Stream Sync", 1, 7, 7),
            sync("Event Sync", 2, 7, 7),
            sync("Context Sync", 3, 4294967295, -1),  # not stream-specific
            sync("Stream Wait Event", 4, 20, 20),
            sync("Some Future Sync", 5, 7, 7),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "sync_kind", "stream", "tid") == [
        {"kind": "gpu_sync", "sync_kind": "stream_synchronize", "stream": 7, "tid": None},
        {"kind": "gpu_sync", "sync_kind": "event_synchronize", "stream": 7, "tid": None},
        {"kind": "gpu_sync", "sync_kind": "context_synchronize", "stream": None, "tid": None},
        {"kind": "gpu_sync", "sync_kind": "stream_wait_event", "stream": 20, "tid": None},
        {"kind": "gpu_sync", "sync_kind": "unknown", "stream": 7, "tid": None},
    ]


def test_nccl_and_rccl_kernels_and_kernels_with_collective_args_are_comm(tmp_path: Path) -> None:
    collective: dict[str, Any] = {"Collective name": "allreduce"}
    trace = {
        "traceEvents": [
            kernel(1, 1, 1, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
            kernel(2, 1, 2, "ncclDevKernel_SendRecv(ncclDevComm*)"),
            kernel(3, 1, 3, "NCCLkernel_upper_case"),
            kernel(4, 1, 4, "custom_allreduce", **collective),
            kernel(5, 1, 5, "gemm"),
            x("cpu_op", "record_param_comms", 6, 1, **collective),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert df.sort("start_ns")["is_comm"].to_list() == [True, True, True, True, False, False]


def test_gpu_user_annotation_is_a_gpu_side_range(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            launch(1, 1),
            x("user_annotation", "ProfilerStep#1", 0, 100),
            x("gpu_user_annotation", "ProfilerStep#1", 10, 50, pid=0, tid=7, **{"External id": 1}),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df.filter(pl.col("kind") == "range"), "start_ns", "pid", "tid", "device", "stream") == [
        {"start_ns": 0, "pid": API_PID, "tid": API_TID, "device": None, "stream": None},
        {"start_ns": 10_000, "pid": API_PID, "tid": None, "device": 0, "stream": 7},
    ]


def test_non_numeric_pid_and_tid_become_null_and_numeric_strings_ints(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Trace",
                "name": "PyTorch Profiler (0)",
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "ts": 1,
                "dur": 9,
            },
            {
                "ph": "i",
                "s": "g",
                "name": "Iteration Start: PyTorch Profiler",
                "pid": "Traces",
                "tid": "Trace PyTorch Profiler",
                "ts": 1,
            },
            {"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 25738, "tid": "25738", "ts": 2, "dur": 1},
            {"ph": "X", "cat": "overhead", "name": "Buffer Flush", "pid": -1, "tid": 0, "ts": 3, "dur": 1},
            {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 20},
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "name", "pid", "tid") == [
        {"kind": "instant", "name": "Iteration Start: PyTorch Profiler", "pid": None, "tid": None},
        {"kind": "other", "name": "PyTorch Profiler (0)", "pid": None, "tid": None},
        {"kind": "cpu_op", "name": "aten::empty", "pid": 25738, "tid": 25738},
        {"kind": "other", "name": "Buffer Flush", "pid": -1, "tid": 0},
        {"kind": "instant", "name": "Record Window End", "pid": None, "tid": None},
    ]


# --------------------------------------------------------------------------------------------
# Phases


def test_instants_are_zero_length_instant_rows(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 1,
                "tid": 2,
                "ts": 5,
                "args": {"Bytes": 4},
            },
            {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 6},  # 1.9: no cat
            {"ph": "I", "name": "deprecated spelling", "pid": 1, "tid": 2, "ts": 7},
        ]
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "kind", "start_ns", "end_ns", "category") == [
        {"kind": "instant", "start_ns": 5000, "end_ns": 5000, "category": "cpu_instant_event"},
        {"kind": "instant", "start_ns": 6000, "end_ns": 6000, "category": None},
        {"kind": "instant", "start_ns": 7000, "end_ns": 7000, "category": None},
    ]
    assert stats(result) == {"cpu_instant_event": (1, 1, {}), "ph=I": (1, 1, {}), "ph=i": (1, 1, {})}


def test_begin_end_pairs_match_by_nesting_per_thread(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"ph": "B", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
            {"ph": "B", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
            {"ph": "B", "cat": "cpu_op", "name": "other thread", "pid": 1, "tid": 2, "ts": 3},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 4},  # closes "inner", the most recent open B
            {"ph": "E", "pid": 1, "tid": 2, "ts": 5, "args": {"External id": 77}},  # args of E merge in
            {"ph": "E", "pid": 1, "tid": 1, "ts": 9},  # closes "outer"
        ]
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "kind", "name", "start_ns", "end_ns", "tid", "external_id") == [
        {"kind": "range", "name": "outer", "start_ns": 0, "end_ns": 9000, "tid": 1, "external_id": None},
        {"kind": "cpu_op", "name": "inner", "start_ns": 2000, "end_ns": 4000, "tid": 1, "external_id": None},
        {"kind": "cpu_op", "name": "other thread", "start_ns": 3000, "end_ns": 5000, "tid": 2, "external_id": 77},
    ]
    assert stats(result) == {
        "cpu_op": (2, 2, {}),
        "ph=E": (3, 0, {"E merged into its B row": 3}),
        "user_annotation": (1, 1, {}),
    }


def test_a_begin_row_takes_the_device_args_its_end_carries(tmp_path: Path) -> None:
    # Device args (device, stream, bytes, grid...) are kept apart from the other columns while
    # compacting; a B/E pair still merges them like any other arg, from either side.
    trace = {
        "traceEvents": [
            {"ph": "B", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1},
            {"ph": "E", "pid": 0, "tid": 7, "ts": 2, "args": {"device": 0, "stream": 7, "bytes": 64}},
            {"ph": "B", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "args": {"grid": [2, 1, 1]}},
            {"ph": "E", "pid": 0, "tid": 7, "ts": 4, "args": {"block": [128, 1, 1], "device": 0, "stream": 7}},
            x("cpu_op", "op", 5, 1, pid=9, tid=9),
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "device", "stream", "bytes", "grid_x", "block_x") == [
        {"kind": "memcpy", "device": 0, "stream": 7, "bytes": 64, "grid_x": None, "block_x": None},
        {"kind": "kernel", "device": 0, "stream": 7, "bytes": None, "grid_x": 2, "block_x": 128},
        {"kind": "cpu_op", "device": None, "stream": None, "bytes": None, "grid_x": None, "block_x": None},
    ]


def test_unpaired_end_and_never_closed_begin_are_skipped_with_reasons(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"ph": "E", "pid": 1, "tid": 1, "ts": 1},
            {"ph": "B", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 2},
            {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 3},
            {"ph": "B", "cat": "cpu_op", "name": "never closed", "pid": 1, "tid": 1, "ts": 4},
        ]
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "name", "start_ns", "end_ns") == [{"name": "ok", "start_ns": 2000, "end_ns": 3000}]
    assert stats(result) == {
        "cpu_op": (3, 1, {"E merged into its B row": 1, "B never closed": 1}),
        "ph=E": (1, 0, {"unpaired E": 1}),
    }


def test_metadata_is_skipped_but_names_processes_and_threads(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"name": "process_name", "ph": "M", "ts": 0, "pid": 7, "tid": 0, "args": {"name": "python3.10"}},
            {"name": "thread_name", "ph": "M", "ts": 0, "pid": 7, "tid": 8, "args": {"name": "thread 8 (python3.10)"}},
            {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": 7, "tid": 0, "args": {"sort_index": 1}},
            x("cpu_op", "op", 1, 1, pid=7, tid=8),
        ]
    }
    df, result = load(tmp_path, trace)
    assert df.height == 1
    assert stats(result)["ph=M"] == (3, 0, {"metadata": 3})
    assert result.meta.properties["process_name[7]"] == "python3.10"
    assert result.meta.properties["thread_name[7/8]"] == "thread 8 (python3.10)"


def test_counters_and_other_phases_are_skipped_by_phase(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            x("cpu_op", "op", 1, 1),
            {"ph": "C", "cat": "hardware_counters", "name": "sm_util", "pid": 1, "ts": 1, "args": {"value": 3}},
            {"ph": "b", "cat": "async", "name": "a", "id": 1, "pid": 1, "ts": 1},
            {"ph": "O", "name": "obj", "id": "0x1", "pid": 1, "ts": 2},
            {"name": "no phase", "pid": 1, "ts": 3},
        ]
    }
    _, result = load(tmp_path, trace)
    assert stats(result) == {
        "async": (1, 0, {"unsupported phase b": 1}),
        "cpu_op": (1, 1, {}),
        "hardware_counters": (1, 0, {"unsupported phase C": 1}),
        "ph=(none)": (1, 0, {"no ph": 1}),
        "ph=O": (1, 0, {"unsupported phase O": 1}),
    }


# --------------------------------------------------------------------------------------------
# Flows and correlation


def test_launch_flows_fill_correlation_when_args_lack_it(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            x("cuda_runtime", "cudaLaunchKernel", 10, 5),
            {"ph": "s", "id": 57, "pid": API_PID, "tid": API_TID, "ts": 10, "cat": "ac2g", "name": "ac2g"},
            x("kernel", "k", 20, 3, pid=0, tid=7),
            {"ph": "f", "id": 57, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            x("cuda_runtime", "cudaMemcpyAsync", 30, 5),
            {"ph": "s", "id": "0x3a", "pid": API_PID, "tid": API_TID, "ts": 30, "cat": "ac2g", "name": "ac2g"},
            # an f without bp binds to the next slice on its track
            {"ph": "f", "id": "0x3a", "pid": 0, "tid": 7, "ts": 39, "cat": "ac2g", "name": "ac2g"},
            x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 40, 3, pid=0, tid=7),
        ]
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "kind", "correlation", "pid") == [
        {"kind": "cuda_api", "correlation": 57, "pid": API_PID},
        {"kind": "kernel", "correlation": 57, "pid": API_PID},
        {"kind": "cuda_api", "correlation": 58, "pid": API_PID},
        {"kind": "memcpy", "correlation": 58, "pid": API_PID},
    ]
    assert stats(result)["ac2g"] == (4, 0, {"flow": 4})


def test_correlation_arg_wins_over_the_flow_id(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            launch(10, 5),
            {"ph": "s", "id": 99, "pid": API_PID, "tid": API_TID, "ts": 10, "cat": "ac2g", "name": "ac2g"},
            kernel(20, 3, 5),
            {"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    }
    df, _ = load(tmp_path, trace)
    assert df["correlation"].to_list() == [5, 5]


def test_fwdbwd_flows_are_skipped_and_never_fill_correlation(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            x("cuda_runtime", "cudaLaunchKernel", 10, 5),
            {"ph": "s", "id": 1, "pid": API_PID, "tid": API_TID, "ts": 10, "cat": "fwdbwd", "name": "fwdbwd"},
        ]
    }
    df, result = load(tmp_path, trace)
    assert df["correlation"].to_list() == [None]
    assert stats(result)["fwdbwd"] == (1, 0, {"flow": 1})


# --------------------------------------------------------------------------------------------
# Eras


def test_pytorch_18_layout(tmp_path: Path) -> None:
    """Operator/Runtime/Kernel/Memcpy categories, string tids, ``"stream 7"``, ``async`` flows, ``external id``."""
    trace = {
        "schemaVersion": 1,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Operator",
                "name": "aten::conv2d",
                "pid": 118664,
                "tid": "1441273664",
                "ts": 1610366387190000,
                "dur": 900,
                "args": {"External id": 874},
            },
            {
                "ph": "X",
                "cat": "Runtime",
                "name": "cudaMemcpyAsync",
                "pid": 118664,
                "tid": "1441273664",
                "ts": 1610366387192129,
                "dur": 2466,
                "args": {"cbid": 41, "correlation": 11, "external id": 874, "external ts": 1610366387192108},
            },
            {
                "ph": "s",
                "id": 11,
                "pid": 118664,
                "tid": 1441273664,
                "ts": 1610366387192129,
                "cat": "async",
                "name": "launch",
            },
            {
                "ph": "X",
                "cat": "Memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": "stream 7",
                "ts": 1610366387192352,
                "dur": 2330,
                "args": {
                    "device": 0,
                    "context": 1,
                    "stream": 7,
                    "correlation": 11,
                    "external id": 874,
                    "bytes": 19267584,
                },
            },
            {
                "ph": "f",
                "id": 11,
                "pid": 0,
                "tid": "stream 7",
                "ts": 1610366387192352,
                "cat": "async",
                "name": "launch",
                "bp": "e",
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "implicit_convolve_sgemm",
                "pid": 0,
                "tid": "stream 7",
                "ts": 1610366388630527,
                "dur": 1009,
                "args": {
                    "queued": 0,
                    "device": 0,
                    "context": 1,
                    "stream": 7,
                    "correlation": 627,
                    "external id": 883,
                    "grid": [12544, 2, 1],
                    "block": [8, 8, 1],
                },
            },
        ],
    }
    df, result = load(tmp_path, trace)
    assert pick(df, "kind", "pid", "tid", "device", "stream", "correlation", "external_id", "copy_kind") == [
        {
            "kind": "cpu_op",
            "pid": 118664,
            "tid": 1441273664,
            "device": None,
            "stream": None,
            "correlation": None,
            "external_id": 874,
            "copy_kind": None,
        },
        {
            "kind": "cuda_api",
            "pid": 118664,
            "tid": 1441273664,
            "device": None,
            "stream": None,
            "correlation": 11,
            "external_id": 874,
            "copy_kind": None,
        },
        {
            "kind": "memcpy",
            "pid": 118664,
            "tid": None,
            "device": 0,
            "stream": 7,
            "correlation": 11,
            "external_id": 874,
            "copy_kind": "HtoD",
        },
        {
            "kind": "kernel",
            "pid": 118664,
            "tid": None,
            "device": 0,
            "stream": 7,
            "correlation": 627,
            "external_id": 883,
            "copy_kind": None,
        },
    ]
    assert result.meta.format_version == (
        'schemaVersion 1, PyTorch 1.8-1.9 layout (Operator/Runtime/Kernel categories, "stream N" tids, epoch µs)'
    )


def test_pytorch_18_stream_string_alone_sets_the_stream(tmp_path: Path) -> None:
    event = {"ph": "X", "cat": "Kernel", "name": "k", "pid": 1, "tid": "stream 23", "ts": 1, "dur": 1}
    df, _ = load(tmp_path, {"traceEvents": [event]})
    assert pick(df, "device", "stream", "tid") == [{"device": 1, "stream": 23, "tid": None}]


def test_legacy_user_category_on_a_stream_is_a_gpu_range(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "User", "name": "step", "pid": 0, "tid": "stream 7", "ts": 1, "dur": 5},
            {"ph": "X", "cat": "User", "name": "cpu range", "pid": 5, "tid": 6, "ts": 2, "dur": 5},
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "device", "stream", "tid") == [
        {"kind": "range", "device": 0, "stream": 7, "tid": None},
        {"kind": "range", "device": None, "stream": None, "tid": 6},
    ]


def test_legacy_user_category_with_stream_args_is_a_gpu_range(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "User", "name": "gpu", "pid": 0, "tid": 3, "ts": 1, "dur": 5, "args": {"stream": 9}},
            {"ph": "X", "cat": "User", "name": "cpu range", "pid": 5, "tid": 6, "ts": 2, "dur": 5},
        ]
    }
    df, _ = load(tmp_path, trace)
    assert pick(df, "kind", "device", "stream", "tid") == [
        {"kind": "range", "device": 0, "stream": 9, "tid": None},
        {"kind": "range", "device": None, "stream": None, "tid": 6},
    ]


def test_distributed_info_after_trace_events_gives_rank_and_world_size(tmp_path: Path) -> None:
    text = (
        '{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, '
        '"ts": 1, "dur": 1}], "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, '
        '"pg_config": [{"pg_name": "0", "ranks": [0, 1]}, {"pg_name": "1", "ranks": [2, 3]}], '
        '"nccl_version": "unknown"}, '
        '"traceName": "x.json"}'
    )
    df, result = load(tmp_path, text)
    assert df["rank"].to_list() == [3]
    assert (result.meta.rank, result.meta.world_size) == (3, 8)
    assert result.meta.properties["distributedInfo.backend"] == "nccl"
    assert result.meta.properties["traceName"] == "x.json"


def test_rank_is_null_without_distributed_info(tmp_path: Path) -> None:
    df, result = load(tmp_path, {"traceEvents": [x("cpu_op", "op", 1, 1)]})
    assert df["rank"].to_list() == [None]
    assert result.meta.rank is None


def test_device_properties_describe_the_gpus(tmp_path: Path) -> None:
    trace = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 1,
                "name": "NVIDIA A100-SXM4-80GB",
                "totalGlobalMem": 84990623744,
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
            },
            {"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85, "computeMajor": 9, "computeMinor": 0, "numSms": 132},
        ],
        "cupti_version": 18,
        "cuda_runtime_version": 12000,
        "traceEvents": [x("cpu_op", "op", 1, 1)],
    }
    _, result = load(tmp_path, trace)
    assert [(g.device, g.name, g.sm_count, g.memory_bytes, g.compute_capability) for g in result.meta.gpus] == [
        (0, "NVIDIA H100", 132, 85, "9.0"),
        (1, "NVIDIA A100-SXM4-80GB", 108, 84990623744, "8.0"),
    ]
    assert result.meta.properties["cupti_version"] == "18"
    assert result.meta.properties["cuda_runtime_version"] == "12000"


# --------------------------------------------------------------------------------------------
# Containers and compression


def test_bare_array_form_is_a_chrome_trace(tmp_path: Path) -> None:
    df, result = load(tmp_path, [x("cpu_op", "op", 1, 1), x("kernel", "k", 2, 1, 0, 7)])
    assert df.height == 2
    assert result.meta.format_version == "PyTorch 1.12-2.3 layout (absolute epoch µs) (array form)"


def test_plain_chrome_trace_is_not_called_kineto(tmp_path: Path) -> None:
    _, result = load(tmp_path, [{"ph": "X", "cat": "render", "name": "paint", "pid": 1, "tid": 1, "ts": 1, "dur": 2}])
    assert result.meta.producer == "Chrome trace"


@pytest.mark.parametrize("ending", ["},\n", "}\n", "}", "},"])
def test_array_without_closing_bracket_keeps_every_event(tmp_path: Path, ending: str) -> None:
    """Crashed writers leave the array open; the spec says readers must accept that."""
    text = '[\n{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},\n'
    text += '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1' + ending
    df, result = load(tmp_path, text)
    assert df["name"].cast(pl.String).to_list() == ["a", "b"]
    assert any("no closing ']'" in w for w in result.meta.warnings)


def test_array_cut_inside_its_last_event_keeps_the_complete_ones(tmp_path: Path) -> None:
    text = '[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},\n{"ph": "X", "na'
    df, result = load(tmp_path, text)
    assert df["name"].cast(pl.String).to_list() == ["a"]
    assert any("cut off inside its last event" in w for w in result.meta.warnings)


def test_gzip_is_recognised_by_content_not_suffix(tmp_path: Path) -> None:
    trace = {"traceEvents": [x("cpu_op", "op", 1, 1)]}
    gz_named_json = write(tmp_path, trace, "a.json", gz=True)
    json_named_gz = write(tmp_path, trace, "b.json.gz")
    assert read_kineto(gz_named_json).events.num_rows == 1
    assert read_kineto(json_named_gz).events.num_rows == 1


def test_dispatch_reads_kineto_json(tmp_path: Path) -> None:
    path = write(tmp_path, {"traceEvents": [x("cpu_op", "op", 1, 1)]}, "t.pt.trace.json.gz", gz=True)
    assert read_file(path).meta.format == "kineto-json"


# --------------------------------------------------------------------------------------------
# Accounting


def test_every_event_is_a_row_or_a_skip_with_a_reason(tmp_path: Path) -> None:
    trace = {
        "traceEvents": [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python"}},
            launch(10, 1),
            {"ph": "s", "id": 1, "pid": API_PID, "tid": API_TID, "ts": 10, "cat": "ac2g", "name": "ac2g"},
            kernel(20, 3, 1),
            {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            {"ph": "C", "name": "mem", "pid": 1, "ts": 5, "args": {"v": 1}},
        ]
    }
    _, result = load(tmp_path, trace)
    assert stats(result) == {
        "ac2g": (2, 0, {"flow": 2}),
        "cuda_runtime": (1, 1, {}),
        "kernel": (1, 1, {}),
        "ph=C": (1, 0, {"unsupported phase C": 1}),
        "ph=M": (1, 0, {"metadata": 1}),
    }
    assert result.stats.events == 6
    assert result.stats.rows == result.events.num_rows == 2


# --------------------------------------------------------------------------------------------
# Errors: one line, the path, and what to do


def test_truncated_gzip_is_a_corrupt_trace(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps({"traceEvents": [x("cpu_op", "op", i, 1) for i in range(200)]}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptTraceError, match=r"cut\.json\.gz: gzip stream is damaged") as info:
        read_kineto(path)
    assert "\n" not in str(info.value)


def test_gzip_magic_alone_is_a_corrupt_trace(tmp_path: Path) -> None:
    path = tmp_path / "stub.json.gz"
    path.write_bytes(b"\x1f\x8b\x08")
    with pytest.raises(CorruptTraceError, match=r"gzip stream is damaged \(only 3 bytes\)"):
        read_kineto(path)


def test_invalid_json_is_a_corrupt_trace_naming_the_position(tmp_path: Path) -> None:
    path = write(tmp_path, '{"traceEvents": [\n{"ph": "X", "ts": 1, "dur": 1}\n{"ph": "X"}]}')
    with pytest.raises(CorruptTraceError, match=r"invalid JSON at line 3, column 1") as info:
        read_kineto(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_object_form_cut_off_is_a_corrupt_trace(tmp_path: Path) -> None:
    path = write(
        tmp_path, '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
    )
    with pytest.raises(CorruptTraceError, match=r"invalid JSON at line 1"):
        read_kineto(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"foo": 1}', "JSON object without a traceEvents key is not a Chrome trace"),
        ("[1, 2, 3]", "the JSON array holds no event objects"),
        ('{"traceEvents": {"ph": "X"}}', "traceEvents is a JSON dict, not an array"),
        ('"just a string"', "JSON str is not a trace"),
        ('[{"foo": 1}, {"bar": 2}]', "no event has a 'ph' (phase) field"),
    ],
)
def test_json_that_is_not_a_trace_is_unsupported(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(UnsupportedFormatError) as info:
        read_kineto(path)
    assert str(info.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schemaVersion": 1, "traceEvents": []}', "the trace holds no events"),
        ("[]", "the trace holds no events"),
        ("", "the file is empty"),
        (
            '{"traceEvents": [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "p"}}]}',
            "none of the 1 events is a timed event",
        ),
    ],
)
def test_a_trace_without_events_is_empty(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(EmptyTraceError) as info:
        read_kineto(path)
    assert str(info.value).startswith(f"{path}: {message}")
