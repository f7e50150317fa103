"""Scenario model and ground truth for traceq's synthetic traces.

A :class:`Scenario` describes a data-parallel training job: how many ranks (one process and one
GPU each), how many profiled steps, and which performance problems to plant (:class:`Knobs`).
:func:`build_timeline` simulates it into a :class:`Timeline`: per step, every rank's CPU thread
runs the phases of a training step (data loading, host-to-device input copy, forward, backward
with DDP bucketed all-reduce on an NCCL stream, fused optimizer, a ``loss.item()``), launching
kernels through ``cudaLaunchKernel`` onto a compute stream (7) and an NCCL stream (20).  GPU work
starts when it is launched *and* its stream is free; a stream-wait-event orders the NCCL stream
after the compute stream; a collective ends on every rank once the last rank has arrived plus the
transfer time; ``cudaStreamSynchronize`` blocks the CPU until the stream drains.

Every step ends with that drain, so a step is self-contained: the timeline simulates a few step
templates and lays the profiled steps out by repeating them at vectorised offsets (cheap for the
million-kernel traces of the benchmarks).  Nothing reads the wall clock; randomness comes from
``random.Random`` seeded by the scenario, so the same scenario always gives the same timeline.

Clock: all times are int64 ns on the *trace clock*, the clock both writers use, chosen so that a
Kineto file (``ts`` relative to ``baseTimeNanoseconds`` = :data:`KINETO_BASE_TIME_NS`) and an nsys
export (raw ``start``/``end``) carry identical numbers for every GPU, API and range row; Unix
epoch ns = trace ns + :data:`KINETO_BASE_TIME_NS` in both.

:meth:`Timeline.events` returns the ground truth as a traceq event table (``traceq.schema``).
"""

from __future__ import annotations

import random
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final, Literal

import numpy as np
import polars as pl

from traceq.schema import conform

View = Literal["truth", "nsys", "kineto"]
"""Which events :meth:`Timeline.events` returns: everything planted (``truth``), or what each
writer can represent (``nsys``: no ``cpu_op`` rows and no GPU-side range projections)."""

EventKind = Literal["kernel", "memcpy", "memset", "gpu_sync", "cuda_api", "range", "cpu_op"]

KINETO_BASE_TIME_NS: Final = 1_735_689_600_000_000_000
"""Unix-epoch ns of trace-clock zero (2025-01-01T00:00:00Z, a Kineto three-month boundary)."""

TRACE_ORIGIN_NS: Final = 1_043_217_331_420_000
"""Trace-clock ns at which every synthetic capture starts (about 12 days of uptime)."""

FIRST_STEP_DELAY_NS: Final = 1_250_000
"""From capture start to the first profiled step (profiler warm-up)."""

CAPTURE_TAIL_NS: Final = 750_000
"""From the end of the last step to capture stop."""

# nsys ENUM_CUDA_MEM_KIND values, used for memcpy source/destination and memset memory.
MEM_PAGEABLE: Final = 0
MEM_PINNED: Final = 1
MEM_DEVICE: Final = 2


