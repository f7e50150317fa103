"""Communication kernels beyond NCCL: the default pattern list, ``--comm-pattern``, and one flag that
every consumer (breakdown, collectives, kernel classes, findings, timeline, a job's parts) reads."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceq
from tracegen import KERNELS, build_timeline, preset, write_kineto_ranks
from traceq import schema
from traceq.analyses import Options, analyze
from traceq.analyses.comm import merge_comm_kernel_stats, with_comm_flags
from traceq.analyses.findings_base import build_context
from traceq.analyses.job import analyze_job
from traceq.analyses.kernel_classes import classify_kernel
from traceq.analyses.model import CommKernelStat
from traceq.comm_kernels import DEFAULT_COMM_PATTERNS, comm_name_expr, matched_by
from traceq.errors import InvalidArgumentError
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite

from ..builders import kernel, launch, nccl, step, table, trace
from ..importers.kineto.test_importer import kernel as kineto_kernel
from ..importers.kineto.test_importer import write
from ..importers.nsys.test_sqlite_importer import make_export, tiny_tables

# Real kernel names, as the sources cited in traceq/comm_kernels.py spell them, and the library
# whose pattern must claim each.
REAL_COMM_NAMES = {
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "NCCL",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "NCCL",
    "ncclAllGatherRingLLKernel_copy_i8(ncclColl)": "NCCL",
    "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)": "NCCL",
    "rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)": "RCCL",
    "mscclKernel_Sum_hip_bfloat16_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)": "MSCCL",
    "void allreduce7<(Op)0, __half>(__half*, __half*, __half*, mscclpp::DeviceHandle<mscclpp::MemoryChannel>*)": (
        "MSCCL++"
    ),
    "allgather8": "MSCCL++",
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*, long*)": "DeepEP",
    "void dpsk::ep::internode::combine<true, 8>(int4*, float*)": "DeepEP",
    "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, int*, int)": "DeepEP",
    "void dpsk::ep::internode::dispatch_ll<true, 3, 10, 7168>(void*, float*, int*, long*)": "DeepEP",
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)": "DeepEP",
    "void deep_ep::internode_ll::combine<true, 7168>(void*, void*, int*)": "DeepEP",
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
    "unsigned int**, unsigned long, unsigned long)": "PyTorch symmetric memory",
    "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16**)": (
        "PyTorch symmetric memory"
    ),
    "two_shot_all_reduce_kernel_inplace": "PyTorch symmetric memory",
    "void c10d::intra_node_comm::oneShotAllReduceKernel<8u, true>(at::BFloat16*, unsigned long)": "c10d intra-node",
    "void c10d::intra_node_comm::hybridCubeMeshAllReduceKernel<true>(at::BFloat16*)": "c10d intra-node",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, int)": (
        "vLLM custom all-reduce"
    ),
    "void sglang::cross_device_reduce_2stage<__half, 8>(sglang::RankData*, sglang::RankSignals)": (
        "vLLM custom all-reduce"
    ),
    "void barrier_on_stream_kernel_threadgroup<(threadgroup_t)4>(int, int)": "NVSHMEM",
    "void alltoall_on_stream_kernel<float>(int, float*, float const*, unsigned long, int)": "NVSHMEM",
    "void gloo::_Kernel_float_cudaSum(float*, float const*, int)": "Gloo",
}

# Names the list must leave alone: compute kernels that sound like communication, and DeepEP's own
# local kernels.
NOT_COMM_NAMES = (
    "void cdpsk::ep::CUB_DeviceScanKernel<int>(int*)",
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
    "void dpsk::ep::cuda::get_dispatch_layout<256>(long const*, int*)",
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
    "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*>>(long*)",
    "triton_per_fused_all_reduce_0",
    "all_reduce_bool",
    "allreduce_fused_kernel",
    "sm90_xmma_gemm_bf16bf16_bf16f32",
    "[CUDA memcpy HtoD]",
)

DISPATCH = "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*, long*)"


@pytest.mark.parametrize(("name", "library"), sorted(REAL_COMM_NAMES.items()))
def test_each_library_s_real_kernel_names_are_communication(name: str, library: str) -> None:
    assert matched_by(name) == library
    assert classify_kernel(name) == "comm"


@pytest.mark.parametrize("name", NOT_COMM_NAMES)
def test_look_alike_compute_kernels_are_not(name: str) -> None:
    assert matched_by(name) is None
    assert classify_kernel(name) != "comm"


def test_the_generator_s_kernels_are_communication_exactly_when_it_says_so() -> None:
    names = pl.Series([k.name for k in KERNELS.values()])
    got = pl.DataFrame({"name": names}).select(comm_name_expr(pl.col("name"))).to_series().to_list()
    assert got == [key == "allreduce" for key in KERNELS]


def test_every_library_has_a_pattern_and_each_pattern_a_source_name() -> None:
    libraries = [p.library for p in DEFAULT_COMM_PATTERNS]
    assert len(set(libraries)) == len(libraries)
    assert set(REAL_COMM_NAMES.values()) == set(libraries)


@pytest.mark.real
def test_the_real_traces_communicate_only_with_nccl_and_the_list_adds_no_name(shared_traces: Path) -> None:
    """The existing numbers cannot move: on every real trace, a kernel is communication by the new
    list exactly when its name starts with nccl (the old rule) or the trace marks it a collective."""
    for path in sorted([*shared_traces.rglob("*.json.gz"), *shared_traces.rglob("*.sqlite")]):
        events = traceq.load(path).events
        kernels = events.filter(pl.col("kind") == "kernel").with_columns(pl.col("name").cast(pl.String))
        new = kernels.select(comm_name_expr(pl.col("name"))).to_series()
        old = kernels.select(pl.col("name").str.contains("(?i)^nccl").fill_null(False)).to_series()
        assert new.to_list() == old.to_list(), path
        flagged = with_comm_flags(events, Options()).get_column("is_comm")
        assert flagged.to_list() == events.get_column("is_comm").to_list(), path


def deepep_step() -> pl.DataFrame:
    """One step: a gemm, a DeepEP dispatch with nothing beside it, a gemm; the dispatch is not
    flagged (as a table imported before the list knew DeepEP would have it)."""
    return table(
        launch(0, 5, 1),
        kernel(10, 1_010, "gemm", corr=1),
        launch(6, 9, 2),
        kernel(1_010, 4_010, DISPATCH, corr=2),
        launch(10, 12, 3),
        kernel(4_010, 5_010, "gemm", corr=3),
        step(0, 6_000),
    )


def test_a_deepep_kernel_is_communication_even_in_a_table_that_did_not_say_so() -> None:
    events = deepep_step()
    assert not events.get_column("is_comm").any()
    (d,) = analyze(events).devices
    assert (d.compute_ns, d.comm_ns, d.exposed_comm_ns) == (2_000, 3_000, 3_000)
    assert d.comm_kernels == (CommKernelStat(DISPATCH, 1, 3_000, "DeepEP"),)
    assert d.regime is not None and d.regime.communication_ns == 3_000


def test_no_default_patterns_makes_it_compute_and_a_pattern_of_one_s_own_brings_it_back() -> None:
    events = deepep_step()
    (off,) = analyze(events, Options(default_comm_patterns=False)).devices
    assert (off.compute_ns, off.comm_ns, off.comm_kernels) == (5_000, 0, ())
    (own,) = analyze(events, Options(default_comm_patterns=False, comm_patterns=("dispatch<",))).devices
    assert (own.compute_ns, own.comm_ns) == (2_000, 3_000)
    assert own.comm_kernels == (CommKernelStat(DISPATCH, 1, 3_000, "--comm-pattern"),)


A2A = "my_fused_alltoall_kernel"


def custom_job() -> pl.DataFrame:
    """Two ranks, four steps; each computes (rank 1 longer), then runs its own all-to-all kernel,
    which no default pattern knows."""
    rows = []
    for n in range(4):
        t = n * 10_000
        for r in range(2):
            work = 4_000 if r == 0 else 6_000
            on = {"rank": r, "device": r, "pid": 100 + 10 * r}
            rows += [
                kernel(t, t + work, "gemm", **on),
                kernel(t + work, t + 8_000, A2A, stream=20, **on),
                step(t, t + 10_000, n, pid=100 + 10 * r, tid=101 + 10 * r, rank=r),
            ]
    return table(*rows)


def test_every_consumer_sees_the_user_s_pattern() -> None:
    events = custom_job()
    plain = analyze(events)
    assert all(d.comm_ns == 0 for d in plain.devices)
    job = analyze_job(events, plain)
    assert job is not None and job.comm_calls == 0 and job.verdict == "no_collectives"

    options = Options(comm_patterns=("alltoall",))
    counted = analyze(events, options)
    assert [d.comm_ns for d in counted.devices] == [16_000, 8_000]
    assert [d.exposed_comm_ns for d in counted.devices] == [16_000, 8_000]
    job = analyze_job(events, counted)
    assert job is not None and (job.comm_calls, job.collectives_total) == (8, 4)
    assert [c.kind for c in job.collectives] == ["AllToAll"] * 4  # the kind read from the name
    classes = build_context(with_comm_flags(events, options), counted).kernels
    assert classes.filter(pl.col("name").cast(pl.String) == A2A)["kernel_class"].cast(pl.String).unique().to_list() == [
        "comm"
    ]
    report = traceq.report(trace(*events.to_dicts()), comm_patterns=("alltoall",))
    assert [d.comm_ns for d in report.devices] == [16_000, 8_000]
    assert report.job is not None and report.job.collectives_total == 4
    assert report.timeline is not None
    assert {b.kind for b in report.timeline.bars if b.name == A2A} == {"comm"}
    exposed = [f for f in report.findings if f.id == "exposed_comm"]
    assert exposed and exposed[0].metrics["comm_ns"] > 0


def test_one_pattern_is_a_string_too_and_a_bad_regex_is_refused_before_anything_is_read() -> None:
    events = custom_job()
    loaded = trace(*events.to_dicts())
    assert traceq.report(loaded, comm_patterns="alltoall").devices[0].comm_ns == 16_000  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"comm pattern '\(' is not a valid regex"):
        traceq.report("no/such/file.json", comm_patterns=("(",))
    with pytest.raises(InvalidArgumentError, match="input pattern"):
        traceq.analyze(loaded, input_pattern="[")


@pytest.fixture(scope="module")
def job_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return list(write_kineto_ranks(build_timeline(preset("straggler_job")), tmp_path_factory.mktemp("ranks")))


def test_a_job_reported_file_by_file_follows_the_patterns_as_the_loaded_job(job_files: list[Path]) -> None:
    """The parts of a multi-file job flag their own tables: file by file equals the loaded job, with
    the defaults replaced by a pattern that names the same kernels, and with none at all."""
    default = traceq.report(job_files, executor=1)
    same = traceq.report(job_files, executor=1, default_comm_patterns=False, comm_patterns=("^nccl",))
    loaded = traceq.report(traceq.load(job_files), default_comm_patterns=False, comm_patterns=("^nccl",))
    assert same.to_dict() == loaded.to_dict()
    numbers = ("dur_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns")
    for a, b in zip(default.devices, same.devices, strict=True):
        assert [getattr(a, n) for n in numbers] == [getattr(b, n) for n in numbers]
        assert [k.matched_by for k in a.comm_kernels] == ["NCCL"] and [k.matched_by for k in b.comm_kernels] == [
            "--comm-pattern"
        ]
    assert default.job is not None and same.job is not None and default.job.verdict == same.job.verdict == "slow_rank"
    none = traceq.report(job_files, executor=1, default_comm_patterns=False)
    assert all(d.comm_ns == 0 and d.comm_kernels == () for d in none.devices)
    assert none.job is not None and none.job.verdict == "no_collectives"


def test_the_report_lists_the_names_it_counted_per_device_and_in_all() -> None:
    events = table(
        nccl(0, 100),
        nccl(200, 250),
        kernel(300, 400, DISPATCH),
        kernel(0, 50, DISPATCH, device=1, pid=200),
        step(0, 500),
        step(0, 500, pid=200),
    )
    report = traceq.report(trace(*events.to_dicts()))
    first, second = report.devices
    assert first.comm_kernels == (
        CommKernelStat("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2, 150, "NCCL"),
        CommKernelStat(DISPATCH, 1, 100, "DeepEP"),
    )
    assert second.comm_kernels == (CommKernelStat(DISPATCH, 1, 50, "DeepEP"),)
    assert merge_comm_kernel_stats([first.comm_kernels, second.comm_kernels]) == (  # ties: by name
        CommKernelStat("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2, 150, "NCCL"),
        CommKernelStat(DISPATCH, 2, 150, "DeepEP"),
    )
    payload = report.to_dict()["devices"][0]["comm_kernels"]
    assert payload[0] == {
        "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
        "count": 2,
        "total_ns": 150,
        "matched_by": "NCCL",
    }


def test_the_kineto_importer_flags_deepep_and_symmetric_memory_kernels(tmp_path: Path) -> None:
    names = [DISPATCH, "void (anonymous namespace)::multimem_all_reduce_kernel<float, 16>(float*)", "gemm"]
    events = [kineto_kernel(i + 1, 1, i + 1, name) for i, name in enumerate(names)]
    result = read_kineto(write(tmp_path, {"traceEvents": events}))
    df = schema.to_polars(result.events).sort("start_ns")
    assert df["is_comm"].to_list() == [True, True, False]


def test_the_nsys_importer_reads_the_demangled_name_where_the_short_one_says_nothing(tmp_path: Path) -> None:
    tables = tiny_tables()
    columns, strings = tables["StringIds"]
    renamed = {1: "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)", 2: "dispatch"}
    tables["StringIds"] = (columns, [(i, renamed.get(i, v)) for i, v in strings])
    df = schema.to_polars(read_nsys_sqlite(make_export(tmp_path / "deepep.sqlite", tables)).events)
    kernels = df.filter(pl.col("kind") == "kernel").sort("start_ns")
    assert kernels["is_comm"].to_list() == [True, True]  # the DeepEP kernel (by its demangled name), NCCL
