"""The planned builder (``tracegen.planned``): its GPU rules hold to the ns, and both formats carry the same events.

Each rule of :mod:`tracegen.planned.rank` is checked on a tiny job against its ground-truth
events (times relative to the job's origin); then a job using every action is written as an nsys
export and as Kineto JSON and read back with traceq's importers: the same rows, the same ns.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceq
from tracegen.planned import JOB_ORIGIN_NS, PLANNED_KERNELS, PlannedJob, Rank, build_job
from tracegen.planned.names import HIP_LAUNCH_KERNEL, HIP_MEMCPY_WITH_STREAM
from tracegen.planned.rank import ORPHAN_CORRELATION_BASE

K = PLANNED_KERNELS
GEMM = K["gemm_fwd"]


def _rows(job: PlannedJob, kind: str, rank: int = 0) -> list[dict[str, object]]:
    df = job.timeline.events().filter((pl.col("kind") == kind) & (pl.col("rank") == rank))
    rows = df.with_columns(pl.col("start_ns") - JOB_ORIGIN_NS, pl.col("end_ns") - JOB_ORIGIN_NS).to_dicts()
    return sorted(rows, key=lambda r: (r["start_ns"], r["end_ns"]))  # type: ignore[arg-type]


def _span(row: dict[str, object]) -> tuple[object, object]:
    return row["start_ns"], row["end_ns"]


def test_an_op_times_its_launch_and_its_kernel_starts_latency_after_the_call_or_when_the_stream_frees() -> None:
    def program(rank: Rank) -> None:
        rank.main.op("aten::mm", GEMM, 10_000)  # op [0, 2_000), call [1_000, 2_000), kernel at 4_500
        rank.main.op("aten::mm", GEMM, 10_000)  # call ends 4_000; stream free at 14_500

    job = build_job("rule1", program)
    assert [_span(r) for r in _rows(job, "cpu_op")] == [(0, 2_000), (2_000, 4_000)]
    assert [_span(r) for r in _rows(job, "cuda_api")] == [(1_000, 2_000), (3_000, 4_000)]
    assert [_span(r) for r in _rows(job, "kernel")] == [(4_500, 14_500), (14_500, 24_500)]


def test_a_stream_waits_for_an_event_recorded_on_another() -> None:
    def program(rank: Rank) -> None:
        th = rank.main
        th.op("aten::mm", GEMM, 50_000)  # [4_500, 54_500)
        th.wait_event(rank.comm_stream, th.record_event())  # calls [2_000, 3_000), [3_000, 4_000)
        th.collective("c10d::allreduce_", K["allreduce"], 7_000)  # call ends 6_000; waits for 54_500

    job = build_job("events", program)
    kernels = _rows(job, "kernel")
    assert [(_span(r), r["stream"]) for r in kernels] == [((4_500, 54_500), 7), ((54_500, 61_500), 20)]


def test_a_collective_ends_on_every_rank_at_the_last_arrival_plus_the_transfer() -> None:
    def program(rank: Rank) -> None:
        rank.main.op("aten::mm", GEMM, 100_000 * (rank.index + 1))
        rank.main.wait_event(rank.comm_stream, rank.main.record_event())
        rank.main.collective("c10d::allreduce_", K["allreduce"], 5_000)
        rank.main.sync(rank.comm_stream)

    job = build_job("collective", program, ranks=3)
    for r in range(3):
        nccl = [x for x in _rows(job, "kernel", r) if x["stream"] == 20]
        assert [_span(x) for x in nccl] == [(4_500 + 100_000 * (r + 1), 4_500 + 300_000 + 5_000)]
        sync = [x for x in _rows(job, "cuda_api", r) if x["name"] == "cudaStreamSynchronize"]
        assert sync[0]["end_ns"] == 309_500 + 1_000  # rule 4: 1_000 after what it waits for


def test_a_graph_replays_its_kernels_under_one_correlation_with_the_node_gap() -> None:
    def program(rank: Rank) -> None:
        rank.main.graph_launch([(GEMM, 5_000), (K["add"], 2_000), (K["add"], 2_000)], graph_id=7, node_gap_ns=1_000)

    job = build_job("graph", program)
    kernels = _rows(job, "kernel")
    assert [_span(r) for r in kernels] == [(5_500, 10_500), (11_500, 13_500), (14_500, 16_500)]
    (call,) = _rows(job, "cuda_api")
    assert call["name"] == "cudaGraphLaunch" and _span(call) == (0, 3_000)
    assert {r["correlation"] for r in kernels} == {call["correlation"]}
    assert {r["graph_id"] for r in kernels} == {7}


def test_blocking_calls_return_after_what_they_wait_for() -> None:
    def program(rank: Rank) -> None:
        th = rank.main
        th.op("aten::mm", GEMM, 20_000)  # [4_500, 24_500)
        th.item()  # op at 2_000: copy call [3_000, 4_000), copy [24_500, 26_000), sync [4_000, 27_000)
        th.item(sync_copy=HIP_MEMCPY_WITH_STREAM)  # at 27_000: copy [30_500, 32_000), call [28_000, 33_000)
        th.h2d(1 << 20, 5_000, pinned=False)  # at 33_000: call from 34_000, copy [39_000, 44_000), returns 45_000
        th.device_sync()  # nothing left: 1_000
        done = th.record_event()  # [46_000, 47_000), done at 44_000
        th.event_sync(done)  # [47_000, 48_000)

    job = build_job("blocking", program)
    calls = [(r["name"], _span(r)) for r in _rows(job, "cuda_api")]
    assert calls == [
        ("cudaLaunchKernel", (1_000, 2_000)),
        ("cudaMemcpyAsync", (3_000, 4_000)),
        ("cudaStreamSynchronize", (4_000, 27_000)),
        ("hipMemcpyWithStream", (28_000, 33_000)),
        ("cudaMemcpyAsync", (34_000, 45_000)),
        ("cudaDeviceSynchronize", (45_000, 46_000)),
        ("cudaEventRecord", (46_000, 47_000)),
        ("cudaEventSynchronize", (47_000, 48_000)),
    ]
    copies = [(r["copy_kind"], _span(r)) for r in _rows(job, "memcpy")]
    assert copies == [("DtoH", (24_500, 26_000)), ("DtoH", (30_500, 32_000)), ("HtoD", (39_000, 44_000))]


def test_gpu_work_with_no_launch_has_a_correlation_no_call_has() -> None:
    def program(rank: Rank) -> None:
        rank.main.op("aten::mm", GEMM, 1_000)
        rank.gpu_only(K["direct_copy"], 10_000, 2_000, stream=13)

    job = build_job("orphan", program)
    orphan = [r for r in _rows(job, "kernel") if r["stream"] == 13]
    assert [_span(r) for r in orphan] == [(10_000, 12_000)]
    assert orphan[0]["correlation"] == ORPHAN_CORRELATION_BASE + 1
    assert orphan[0]["correlation"] not in {r["correlation"] for r in _rows(job, "cuda_api")}


def test_work_placed_on_a_busy_stream_is_refused() -> None:
    def program(rank: Rank) -> None:
        rank.main.op("aten::mm", GEMM, 10_000)
        rank.gpu_only(K["add"], 5_000, 1_000)

    with pytest.raises(ValueError, match="busy until 14500"):
        build_job("busy", program)


def _every_action(rank: Rank) -> None:
    th, loader = rank.main, rank.thread("pt_data_pin")
    for _ in range(2):
        with th.step():
            loader.wait_until(th.t)
            loader.loader(30_000)
            th.wait_until(loader.t)
            th.h2d(1 << 20, 10_000)
            with th.range("forward"):
                th.op("aten::mm", GEMM, 40_000)
                th.op("aten::mm", K["tensile_gemm"], 10_000, api=HIP_LAUNCH_KERNEL)
            th.graph_launch([(K["add"], 2_000)] * 3, graph_id=3)
            th.wait_event(rank.comm_stream, th.record_event())
            th.collective("c10d::allreduce_", K["allreduce"], 20_000)
            rank.gpu_only(K["direct_copy"], th.t + 200_000, 1_000, stream=13)
            th.item()
            th.python(5_000)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[PlannedJob, dict[str, Path]]:
    job = build_job("every_action", _every_action, ranks=2)
    out = tmp_path_factory.mktemp("planned")
    return job, {fmt: job.write(out, fmt) for fmt in ("nsys", "kineto")}


def _normalised(events: pl.DataFrame) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    gpu = events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    cpu = events.filter(pl.col("tid").is_not_null() & pl.col("kind").is_in(["cuda_api", "range", "cpu_op"]))
    gpu_rows = sorted(gpu.select("pid", "device", "stream", "start_ns", "end_ns", "correlation", "graph_id").rows())
    cpu_rows = sorted(
        cpu.with_columns(pl.col("name").cast(pl.String), (pl.col("kind") == "cuda_api").alias("api"))
        .select("pid", "tid", "api", "name", "start_ns", "end_ns", "correlation")
        .rows()
    )
    return gpu_rows, cpu_rows


def test_both_formats_hold_the_same_rows_to_the_ns(both: tuple[PlannedJob, dict[str, Path]]) -> None:
    job, paths = both
    nsys = _normalised(traceq.load(paths["nsys"], cache=False, executor=1).events)
    kineto = _normalised(traceq.load(paths["kineto"], cache=False, executor=1).events)
    assert nsys == kineto
    truth = job.timeline.events("truth")
    n_gpu = truth.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"])).height
    n_cpu = truth.filter(pl.col("kind").is_in(["cuda_api", "range", "cpu_op"])).height
    assert (len(nsys[0]), len(nsys[1])) == (n_gpu, n_cpu)


def test_a_second_thread_records_under_its_own_tid_in_both_formats(both: tuple[PlannedJob, dict[str, Path]]) -> None:
    job, paths = both
    for path in paths.values():
        events = traceq.load(path, cache=False, executor=1).events
        loaders = events.filter(pl.col("name").cast(pl.String).str.starts_with("enumerate(DataLoader)"))
        assert sorted(set(loaders["tid"].to_list())) == [job.pids[0] + 1, job.pids[1] + 1]
        assert loaders.height == 4


def test_the_same_program_writes_the_same_bytes(tmp_path: Path) -> None:
    for fmt in ("nsys", "kineto"):
        first = build_job("again", _every_action).write(tmp_path / "a", fmt)
        second = build_job("again", _every_action).write(tmp_path / "b", fmt)
        assert first.read_bytes() == second.read_bytes()