# --------------------------------------------------------------------------- hardware and names


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model, as ``TARGET_INFO_GPU`` and Kineto ``deviceProperties`` describe it."""

    name: str
    chip_name: str
    sm_count: int
    memory_bytes: int
    memory_bandwidth_bytes_per_s: int
    clock_hz: int
    l2_cache_bytes: int
    compute_major: int
    compute_minor: int
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    registers_per_block: int = 65536
    registers_per_sm: int = 65536
    shared_memory_per_block_bytes: int = 49152
    shared_memory_per_block_optin_bytes: int = 232448
    shared_memory_per_sm_bytes: int = 233472
    warp_size: int = 32
    async_engines: int = 3
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32


H100_SXM: Final = GpuSpec(
    name="NVIDIA H100 80GB HBM3",
    chip_name="GH100",
    sm_count=132,
    memory_bytes=85_029_158_912,
    memory_bandwidth_bytes_per_s=3_352_320_000_000,
    clock_hz=1_980_000_000,
    l2_cache_bytes=52_428_800,
    compute_major=9,
    compute_minor=0,
)

KernelClass = Literal["gemm", "elementwise", "norm", "softmax", "reduce", "loss", "optimizer", "comm"]

MEMORY_BOUND_CLASSES: Final = frozenset({"elementwise", "norm", "softmax", "reduce", "loss", "optimizer"})
"""Kernel classes whose time is set by memory bandwidth rather than math throughput."""


@dataclass(frozen=True)
class KernelSpec:
    """A kernel function and its launch configuration."""

    name: str
    """Demangled name, as Kineto writes it and nsys stores in ``demangledName``."""
    short_name: str
    kernel_class: KernelClass
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    static_shared_memory_bytes: int = 0
    dynamic_shared_memory_bytes: int = 0
    mangled_name: str | None = None

    @property
    def shared_memory_bytes(self) -> int:
        return self.static_shared_memory_bytes + self.dynamic_shared_memory_bytes

    @property
    def is_comm(self) -> bool:
        return self.kernel_class == "comm"


@dataclass(frozen=True)
class ApiSpec:
    """A CUDA runtime call."""

    name: str
    """As Kineto and traceq spell it."""
    nsys_name: str
    """As nsys stores it in StringIds, with the CUDA version suffix."""
    cbid: int
    """CUPTI runtime callback id (Kineto's ``cbid`` arg)."""
    flow: bool
    """Kineto draws an ``ac2g`` flow from this call to the GPU record it produced."""


LAUNCH_KERNEL: Final = ApiSpec("cudaLaunchKernel", "cudaLaunchKernel_v7000", 211, True)
MEMCPY_ASYNC: Final = ApiSpec("cudaMemcpyAsync", "cudaMemcpyAsync_v3020", 41, True)
MEMSET_ASYNC: Final = ApiSpec("cudaMemsetAsync", "cudaMemsetAsync_v3020", 51, True)
STREAM_SYNCHRONIZE: Final = ApiSpec("cudaStreamSynchronize", "cudaStreamSynchronize_v3020", 131, True)
EVENT_RECORD: Final = ApiSpec("cudaEventRecord", "cudaEventRecord_v3020", 135, False)
STREAM_WAIT_EVENT: Final = ApiSpec("cudaStreamWaitEvent", "cudaStreamWaitEvent_v3020", 147, True)


@dataclass(frozen=True)
class CommInfo:
    """What an NCCL kernel does (Kineto's collective args)."""

    collective: str
    elements: int
    dtype: str
    group_ranks: tuple[int, ...]


def _cublas(tile: str, layout: str, warpgroups: str) -> KernelSpec:
    name = (
        f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_{layout}_n_tilesize{tile}_warpgroupsize{warpgroups}"
        "_execute_segment_k_off_kernel__5x_cublas"
    )
    return KernelSpec(name, name, "gemm", (16, 12, 1), (384, 1, 1), 168, 0, 213_248, name)


def _aten(template: str, short: str, cls: KernelClass, grid: int, block: int, regs: int, smem: int = 0) -> KernelSpec:
    return KernelSpec(template, short, cls, (grid, 1, 1), (block, 1, 1), regs, smem)


def _vectorized(functor: str, arity: int, grid: int = 4096) -> KernelSpec:
    name = (
        f"void at::native::vectorized_elementwise_kernel<4, {functor}, std::array<char*, {arity}ul> >"
        f"(int, {functor}, std::array<char*, {arity}ul>)"
    )
    return _aten(name, "vectorized_elementwise_kernel", "elementwise", grid, 128, 26)


_GELU = (
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
    "const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}"
)
_GELU_BWD = (
    "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}"
)
_NCCL_BASE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
_ADAM = (
    "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, "
    "double*, double, double, double, double, double, bool, double*, double*"
)
_AND_REDUCE = (
    "at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda"
    "(at::TensorIterator&)::{lambda(bool, bool)#1}>, unsigned int, bool, 4, 4>"
)

KERNELS: Final[Mapping[str, KernelSpec]] = MappingProxyType(
    {
        "gemm_fwd": _cublas("128x256x64", "tn", "2x1x1"),
        "gemm_dgrad": _cublas("128x128x64", "nn", "1x1x1"),
        "gemm_wgrad": _cublas("128x256x64", "nt", "2x1x1"),
        "gemm_bmm": _cublas("64x128x64", "tn", "1x1x1"),
        "sgemm": KernelSpec(
            "ampere_sgemm_128x64_tn",
            "ampere_sgemm_128x64_tn",
            "gemm",
            (4, 8, 1),
            (128, 1, 1),
            122,
            12_544,
            0,
            "ampere_sgemm_128x64_tn",
        ),
        "layer_norm": _aten(
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
            "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
            "vectorized_layer_norm_kernel",
            "norm",
            8192,
            256,
            40,
        ),
        "layer_norm_bwd_input": _aten(
            "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>("
            "c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, "
            "c10::BFloat16*, int)",
            "layer_norm_grad_input_kernel_vectorized",
            "norm",
            8192,
            256,
            48,
        ),
        "layer_norm_bwd_params": _aten(
            "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float, 32u, "
            "32u, 64u, false, true, false>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, "
            "float const*, c10::BFloat16*, c10::BFloat16*)",
            "GammaBetaBackwardCUDAKernelTemplate",
            "norm",
            64,
            1024,
            64,
            8448,
        ),
        "softmax": _aten(
            "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>("
            "c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
            "softmax_warp_forward",
            "softmax",
            16384,
            128,
            56,
        ),
        "softmax_bwd": _aten(
            "void (anonymous namespace)::softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, 10, false, false>("
            "c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, int, int, int, bool const*)",
            "softmax_warp_backward",
            "softmax",
            16384,
            128,
            60,
        ),
        "add": _vectorized("at::native::CUDAFunctor_add<c10::BFloat16>", 3),
        "gelu": _vectorized(_GELU, 2),
        "gelu_bwd": _vectorized(_GELU_BWD, 3),
        "mul": _vectorized(
            "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
            "at::native::binary_internal::MulFunctor<float> >",
            3,
            512,
        ),
        "mul_scalar": _vectorized(
            "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
            "at::native::binary_internal::MulFunctor<float> >",
            2,
            512,
        ),
        "tanh": _vectorized(
            "at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#3}"
            "::operator()() const::{lambda(c10::BFloat16)#1}",
            2,
            512,
        ),
        "isfinite": _vectorized(
            "at::native::isfinite_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::"
            "{lambda(c10::BFloat16)#1}",
            2,
            512,
        ),
        "all_reduce_bool": _aten(
            f"void at::native::reduce_kernel<512, 1, {_AND_REDUCE} >({_AND_REDUCE})",
            "reduce_kernel",
            "reduce",
            132,
            512,
            32,
            16,
        ),
        "log_softmax": _aten(
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
            "cunn_SoftMaxForward",
            "loss",
            8192,
            1024,
            38,
            64,
        ),
        "nll_loss": _aten(
            "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>("
            "float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
            "nll_loss_forward_reduce_cuda_kernel_2d",
            "loss",
            1,
            32,
            30,
            128,
        ),
        "nll_loss_bwd": _aten(
            "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, "
            "float const*, long const*, float const*, float const*, bool, int, int, long, long)",
            "nll_loss_backward_reduce_cuda_kernel_2d",
            "loss",
            1,
            32,
            30,
        ),
        "log_softmax_bwd": _aten(
            "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)",
            "cunn_SoftMaxBackward",
            "loss",
            8192,
            1024,
            40,
            64,
        ),
        "fused_adam": _aten(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            f"TensorListMetadata<4>, {_ADAM}>(at::native::(anonymous namespace)::TensorListMetadata<4>, {_ADAM})",
            "multi_tensor_apply_kernel",
            "optimizer",
            2112,
            512,
            64,
        ),
        "allreduce": KernelSpec(
            f"{_NCCL_BASE}(ncclDevKernelArgsStorage<4096ul>)",
            _NCCL_BASE,
            "comm",
            (24, 1, 1),
            (640, 1, 1),
            96,
            0,
            87_568,
            f"_Z{len(_NCCL_BASE)}{_NCCL_BASE}24ncclDevKernelArgsStorageILm4096EE",
        ),
    }
)
"""The kernels the synthetic training step launches (H100, bf16)."""

DATALOADER_NEXT: Final = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DDP_FORWARD: Final = "DistributedDataParallel.forward"
NCCL_ALL_REDUCE: Final = "nccl:all_reduce"
OPTIMIZER_STEP: Final = "Optimizer.step#AdamW.step"
OPTIMIZER_ZERO_GRAD: Final = "Optimizer.zero_grad#AdamW.zero_grad"


# --------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Knobs:
    """Planted performance problems.  Each, switched on, costs at least ~20% of step time."""

    launch_bound: bool = False
    """Tiny kernels; the CPU takes longer per launch than the GPU per kernel, so the GPU waits."""
    host_sync: bool = False
    """A ``.item()`` (``cudaStreamSynchronize``) after every forward layer, then host-side Python
    work, so the GPU queue drains and stays empty until the next launches."""
    input_stall: bool = False
    """Slow CPU data loading and a pageable host-to-device copy: the GPU waits for the batch."""
    exposed_comm: bool = False
    """One large all-reduce after backward, nothing computed beside it."""
    memory_bound: bool = False
    """Elementwise, normalisation and softmax kernels dominate GPU time."""
    small_kernels: bool = False
    """Unfused GELU and layer norm: most kernels run for a few microseconds."""
    straggler: bool = False
    """One rank's kernels run slower; the others wait inside each collective."""
    slow_link: bool = False
    """Every rank's collectives are slow (little arrival skew): communication is exposed."""


@dataclass(frozen=True)
class Scenario:
    """A synthetic training job to simulate."""

    name: str
    knobs: Knobs = field(default_factory=Knobs)
    ranks: int = 1
    """Ranks simulated and written (one process and one GPU each, on one node)."""
    world_size: int = 8
    """Ranks in the job; ranks beyond ``ranks`` are assumed to arrive on time at collectives."""
    steps: int = 4
    layers: int = 4
    distinct_steps: int | None = None
    """Step templates to simulate; the profiled steps cycle through them.  ``None``: one per step."""
    seed: int = 0
    gpu: GpuSpec = H100_SXM
    first_step_number: int = 2
    """``N`` of the first ``ProfilerStep#N`` (PyTorch's schedule skips wait and warm-up steps)."""
    straggler_rank: int | None = None
    """The slow rank when ``knobs.straggler``; ``None``: ``ranks // 2``."""
    straggler_slowdown: float = 1.4
    compute_stream: int = 7
    nccl_stream: int = 20
    tuned: bool = False
    """A well-tuned job: prefetched pinned input and a small final gradient bucket."""
    first_pid: int = 48213
    hostname: str = "gpu-node-017"

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.world_size < self.ranks:
            raise ValueError(f"need 1 <= ranks <= world_size, got ranks={self.ranks}, world_size={self.world_size}")
        if self.steps < 1 or self.layers < 1:
            raise ValueError("steps and layers must be >= 1")
        if self.distinct_steps is not None and self.distinct_steps < 1:
            raise ValueError("distinct_steps must be >= 1")
        if self.resolved_straggler_rank() >= self.ranks:
            raise ValueError(f"straggler_rank {self.straggler_rank} is not one of the {self.ranks} ranks")

    def resolved_straggler_rank(self) -> int:
        return self.ranks // 2 if self.straggler_rank is None else self.straggler_rank

    @property
    def node_gpus(self) -> int:
        """GPUs on the (single) node: the job's ranks, at most eight."""
        return max(self.ranks, min(self.world_size, 8))


PRESETS: Final[Mapping[str, Scenario]] = MappingProxyType(
    {
        "training_step": Scenario("training_step"),
        "clean": Scenario("clean", tuned=True),
        "launch_bound": Scenario("launch_bound", Knobs(launch_bound=True)),
        "host_sync": Scenario("host_sync", Knobs(host_sync=True)),
        "input_stall": Scenario("input_stall", Knobs(input_stall=True)),
        "exposed_comm": Scenario("exposed_comm", Knobs(exposed_comm=True)),
        "memory_bound": Scenario("memory_bound", Knobs(memory_bound=True)),
        "small_kernels": Scenario("small_kernels", Knobs(small_kernels=True)),
        "balanced_job": Scenario("balanced_job", ranks=4, world_size=4, steps=3),
        "straggler_job": Scenario("straggler_job", Knobs(straggler=True), ranks=4, world_size=4, steps=3),
        "slow_link_job": Scenario("slow_link_job", Knobs(slow_link=True), ranks=4, world_size=4, steps=3),
    }
)
"""Named scenarios.  ``training_step`` is the realistic default (a little of everything, nothing
dominant); ``clean`` is compute-bound with no problem; one preset per knob; three 4-rank jobs."""


def preset(name: str) -> Scenario:
    """The preset called ``name`` (see :data:`PRESETS`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"no preset {name!r}; choose from {', '.join(sorted(PRESETS))}") from None


@dataclass(frozen=True)
class _Costs:
    """Durations (ns) the simulation draws from, before jitter."""

    gemm: dict[str, int]
    norm: int = 22_000
    norm_bwd_input: int = 30_000
    norm_bwd_params: int = 18_000
    softmax: int = 38_000
    softmax_bwd: int = 45_000
    add: int = 14_000
    gelu: int = 36_000
    gelu_bwd: int = 45_000
    tiny: int = 3_000
    loss: int = 30_000
    optimizer_chunk: int = 120_000
    optimizer_chunks: int = 3
    memset_bytes: int = 8 << 20
    memset: int = 6_000
    gemm_kernels: tuple[str, str, str, str] = ("gemm_fwd", "gemm_dgrad", "gemm_wgrad", "gemm_bmm")
    unfused: bool = False
    data_loading: int = 300_000
    input_bytes: int = 8 << 20
    input_copy: int = 420_000
    input_pinned: bool = True
    op_overhead: int = 14_000
    op_post: int = 3_000
    launch_api: int = 5_500
    launch_gap: int = 1_500
    python_gap: int = 6_000
    launch_latency: int = 4_500
    sync_checks: bool = False
    post_sync_host: int = 1_200_000
    overlap_comm: bool = True
    bucket_transfer: int = 450_000
    last_bucket_transfer: int = 450_000
    bucket_elements: int = 12_582_912


_MEDIUM_GEMMS: Final = {"qkv": 170_000, "scores": 85_000, "pv": 85_000, "out": 60_000, "fc1": 230_000, "fc2": 230_000}


def _costs(knobs: Knobs, tuned: bool) -> _Costs:
    c = _Costs(gemm=dict(_MEDIUM_GEMMS))
    if tuned:
        c = replace(c, data_loading=40_000, input_bytes=2 << 20, input_copy=110_000, last_bucket_transfer=60_000)
    if knobs.launch_bound:
        c = replace(
            c,
            gemm={k: 9_000 + 700 * i for i, k in enumerate(_MEDIUM_GEMMS)},
            norm=3_500,
            norm_bwd_input=4_000,
            norm_bwd_params=3_000,
            softmax=3_000,
            softmax_bwd=3_500,
            add=2_400,
            gelu=2_600,
            gelu_bwd=2_900,
            loss=4_000,
            optimizer_chunk=9_000,
            optimizer_chunks=2,
            memset=2_000,
            memset_bytes=1 << 20,
            gemm_kernels=("sgemm", "sgemm", "sgemm", "sgemm"),
            op_overhead=26_000,
            python_gap=14_000,
            input_bytes=256 << 10,
            input_copy=16_000,
            bucket_transfer=12_000,
            last_bucket_transfer=12_000,
            bucket_elements=262_144,
        )
    if knobs.memory_bound:
        c = replace(
            c,
            gemm={k: v * 35 // 100 for k, v in c.gemm.items()},
            norm=c.norm * 6,
            norm_bwd_input=c.norm_bwd_input * 6,
            norm_bwd_params=c.norm_bwd_params * 6,
            softmax=c.softmax * 7,
            softmax_bwd=c.softmax_bwd * 7,
            add=c.add * 6,
            gelu=c.gelu * 6,
            gelu_bwd=c.gelu_bwd * 6,
        )
    if knobs.small_kernels:
        c = replace(c, gemm={k: v * 50 // 100 for k, v in c.gemm.items()}, unfused=True, tiny=2_600)
    if knobs.input_stall:
        c = replace(c, data_loading=5_500_000, input_bytes=16 << 20, input_copy=1_600_000, input_pinned=False)
    if knobs.host_sync:
        c = replace(c, sync_checks=True)
    if knobs.exposed_comm:
        c = replace(c, overlap_comm=False, bucket_transfer=4_200_000, bucket_elements=4 * c.bucket_elements)
    if knobs.slow_link:
        c = replace(c, bucket_transfer=c.bucket_transfer * 8, last_bucket_transfer=c.last_bucket_transfer * 8)
    return c


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """One planted event of one rank, relative to its step.

    ``start_ns``/``end_ns`` are relative to the step start, ``correlation``/``external_id`` to
    the step's id bases (see :class:`StepInstance`).  CPU rows carry ``tid``; GPU rows (and GPU
    projections of ranges) carry ``device`` and ``stream``.
    """

    kind: EventKind
    start_ns: int
    end_ns: int
    name: str
    seq: int
    tid: int | None = None
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    external_id: int | None = None
    bytes: int | None = None
    copy_kind: str | None = None
    sync_kind: str | None = None
    kernel: KernelSpec | None = None
    api: ApiSpec | None = None
    src_kind: int | None = None
    dst_kind: int | None = None
    comm: CommInfo | None = None
    cuda_event_id: int | None = None
    wait_on_stream: int | None = None
    step_range: bool = False
    """The ``ProfilerStep#N`` range (or its GPU projection); its name is set per step."""
    user_annotation: bool = False
    """A ``record_function`` range: Kineto ``user_annotation`` on the CPU, ``gpu_user_annotation``
    when projected onto a stream; an NVTX push/pop range in nsys."""

    @property
    def is_gpu_projection(self) -> bool:
        return self.kind == "range" and self.device is not None


