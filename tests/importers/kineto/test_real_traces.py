"""The Kineto importer on every real trace under ``../shared/sample_traces/{hta,kineto}``.

Expected numbers are computed here, independently, from the same files read with plain ``json``;
where a fact is specific to one file (its rank, its NCCL kernels, its HIP or driver-API launches)
the test says which.  Everything skips with a reason when the shared traces are absent.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceq import schema
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.result import ImportResult

pytestmark = pytest.mark.real

SHARED = (Path(__file__).resolve().parents[3] / ".." / "shared" / "sample_traces").resolve()
REAL = sorted(str(p.relative_to(SHARED)) for d in ("hta", "kineto") for p in (SHARED / d).glob("**/*.json.gz"))

RANKS = {
    "hta/df_index_resolver/df_index_resolver.json.gz": (1, 2),
    "hta/nccl_parser_config/nccl_data.json.gz": (0, 2),
    "hta/negative_queue_length_values_check/rank0.json.gz": (0, 16),
    "hta/trace_diff/control/control.json.gz": (3, 8),
    "hta/trace_diff/test/test.json.gz": (1, 2),
    "hta/trace_filter/sampled_rank-0.json.gz": (0, 128),
    "hta/trace_filter/sampled_rank-1.json.gz": (1, 128),
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz": (0, None),
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (None, None),
    "hta/triton_example/triton_example.json.gz": (None, None),
}
"""(rank, world_size) from each file's distributedInfo (None where the file has none)."""

KIND_OF_CAT = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "cuda_api",
    "runtime": "cuda_api",
    "cuda_driver": "cuda_api",
    "cuda_sync": "gpu_sync",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "range",
    "gpu_user_annotation": "range",
    "python_function": "python",
}
"""The category table of the docs, written out again so that the test does not reuse the code's."""
GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
API_CATS = {"cuda_runtime", "runtime", "cuda_driver"}


@pytest.fixture(scope="module")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"../shared/sample_traces not present: {SHARED} does not exist (it sits beside the checkout)")
    return SHARED


@cache
def imported(relative: str) -> ImportResult:
    return read_kineto(SHARED / relative)


@dataclass(frozen=True)
class Facts:
    """What plain ``json`` says about one file (kept small: the documents themselves are not cached)."""

    events: int
    phases: Counter[str | None]
    kinds: Counter[str]
    launch_links: int
    nccl_kernels: int
    top: dict[str, Any]


@cache
def facts(relative: str) -> Facts:
    doc = json.loads(gzip.decompress((SHARED / relative).read_bytes()))
    events: list[dict[str, Any]] = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert all(isinstance(e, dict) for e in events)
    kinds: Counter[str] = Counter()
    for e in events:
        assert e.get("ph") not in ("B", "E"), "no sample uses B/E; the kind count below would need pairing"
        if e.get("ph") in ("i", "I"):
            kinds["instant"] += 1
        elif e.get("ph") == "X" and cat_of(e) == "operator" and re.fullmatch(r"ProfilerStep#\d+", e["name"]):
            kinds["range"] += 1  # PyTorch 1.8 wrote step annotations as Operator events
        elif e.get("ph") == "X":
            kinds[KIND_OF_CAT.get(cat_of(e), "other")] += 1
    api_correlations = {
        e["args"]["correlation"] for e in events if cat_of(e) in API_CATS and "correlation" in e.get("args", {})
    }
    return Facts(
        events=len(events),
        phases=Counter(e.get("ph") for e in events),
        kinds=kinds,
        launch_links=sum(
            1 for e in events if cat_of(e) in GPU_CATS and e.get("args", {}).get("correlation") in api_correlations
        ),
        nccl_kernels=sum(1 for e in events if cat_of(e) == "kernel" and e["name"].lower().startswith("nccl")),
        top={k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {},
    )


def frame(relative: str) -> pl.DataFrame:
    return schema.to_polars(imported(relative).events)


def cat_of(event: dict[str, Any]) -> str:
    return str(event.get("cat", "")).lower()


params = pytest.mark.parametrize("relative", REAL or ["(none found)"])


@params
def test_rows_per_kind_match_an_independent_count(shared: Path, relative: str) -> None:
    got = dict(frame(relative).group_by(pl.col("kind").cast(pl.String)).len().iter_rows())
    assert got == dict(facts(relative).kinds)


@params
def test_every_event_is_accounted_for(shared: Path, relative: str) -> None:
    stats = imported(relative).stats
    phases = facts(relative).phases
    assert stats.events == facts(relative).events
    assert all(c.events == c.rows + sum(c.skipped.values()) for c in stats.counts)
    assert stats.rows == imported(relative).events.num_rows
    assert stats.skipped.get("metadata", 0) == phases["M"]
    assert stats.skipped.get("flow", 0) == phases["s"] + phases["t"] + phases["f"]


@params
def test_intervals_are_well_formed_and_sorted(shared: Path, relative: str) -> None:
    df = frame(relative)
    assert df.filter(pl.col("end_ns") < pl.col("start_ns")).is_empty()
    assert df.select(pl.col("start_ns").is_sorted()).item()
    gpu = df.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "gpu_sync"]))
    assert gpu["tid"].null_count() == gpu.height
    assert gpu["device"].null_count() == 0
    cpu = df.filter(pl.col("kind").is_in(["cuda_api", "cpu_op", "python"]))
    assert cpu["device"].null_count() == cpu.height
    assert cpu["pid"].null_count() == 0


