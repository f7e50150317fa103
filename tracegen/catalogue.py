"""The kernel catalogue: the GPU, the kernels, the CUDA calls and the op names of a simulated step.

What a synthetic training step *runs*, named the way real traces name it: the GPU model
(:class:`GpuSpec`, :data:`H100_SXM`), every kernel with its demangled name, class and launch
configuration (:data:`KERNELS`), the CUDA runtime calls with their nsys spellings and CUPTI ids
(:class:`ApiSpec`), what an NCCL kernel carries (:class:`CommInfo`), the ``record_function``
names PyTorch gives the phases of a step, and the memory kinds of copies and memsets.  How long
each of these takes is the cost model's business (:mod:`tracegen.simulator.costs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

# nsys ENUM_CUDA_MEM_KIND values, used for memcpy source/destination and memset memory.
MEM_PAGEABLE: Final = 0
MEM_PINNED: Final = 1
MEM_DEVICE: Final = 2


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

# The ``record_function`` ranges PyTorch opens around the phases of a step, spelled as it spells them.
DATALOADER_NEXT: Final = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DDP_FORWARD: Final = "DistributedDataParallel.forward"
NCCL_ALL_REDUCE: Final = "nccl:all_reduce"
OPTIMIZER_STEP: Final = "Optimizer.step#AdamW.step"
OPTIMIZER_ZERO_GRAD: Final = "Optimizer.zero_grad#AdamW.zero_grad"