@dataclass(frozen=True)
class ProcessInfo:
    """One rank's process: its OS ids, GPU and CUDA context."""

    rank: int
    pid: int
    tid: int
    device: int
    context: int
    name: str = "python3"


@dataclass(frozen=True)
class StepTemplate:
    """One simulated step: every rank's events, relative to the step start."""

    period_ns: int
    events: tuple[tuple[Event, ...], ...]
    """Indexed by rank; sorted by (start, longest first, creation order)."""
    correlation_count: tuple[int, ...]
    external_id_count: tuple[int, ...]


@dataclass(frozen=True)
class StepInstance:
    """A profiled step: which template, where on the trace clock, and its id bases per rank."""

    template: int
    step_number: int
    offset_ns: int
    correlation_base: tuple[int, ...]
    external_id_base: tuple[int, ...]

    @property
    def step_name(self) -> str:
        return f"ProfilerStep#{self.step_number}"


_CORRELATION_START: Final = 41_207
_EXTERNAL_ID_START: Final = 1_024


@dataclass(frozen=True)
class Timeline:
    """A simulated scenario: processes, step templates and the profiled steps laid out in time."""

    scenario: Scenario
    processes: tuple[ProcessInfo, ...]
    templates: tuple[StepTemplate, ...]
    instances: tuple[StepInstance, ...]

    @property
    def capture_start_ns(self) -> int:
        return TRACE_ORIGIN_NS

    @property
    def capture_end_ns(self) -> int:
        last = self.instances[-1]
        return last.offset_ns + self.templates[last.template].period_ns + CAPTURE_TAIL_NS

    def rank_steps(self, rank: int) -> Iterator[tuple[StepInstance, tuple[Event, ...]]]:
        """Each profiled step of ``rank`` with its template events (for the writers)."""
        for inst in self.instances:
            yield inst, self.templates[inst.template].events[rank]

    def events(self, view: View = "truth", *, source: str = "") -> pl.DataFrame:
        """The ground truth as a traceq event table (``traceq.schema.conform``), sorted by
        ``start_ns``, ``end_ns`` and rank.

        ``source`` fills the ``source`` column ("" by default; pass the output path to compare
        with an import of that file).  ``category`` is the Kineto ``cat`` (``truth``, ``kineto``)
        or the nsys table name (``nsys``).  Names of memcpy, memset and gpu_sync rows are the
        source's own spelling: Kineto's ``Memcpy HtoD (Pinned -> Device)`` / ``Stream Sync``, or in
        the ``nsys`` view ``[CUDA memcpy HtoD]`` / the causing API call (``cudaStreamSynchronize``).
        ``rank`` is always the planted rank, whether or not the file records it.
        """
        frames: list[pl.DataFrame] = []
        for t_index, template in enumerate(self.templates):
            insts = [i for i in self.instances if i.template == t_index]
            if not insts:
                continue
            for proc in self.processes:
                base = _base_frame(template.events[proc.rank], proc, view)
                if base.height == 0:
                    continue
                frames.append(_tile(base, insts, proc.rank))
        if not frames:
            raise ValueError("timeline has no events")
        df = pl.concat(frames, how="vertical")
        df = df.sort(["start_ns", "end_ns", "rank", "_order"], maintain_order=True)
        return conform(df.with_columns(pl.lit(source).alias("source")))