@params
def test_launch_links_are_kept_wherever_the_trace_has_them(shared: Path, relative: str) -> None:
    """A GPU event whose correlation matches a runtime/driver call's becomes a linked pair of rows."""
    df = frame(relative)
    api = df.filter(pl.col("kind") == "cuda_api").select("correlation", "pid").unique()
    gpu = df.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu.join(api, on=["correlation", "pid"]).height == facts(relative).launch_links


@params
def test_rank_and_world_size_come_from_distributed_info(shared: Path, relative: str) -> None:
    info = facts(relative).top.get("distributedInfo", {})
    rank, world_size = RANKS.get(relative, (info.get("rank"), info.get("world_size")))
    result = imported(relative)
    assert (result.meta.rank, result.meta.world_size) == (rank, world_size)
    assert frame(relative)["rank"].unique().to_list() == [rank]


@params
def test_meta_describes_the_file(shared: Path, relative: str) -> None:
    top = facts(relative).top
    meta = imported(relative).meta
    assert meta.format == "kineto-json"
    assert meta.producer == "PyTorch profiler (Kineto)"
    assert len(meta.gpus) == len(top.get("deviceProperties", []))
    if "baseTimeNanoseconds" in top:
        assert meta.clock_offset_ns == top["baseTimeNanoseconds"]
        assert "PyTorch >= 2.4" in str(meta.format_version)
    else:
        assert meta.clock_offset_ns == 0
    if relative.startswith("kineto/"):
        assert "PyTorch 1.8-1.9" in str(meta.format_version)
    assert meta.properties["traceq.parser"] == "fast"
    assert meta.warnings == ()


@params
def test_nccl_kernels_are_comm(shared: Path, relative: str) -> None:
    assert frame(relative)["is_comm"].sum() == facts(relative).nccl_kernels


@pytest.mark.parametrize(
    "relative",
    [
        "hta/nccl_parser_config/nccl_data.json.gz",  # three-decimal µs relative to baseTimeNanoseconds
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",  # integer epoch µs
        "kineto/be239c04/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",  # 1.9, epoch µs
    ],
)
def test_times_are_the_exact_nanoseconds_the_writer_printed(shared: Path, relative: str) -> None:
    """Every row's start and end, against decimal arithmetic on the JSON text (no doubles)."""
    doc = json.loads(gzip.decompress((shared / relative).read_bytes()), parse_float=Decimal, parse_int=Decimal)

    def ns(us: Decimal) -> int:
        return int((us * 1000).to_integral_value(ROUND_HALF_EVEN))

    expected = sorted(
        (ns(e["ts"]), ns(e["ts"]) + max(0, ns(e.get("dur", Decimal(0))) if e["ph"] == "X" else 0))
        for e in doc["traceEvents"]
        if e.get("ph") in ("X", "i")
    )
    df = frame(relative)
    assert sorted(df.select("start_ns", "end_ns").iter_rows()) == expected