_KINETO_CAT: Final[dict[str, str]] = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_sync": "cuda_sync",
    "cuda_api": "cuda_runtime",
    "cpu_op": "cpu_op",
}
_NSYS_TABLE: Final[dict[str, str]] = {
    "kernel": "CUPTI_ACTIVITY_KIND_KERNEL",
    "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
    "gpu_sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "cuda_api": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "range": "NVTX_EVENTS",
}
_NSYS_SYNC_NAMES: Final[dict[str, str]] = {
    "stream_synchronize": STREAM_SYNCHRONIZE.name,
    "stream_wait_event": STREAM_WAIT_EVENT.name,
}


def kineto_category(event: Event) -> str:
    """The Kineto ``cat`` of ``event``."""
    if event.kind == "range":
        return "gpu_user_annotation" if event.device is not None else "user_annotation"
    return _KINETO_CAT[event.kind]


def nsys_display_name(event: Event) -> str:
    """The name of ``event`` as read from an nsys export: ``[CUDA memcpy HtoD]``, ``[CUDA memset]``,
    a sync record named after the API call that caused it; other names unchanged."""
    if event.kind == "memcpy":
        return f"[CUDA memcpy {event.copy_kind}]"
    if event.kind == "memset":
        return "[CUDA memset]"
    if event.kind == "gpu_sync" and event.sync_kind is not None:
        return _NSYS_SYNC_NAMES[event.sync_kind]
    return event.name


def in_view(event: Event, view: View) -> bool:
    """Whether ``event`` appears in the file written for ``view``."""
    if view == "nsys":
        return event.kind != "cpu_op" and not event.is_gpu_projection
    return True


def _base_frame(events: tuple[Event, ...], proc: ProcessInfo, view: View) -> pl.DataFrame:
    rows = [e for e in events if in_view(e, view)]
    on_gpu = [e.device is not None for e in rows]
    kernels = [e.kernel for e in rows]
    return pl.DataFrame(
        {
            "kind": [e.kind for e in rows],
            "start_ns": [e.start_ns for e in rows],
            "end_ns": [e.end_ns for e in rows],
            "name": [nsys_display_name(e) if view == "nsys" else e.name for e in rows],
            "pid": [proc.pid] * len(rows),
            "tid": [e.tid for e in rows],
            "device": [e.device for e in rows],
            "stream": [e.stream for e in rows],
            "correlation": [e.correlation for e in rows],
            "is_comm": [k is not None and k.is_comm for k in kernels],
            "bytes": [e.bytes for e in rows],
            "copy_kind": [e.copy_kind for e in rows],
            "rank": [proc.rank] * len(rows),
            "category": [_NSYS_TABLE[e.kind] if view == "nsys" else kineto_category(e) for e in rows],
            "context": [proc.context if g and e.kind != "range" else None for e, g in zip(rows, on_gpu, strict=True)],
            "external_id": [None if view == "nsys" else e.external_id for e in rows],
            "sync_kind": [e.sync_kind for e in rows],
            "grid_x": [k.grid[0] if k else None for k in kernels],
            "grid_y": [k.grid[1] if k else None for k in kernels],
            "grid_z": [k.grid[2] if k else None for k in kernels],
            "block_x": [k.block[0] if k else None for k in kernels],
            "block_y": [k.block[1] if k else None for k in kernels],
            "block_z": [k.block[2] if k else None for k in kernels],
            "registers_per_thread": [k.registers_per_thread if k else None for k in kernels],
            "shared_memory_bytes": [k.shared_memory_bytes if k else None for k in kernels],
            "step_range": [e.step_range for e in rows],
            "_seq": [e.seq for e in rows],
        },
        schema_overrides={
            "tid": pl.Int64,
            "device": pl.Int32,
            "stream": pl.Int64,
            "correlation": pl.Int64,
            "bytes": pl.Int64,
            "copy_kind": pl.String,
            "sync_kind": pl.String,
            "external_id": pl.Int64,
            "context": pl.Int64,
            "grid_x": pl.Int32,
            "grid_y": pl.Int32,
            "grid_z": pl.Int32,
            "block_x": pl.Int32,
            "block_y": pl.Int32,
            "block_z": pl.Int32,
            "registers_per_thread": pl.Int32,
            "shared_memory_bytes": pl.Int64,
        },
    )


def _tile(base: pl.DataFrame, insts: list[StepInstance], rank: int) -> pl.DataFrame:
    """``base`` repeated once per instance, shifted by the instance's time and id offsets."""
    m, n = base.height, len(insts)
    rows = pl.Series("_row", np.tile(np.arange(m, dtype=np.int64), n))
    per_row = {
        "_off": np.repeat(np.array([i.offset_ns for i in insts], dtype=np.int64), m),
        "_corr": np.repeat(np.array([i.correlation_base[rank] for i in insts], dtype=np.int64), m),
        "_ext": np.repeat(np.array([i.external_id_base[rank] for i in insts], dtype=np.int64), m),
        "_step": np.repeat(np.array([i.step_number for i in insts], dtype=np.int64), m),
    }
    df = base.select(pl.all().gather(rows)).with_columns(**{k: pl.Series(k, v) for k, v in per_row.items()})
    return df.with_columns(
        (pl.col("start_ns") + pl.col("_off")).alias("start_ns"),
        (pl.col("end_ns") + pl.col("_off")).alias("end_ns"),
        (pl.col("correlation") + pl.col("_corr")).alias("correlation"),
        (pl.col("external_id") + pl.col("_ext")).alias("external_id"),
        pl.when(pl.col("step_range"))
        .then(pl.lit("ProfilerStep#") + pl.col("_step").cast(pl.String))
        .otherwise(pl.col("name"))
        .alias("name"),
        (pl.col("_step") * 1_000_000_000 + pl.col("_seq")).alias("_order"),
    )


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class _CollectiveCall:
    ready_ns: int
    transfer_ns: int