def test_every_kernel_in_nccl_data_links_to_a_launch_in_its_process(shared: Path) -> None:
    df = frame("hta/nccl_parser_config/nccl_data.json.gz")
    kernels = df.filter(pl.col("kind") == "kernel")
    api = df.filter(pl.col("kind") == "cuda_api").select("correlation", "pid")
    assert kernels.height == 2700
    assert kernels.join(api, on=["correlation", "pid"], how="anti").is_empty()
    comm = kernels.filter("is_comm")
    assert comm.height == 21
    assert set(comm["stream"].unique().to_list()) <= {7, 40}


def test_rocm_hip_launches_are_cuda_api_and_link_to_their_kernels(shared: Path) -> None:
    df = frame("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    hip = df.filter(pl.col("name").cast(pl.String).is_in(["hipLaunchKernel", "hipExtModuleLaunchKernel"]))
    assert hip.height > 0
    assert hip["kind"].cast(pl.String).unique().to_list() == ["cuda_api"]
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.join(hip.select("correlation", "pid"), on=["correlation", "pid"], how="anti").is_empty()
    assert kernels["device"].unique().to_list() == [2]


def test_triton_driver_launch_is_cuda_api_and_links_to_its_kernel(shared: Path) -> None:
    df = frame("hta/triton_example/triton_example.json.gz")
    launch = df.filter(pl.col("name") == "cuLaunchKernel").row(0, named=True)
    kernel = df.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (launch["kind"], launch["category"]) == ("cuda_api", "cuda_driver")
    assert kernel["name"] == "triton_poi_fused_add_cos_sin_0"
    assert (kernel["correlation"], kernel["pid"]) == (launch["correlation"], launch["pid"]) == (35, 1670242)
    assert (kernel["grid_x"], kernel["block_x"]) == (1, 128)


def test_sync_records_name_what_they_waited_for(shared: Path) -> None:
    df = frame("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    syncs = dict(
        df.filter(pl.col("kind") == "gpu_sync").group_by(pl.col("sync_kind").cast(pl.String)).len().iter_rows()
    )
    assert syncs == {"stream_synchronize": 16, "stream_wait_event": 20, "context_synchronize": 5}


def test_pytorch_18_trace_reads_stream_strings_and_lower_case_external_id(shared: Path) -> None:
    df = frame("kineto/02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz")
    gpu = df.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu.filter(pl.col("kind") == "kernel").height == 9329
    assert set(gpu["stream"].unique().to_list()) == {7, 15, 16, 23, 24, 25, 26, 27, 28, 35, 36, 37, 38}
    assert gpu["external_id"].null_count() == 0
    assert gpu["pid"].unique().to_list() == [118664]


@pytest.mark.parametrize(
    "relative",
    [
        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "hta/triton_example/triton_example.json.gz",
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
        "hta/trace_filter/sampled_rank-1.json.gz",
        "hta/nccl_parser_config/nccl_data.json.gz",
        "kineto/02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz",
    ],
)
def test_fast_and_lenient_paths_agree_on_real_traces(shared: Path, relative: str) -> None:
    fast = read_kineto(shared / relative, parser="fast")
    lenient = read_kineto(shared / relative, parser="lenient")
    assert schema.to_polars(fast.events).equals(schema.to_polars(lenient.events))
    assert fast.stats == lenient.stats
    assert fast.meta.gpus == lenient.meta.gpus
    assert (fast.meta.rank, fast.meta.clock_offset_ns) == (lenient.meta.rank, lenient.meta.clock_offset_ns)


@pytest.mark.parametrize("relative", REAL)
def test_the_report_is_the_same_whichever_parser_read_the_file(shared: Path, relative: str) -> None:
    import traceq
    from traceq.loading import _from_result

    def report_json(parser: str) -> dict[str, Any]:
        trace = _from_result(read_kineto(shared / relative, parser=parser))  # type: ignore[arg-type]
        doc = traceq.report(trace).to_dict()
        for source in doc["source"]["files"]:  # which parser read it, and its warnings, differ by design
            del source["properties"]["traceq.parser"]
            source.pop("warnings", None)
        doc["source"].pop("warnings", None)
        return doc

    assert report_json("fast") == report_json("lenient")