class _RankSim:
    """One rank's CPU thread and GPU streams during one step (times relative to the step)."""

    def __init__(self, scenario: Scenario, costs: _Costs, proc: ProcessInfo, rng: random.Random, slowdown: float):
        self.sc = scenario
        self.c = costs
        self.proc = proc
        self.rng = rng
        self.slowdown = slowdown
        self.t = 0
        self.events: list[Event] = []
        self.stream_free = {scenario.compute_stream: 0, scenario.nccl_stream: 0}
        self.n_corr = 0
        self.n_ext = 0
        self._ext_stack: list[int] = []
        self._user_stack: list[int] = []
        self._links: list[tuple[int, int]] = []
        self._next_cuda_event = 0

    # -- clocks and ids
    def _gpu(self, ns: int) -> int:
        return max(800, round(ns * self.slowdown * (1.0 + self.rng.gauss(0.0, 0.03))))

    def _cpu(self, ns: int) -> int:
        return max(300, round(ns * (1.0 + self.rng.gauss(0.0, 0.08))))

    def _add(self, kind: EventKind, start: int, end: int, name: str, **kw: object) -> int:
        self.events.append(Event(kind, start, end, name, len(self.events), **kw))  # type: ignore[arg-type]
        return len(self.events) - 1

    def _close(self, index: int) -> None:
        self.events[index] = replace(self.events[index], end_ns=self.t)

    def host(self, ns: int) -> None:
        """CPU time outside any CUDA call (Python, data loading)."""
        self.t += self._cpu(ns)

    # -- CPU ranges
    @contextmanager
    def annotation(self, name: str, *, step_range: bool = False) -> Iterator[None]:
        ext = self.n_ext
        self.n_ext += 1
        index = self._add(
            "range",
            self.t,
            self.t,
            name,
            tid=self.proc.tid,
            external_id=ext,
            step_range=step_range,
            user_annotation=True,
        )
        self._ext_stack.append(ext)
        self._user_stack.append(index)
        self.t += self._cpu(2_000)
        try:
            yield
        finally:
            self.t += self._cpu(1_500)
            self._user_stack.pop()
            self._ext_stack.pop()
            self._close(index)

    @contextmanager
    def op(self, name: str, overhead_ns: int | None = None) -> Iterator[None]:
        ext = self.n_ext
        self.n_ext += 1
        index = self._add("cpu_op", self.t, self.t, name, tid=self.proc.tid, external_id=ext)
        self._ext_stack.append(ext)
        self.t += self._cpu(self.c.op_overhead if overhead_ns is None else overhead_ns)
        try:
            yield
        finally:
            self.t += self._cpu(self.c.op_post)
            self._ext_stack.pop()
            self._close(index)
        self.t += self._cpu(self.c.python_gap)

    # -- CUDA calls
    def _api(self, api: ApiSpec, duration_ns: int | None = None) -> tuple[int, int, int]:
        corr = self.n_corr
        self.n_corr += 1
        start = self.t
        end = start + (self._cpu(self.c.launch_api) if duration_ns is None else duration_ns)
        self._add(
            "cuda_api",
            start,
            end,
            api.name,
            tid=self.proc.tid,
            correlation=corr,
            external_id=self._ext_stack[-1] if self._ext_stack else None,
            api=api,
        )
        return start, end, corr

    def _gpu_row(self, kind: EventKind, start: int, end: int, name: str, stream: int, corr: int, **kw: object) -> None:
        index = self._add(
            kind,
            start,
            end,
            name,
            device=self.proc.device,
            stream=stream,
            correlation=corr,
            external_id=self._ext_stack[-1] if self._ext_stack else None,
            **kw,
        )
        if self._user_stack and kind in ("kernel", "memcpy", "memset"):
            self._links.append((index, self._user_stack[-1]))

    def _enqueue(self, stream: int, api_start: int, duration: int) -> tuple[int, int]:
        start = max(api_start + self._cpu(self.c.launch_latency), self.stream_free[stream])
        self.stream_free[stream] = start + duration
        return start, start + duration

    def kernel(self, key: str, duration_ns: int, stream: int | None = None) -> None:
        spec = KERNELS[key]
        stream = self.sc.compute_stream if stream is None else stream
        api_start, api_end, corr = self._api(LAUNCH_KERNEL)
        start, end = self._enqueue(stream, api_start, self._gpu(duration_ns))
        self._gpu_row("kernel", start, end, spec.name, stream, corr, kernel=spec)
        self.t = api_end + self._cpu(self.c.launch_gap)

    def memcpy(self, copy_kind: str, nbytes: int, duration_ns: int, src: int, dst: int, *, blocking: bool) -> None:
        stream = self.sc.compute_stream
        api_start, api_end, corr = self._api(MEMCPY_ASYNC)
        start, end = self._enqueue(stream, api_start, max(800, round(duration_ns * (1 + self.rng.gauss(0, 0.02)))))
        names = {MEM_PAGEABLE: "Pageable", MEM_PINNED: "Pinned", MEM_DEVICE: "Device"}
        self._gpu_row(
            "memcpy",
            start,
            end,
            f"Memcpy {copy_kind} ({names[src]} -> {names[dst]})",
            stream,
            corr,
            bytes=nbytes,
            copy_kind=copy_kind,
            src_kind=src,
            dst_kind=dst,
        )
        if blocking:  # pageable memory: the call returns once the staged copy is done
            api_end = max(api_end, end + self._cpu(2_000))
            self.events[-2] = replace(self.events[-2], end_ns=api_end)
        self.t = api_end + self._cpu(self.c.launch_gap)

    def memset(self, nbytes: int, duration_ns: int) -> None:
        stream = self.sc.compute_stream
        api_start, api_end, corr = self._api(MEMSET_ASYNC)
        start, end = self._enqueue(stream, api_start, self._gpu(duration_ns))
        self._gpu_row("memset", start, end, "Memset (Device)", stream, corr, bytes=nbytes, dst_kind=MEM_DEVICE)
        self.t = api_end + self._cpu(self.c.launch_gap)

    def stream_synchronize(self, stream: int) -> None:
        """Block until ``stream`` drains (``cudaStreamSynchronize``)."""
        api_start = self.t
        sync_start = api_start + self._cpu(600)
        sync_end = max(sync_start + self._cpu(400), self.stream_free[stream] + self._cpu(700))
        api_end = sync_end + self._cpu(1_000)
        self.t = api_start
        _, _, corr = self._api(STREAM_SYNCHRONIZE, api_end - api_start)
        self._gpu_row("gpu_sync", sync_start, sync_end, "Stream Sync", stream, corr, sync_kind="stream_synchronize")
        self.t = api_end + self._cpu(self.c.launch_gap)

    def event_record(self, stream: int) -> tuple[int, int]:
        """``cudaEventRecord`` on ``stream``: returns (event id, time the event completes)."""
        event_id = self._next_cuda_event
        self._next_cuda_event += 1
        _, api_end, _ = self._api(EVENT_RECORD, self._cpu(2_500))
        self._add_event_id(event_id)
        self.t = api_end + self._cpu(self.c.launch_gap)
        return event_id, self.stream_free[stream]

    def _add_event_id(self, event_id: int) -> None:
        self.events[-1] = replace(self.events[-1], cuda_event_id=event_id)

    def stream_wait_event(self, stream: int, event: tuple[int, int], source_stream: int) -> None:
        """``cudaStreamWaitEvent``: later work on ``stream`` waits for ``event``."""
        event_id, ready = event
        api_start, api_end, corr = self._api(STREAM_WAIT_EVENT, self._cpu(2_800))
        self._add_event_id(event_id)
        self._gpu_row(
            "gpu_sync",
            api_start + self._cpu(500),
            api_end - self._cpu(300),
            "Stream Wait Event",
            stream,
            corr,
            sync_kind="stream_wait_event",
            cuda_event_id=event_id,
            wait_on_stream=source_stream,
        )
        self.stream_free[stream] = max(self.stream_free[stream], ready)
        self.t = api_end + self._cpu(self.c.launch_gap)

    def link_projections(self) -> list[Event]:
        """Kineto's GPU-side copies of user annotations: per annotation and stream, the span of
        the GPU work launched directly inside it, widened by 1 ns each side."""
        spans: dict[tuple[int, int, int], tuple[int, int]] = {}
        for gpu_index, ann_index in self._links:
            g = self.events[gpu_index]
            assert g.device is not None and g.stream is not None
            key = (ann_index, g.device, g.stream)
            lo, hi = spans.get(key, (g.start_ns, g.end_ns))
            spans[key] = (min(lo, g.start_ns), max(hi, g.end_ns))
        out: list[Event] = []
        for (ann_index, device, stream), (lo, hi) in sorted(spans.items()):
            ann = self.events[ann_index]
            out.append(
                Event(
                    "range",
                    lo - 1,
                    hi + 1,
                    ann.name,
                    len(self.events) + len(out),
                    device=device,
                    stream=stream,
                    external_id=ann.external_id,
                    step_range=ann.step_range,
                    user_annotation=True,
                )
            )
        return out


def _advance(gen: Generator[_CollectiveCall, int, None], value: int | None) -> _CollectiveCall | None:
    try:
        return next(gen) if value is None else gen.send(value)
    except StopIteration:
        return None


def _all_reduce(sim: _RankSim, elements: int, transfer_ns: int) -> Generator[_CollectiveCall, int, None]:
    sc = sim.sc
    comm = CommInfo("allreduce", elements, "BFloat16", tuple(range(sc.world_size)))
    with sim.annotation(NCCL_ALL_REDUCE), sim.op("record_param_comms", 9_000):
        event = sim.event_record(sc.compute_stream)
        sim.stream_wait_event(sc.nccl_stream, event, sc.compute_stream)
        api_start, api_end, corr = sim._api(LAUNCH_KERNEL, sim._cpu(9_000))
        ready = max(api_start + sim._cpu(sim.c.launch_latency), sim.stream_free[sc.nccl_stream])
        end = yield _CollectiveCall(ready, transfer_ns)
        sim.stream_free[sc.nccl_stream] = end
        spec = KERNELS["allreduce"]
        sim._gpu_row("kernel", ready, end, spec.name, sc.nccl_stream, corr, kernel=spec, comm=comm)
        sim.t = api_end + sim._cpu(sim.c.launch_gap)


def _layer_norm(sim: _RankSim) -> None:
    c = sim.c
    if not c.unfused:
        with sim.op("aten::layer_norm", 4_000), sim.op("aten::native_layer_norm"):
            sim.kernel("layer_norm", c.norm)
        return
    # x - mean, / sqrt(var + eps), * w + b, written out in Python: one tiny kernel per op.
    for op_name, key in (
        ("aten::mean", "mul_scalar"),
        ("aten::sub", "add"),
        ("aten::pow", "mul"),
        ("aten::mean", "mul_scalar"),
        ("aten::add", "add"),
        ("aten::rsqrt", "tanh"),
        ("aten::mul", "mul"),
        ("aten::mul", "mul"),
        ("aten::add", "add"),
    ):
        with sim.op(op_name):
            sim.kernel(key, c.tiny)


def _gelu(sim: _RankSim) -> None:
    c = sim.c
    if not c.unfused:
        with sim.op("aten::gelu"):
            sim.kernel("gelu", c.gelu)
        return
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), op by op.
    for op_name, key in (
        ("aten::pow", "mul"),
        ("aten::mul", "mul_scalar"),
        ("aten::add", "add"),
        ("aten::mul", "mul_scalar"),
        ("aten::tanh", "tanh"),
        ("aten::add", "add"),
        ("aten::mul", "mul"),
        ("aten::mul", "mul_scalar"),
    ):
        with sim.op(op_name):
            sim.kernel(key, c.tiny)


def _gemm(sim: _RankSim, op_name: str, which: str, key: int = 0) -> None:
    with sim.op(op_name):
        sim.kernel(sim.c.gemm_kernels[key], sim.c.gemm[which])


def _forward_layer(sim: _RankSim) -> None:
    c = sim.c
    _layer_norm(sim)
    _gemm(sim, "aten::addmm", "qkv")
    _gemm(sim, "aten::bmm", "scores", 3)
    with sim.op("aten::_softmax"):
        sim.kernel("softmax", c.softmax)
    _gemm(sim, "aten::bmm", "pv", 3)
    _gemm(sim, "aten::addmm", "out")
    with sim.op("aten::add"):
        sim.kernel("add", c.add)
    _layer_norm(sim)
    _gemm(sim, "aten::addmm", "fc1")
    _gelu(sim)
    _gemm(sim, "aten::addmm", "fc2")
    with sim.op("aten::add"):
        sim.kernel("add", c.add)


def _backward_gemm(sim: _RankSim, node: str, which: str, bmm: bool = False) -> None:
    with sim.op(f"autograd::engine::evaluate_function: {node}", 5_000), sim.op(node, 3_000):
        for key, op_name in ((1, "aten::bmm" if bmm else "aten::mm"), (2, "aten::bmm" if bmm else "aten::mm")):
            with sim.op(op_name):
                sim.kernel(sim.c.gemm_kernels[3 if bmm else key], sim.c.gemm[which])


def _backward_norm(sim: _RankSim) -> None:
    c = sim.c
    if c.unfused:
        with sim.op("autograd::engine::evaluate_function: MulBackward0", 5_000):
            for op_name, key in (
                ("aten::mul", "mul"),
                ("aten::sum", "mul_scalar"),
                ("aten::mul", "mul"),
                ("aten::sub", "add"),
                ("aten::mul", "mul"),
                ("aten::add", "add"),
            ):
                with sim.op(op_name):
                    sim.kernel(key, c.tiny)
        return
    with (
        sim.op("autograd::engine::evaluate_function: NativeLayerNormBackward0", 5_000),
        sim.op("NativeLayerNormBackward0", 3_000),
        sim.op("aten::native_layer_norm_backward"),
    ):
        sim.kernel("layer_norm_bwd_input", c.norm_bwd_input)
        sim.kernel("layer_norm_bwd_params", c.norm_bwd_params)


def _backward_layer(sim: _RankSim) -> None:
    c = sim.c
    with sim.op("autograd::engine::evaluate_function: AddBackward0", 5_000), sim.op("aten::add"):
        sim.kernel("add", c.add)
    _backward_gemm(sim, "AddmmBackward0", "fc2")
    if c.unfused:
        with sim.op("autograd::engine::evaluate_function: TanhBackward0", 5_000):
            for op_name, key in (
                ("aten::mul", "mul"),
                ("aten::tanh_backward", "tanh"),
                ("aten::mul", "mul_scalar"),
                ("aten::add", "add"),
                ("aten::mul", "mul"),
                ("aten::pow", "mul"),
            ):
                with sim.op(op_name):
                    sim.kernel(key, c.tiny)
    else:
        with sim.op("autograd::engine::evaluate_function: GeluBackward0", 5_000), sim.op("aten::gelu_backward"):
            sim.kernel("gelu_bwd", c.gelu_bwd)
    _backward_gemm(sim, "AddmmBackward0", "fc1")
    _backward_norm(sim)
    _backward_gemm(sim, "AddmmBackward0", "out")
    _backward_gemm(sim, "BmmBackward0", "pv", bmm=True)
    with sim.op("autograd::engine::evaluate_function: SoftmaxBackward0", 5_000), sim.op("aten::_softmax_backward_data"):
        sim.kernel("softmax_bwd", c.softmax_bwd)
    _backward_gemm(sim, "BmmBackward0", "scores", bmm=True)
    _backward_gemm(sim, "AddmmBackward0", "qkv")
    _backward_norm(sim)


def _finite_check(sim: _RankSim) -> None:
    """``if not torch.isfinite(h).all().item(): ...`` followed by host-side bookkeeping."""
    c = sim.c
    with sim.op("aten::isfinite"):
        sim.kernel("isfinite", c.tiny)
    with sim.op("aten::all"):
        sim.kernel("all_reduce_bool", 4_000)
    _item(sim)
    sim.host(c.post_sync_host)


def _item(sim: _RankSim) -> None:
    with sim.op("aten::item", 4_000), sim.op("aten::_local_scalar_dense", 6_000):
        sim.memcpy("DtoH", 4, 1_400, MEM_DEVICE, MEM_PAGEABLE, blocking=False)
        sim.stream_synchronize(sim.sc.compute_stream)


def _step_program(sim: _RankSim, step_number: int) -> Generator[_CollectiveCall, int, None]:
    sc, c = sim.sc, sim.c
    with sim.annotation(f"ProfilerStep#{step_number}", step_range=True):
        with sim.annotation(DATALOADER_NEXT):
            sim.host(c.data_loading)
        with sim.op("aten::to", 4_000), sim.op("aten::_to_copy", 3_000), sim.op("aten::copy_"):
            src = MEM_PINNED if c.input_pinned else MEM_PAGEABLE
            sim.memcpy("HtoD", c.input_bytes, c.input_copy, src, MEM_DEVICE, blocking=not c.input_pinned)
        with sim.annotation(OPTIMIZER_ZERO_GRAD):
            sim.host(20_000)
        with sim.annotation(DDP_FORWARD):
            for _ in range(sc.layers):
                _forward_layer(sim)
                if c.sync_checks:
                    _finite_check(sim)
            with sim.op("aten::cross_entropy_loss", 5_000):
                with sim.op("aten::log_softmax"):
                    sim.kernel("log_softmax", c.loss)
                with sim.op("aten::nll_loss_nd"):
                    sim.kernel("nll_loss", c.loss // 4)
        with sim.op("autograd::engine::evaluate_function: NllLossBackward0", 5_000):
            with sim.op("aten::zero_"):
                sim.memset(c.memset_bytes, c.memset)
            sim.kernel("nll_loss_bwd", c.loss // 4)
            sim.kernel("log_softmax_bwd", c.loss)
        n_buckets = sc.layers
        for layer in range(sc.layers):
            _backward_layer(sim)
            if c.overlap_comm:
                last = layer == n_buckets - 1
                yield from _all_reduce(sim, c.bucket_elements, c.last_bucket_transfer if last else c.bucket_transfer)
        if not c.overlap_comm:
            yield from _all_reduce(sim, c.bucket_elements, c.bucket_transfer)
        with sim.op("DDP::finalize_backward", 4_000):  # the compute stream waits for the last all-reduce
            event = sim.event_record(sc.nccl_stream)
            sim.stream_wait_event(sc.compute_stream, event, sc.nccl_stream)
        with sim.annotation(OPTIMIZER_STEP), sim.op("aten::_fused_adamw_", 20_000):
            for _ in range(c.optimizer_chunks):
                sim.kernel("fused_adam", c.optimizer_chunk)
        _item(sim)
        sim.host(25_000)


def _simulate_step(
    scenario: Scenario, costs: _Costs, procs: tuple[ProcessInfo, ...], index: int, step_number: int
) -> StepTemplate:
    straggler = scenario.resolved_straggler_rank() if scenario.knobs.straggler else -1
    sims = [
        _RankSim(
            scenario,
            costs,
            p,
            random.Random(f"{scenario.name}:{scenario.seed}:{index}:{p.rank}"),
            scenario.straggler_slowdown if p.rank == straggler else 1.0,
        )
        for p in procs
    ]
    link_rng = random.Random(f"{scenario.name}:{scenario.seed}:{index}:collectives")
    gens = [_step_program(sim, step_number) for sim in sims]
    calls = [_advance(g, None) for g in gens]
    while any(call is not None for call in calls):
        if any(call is None for call in calls):
            raise RuntimeError("ranks disagree on the number of collectives")
        ready = max(call.ready_ns for call in calls if call is not None)
        transfer = max(call.transfer_ns for call in calls if call is not None)
        end = ready + max(1_000, round(transfer * (1.0 + link_rng.gauss(0.0, 0.03))))
        calls = [_advance(g, end + link_rng.randrange(0, 1_500)) for g in gens]
    period = max(sim.t for sim in sims)
    per_rank: list[tuple[Event, ...]] = []
    for sim in sims:
        sim.events[0] = replace(sim.events[0], end_ns=period)  # the ProfilerStep range spans the period
        events = sim.events + sim.link_projections()
        per_rank.append(tuple(sorted(events, key=lambda e: (e.start_ns, -e.end_ns, e.seq))))
    return StepTemplate(period, tuple(per_rank), tuple(s.n_corr for s in sims), tuple(s.n_ext for s in sims))


def build_timeline(scenario: Scenario) -> Timeline:
    """Simulate ``scenario`` into a :class:`Timeline` (deterministic: same scenario, same result)."""
    procs = tuple(
        ProcessInfo(
            rank=r, pid=scenario.first_pid + 1_117 * r, tid=scenario.first_pid + 1_117 * r, device=r, context=r + 1
        )
        for r in range(scenario.ranks)
    )
    costs = _costs(scenario.knobs, scenario.tuned)
    n_templates = scenario.steps if scenario.distinct_steps is None else min(scenario.steps, scenario.distinct_steps)
    templates = tuple(
        _simulate_step(scenario, costs, procs, i, scenario.first_step_number + i) for i in range(n_templates)
    )
    instances: list[StepInstance] = []
    offset = TRACE_ORIGIN_NS + FIRST_STEP_DELAY_NS
    corr = [_CORRELATION_START] * scenario.ranks
    ext = [_EXTERNAL_ID_START] * scenario.ranks
    for k in range(scenario.steps):
        t_index = k % n_templates
        template = templates[t_index]
        instances.append(StepInstance(t_index, scenario.first_step_number + k, offset, tuple(corr), tuple(ext)))
        offset += template.period_ns
        corr = [c + n for c, n in zip(corr, template.correlation_count, strict=True)]
        ext = [e + n for e, n in zip(ext, template.external_id_count, strict=True)]
    return Timeline(scenario, procs, templates, tuple(instances))
