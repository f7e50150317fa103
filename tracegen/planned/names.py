"""What hand-planned timelines run, named as real traces name it: GPUs, kernels, CUDA/HIP calls, ranges.

The simulator's catalogue (:mod:`tracegen.catalogue`) holds one training step's kernels; the planned
scenarios (:mod:`tracegen.planned.scenarios`) also need the kernels of other communication
libraries (DeepEP, PyTorch symmetric memory, vLLM's custom all-reduce, RCCL), ROCm kernels and HIP
calls, CUDA-graph launches and the blocking calls behind ``.item()``.  Names follow the real
traces they come from where one was at hand (the MI250 Kineto sample in ``../shared`` for the HIP
calls and Tensile kernel names; published DeepSeek-V3 and vLLM profiles for the others); the DeepEP
and symmetric-memory argument lists are shortened.
"""

from __future__ import annotations

from typing import Final

from tracegen.catalogue import KERNELS, ApiSpec, GpuSpec, KernelClass, KernelSpec

# -- GPUs
H800: Final = GpuSpec(
    name="NVIDIA H800",
    chip_name="GH100",
    sm_count=132,
    memory_bytes=85_029_158_912,
    memory_bandwidth_bytes_per_s=3_352_320_000_000,
    clock_hz=1_980_000_000,
    l2_cache_bytes=52_428_800,
    compute_major=9,
    compute_minor=0,
)
MI300X: Final = GpuSpec(
    name="AMD Instinct MI300X",
    chip_name="gfx942",
    sm_count=304,
    memory_bytes=205_822_885_888,
    memory_bandwidth_bytes_per_s=5_300_000_000_000,
    clock_hz=2_100_000_000,
    l2_cache_bytes=4_194_304,
    compute_major=9,
    compute_minor=4,
    warp_size=64,
    max_warps_per_sm=32,
)

# -- CUDA and HIP calls (name, nsys spelling, CUPTI/roctracer callback id, Kineto draws a launch flow)
CUDA_GRAPH_LAUNCH: Final = ApiSpec("cudaGraphLaunch", "cudaGraphLaunch_v10000", 311, True)
DEVICE_SYNCHRONIZE: Final = ApiSpec("cudaDeviceSynchronize", "cudaDeviceSynchronize_v3020", 165, False)
EVENT_SYNCHRONIZE: Final = ApiSpec("cudaEventSynchronize", "cudaEventSynchronize_v3020", 126, False)
CUDA_MEMCPY: Final = ApiSpec("cudaMemcpy", "cudaMemcpy_v3020", 31, True)
"""The synchronous copy (no ``Async``): returns once the copy is done."""
HIP_LAUNCH_KERNEL: Final = ApiSpec("hipLaunchKernel", "hipLaunchKernel", 25, True)
HIP_MEMCPY_WITH_STREAM: Final = ApiSpec("hipMemcpyWithStream", "hipMemcpyWithStream", 102, True)
"""What PyTorch's ``memcpy_and_sync`` calls on ROCm (``.item()``, ``.cpu()``): a copy that returns when done."""
HIP_MEMCPY_ASYNC: Final = ApiSpec("hipMemcpyAsync", "hipMemcpyAsync", 56, True)
HIP_STREAM_SYNCHRONIZE: Final = ApiSpec("hipStreamSynchronize", "hipStreamSynchronize", 68, False)
HIP_EVENT_RECORD: Final = ApiSpec("hipEventRecord", "hipEventRecord", 53, False)
HIP_STREAM_WAIT_EVENT: Final = ApiSpec("hipStreamWaitEvent", "hipStreamWaitEvent", 70, False)

# -- CPU ranges
TORCH_COMPILED_REGION: Final = "Torch-Compiled Region: {frame}/0"
"""The range a ``torch.compile``'d frame records on every call; the first call compiles it."""
CALL_USER_COMPILER: Final = "OutputGraph.call_user_compiler"
"""Dynamo handing the captured graph to the backend (Inductor): compile work."""


def _kernel(name: str, short: str, cls: KernelClass, grid: int = 132, block: int = 256, regs: int = 64) -> KernelSpec:
    return KernelSpec(name, short, cls, (grid, 1, 1), (block, 1, 1), regs)


def _nccl(collective: str) -> KernelSpec:
    base = f"ncclDevKernel_{collective}_Sum_bf16_RING_LL"
    return KernelSpec(f"{base}(ncclDevKernelArgsStorage<4096ul>)", base, "comm", (24, 1, 1), (640, 1, 1), 96, 0, 87_568)


PLANNED_KERNELS: Final = {
    **KERNELS,
    "reduce_scatter": _nccl("ReduceScatter"),
    "all_gather": KernelSpec(
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclDevKernel_AllGather_RING_LL",
        "comm",
        (24, 1, 1),
        (640, 1, 1),
        96,
        0,
        87_568,
    ),
    "deepep_notify_dispatch": _kernel(
        "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int, int const*, int*, int const*, "
        "int*, int, bool const*, int, int, int, int, int, int, int, int*, int*, int*, int*, void*, void**, int**, int)",
        "notify_dispatch",
        "comm",
    ),
    "deepep_dispatch": _kernel(
        "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*, long*, int4 const*, "
        "float const*, long const*, int, int, int, int, void*, int, int, bool)",
        "dispatch",
        "comm",
        grid=24,
        block=768,
    ),
    "deepep_combine": _kernel(
        "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 4, 2, 8>(int4*, float*, int4 const*, float const*, "
        "bool const*, int const*, int, int, int, void*, int, int, bool)",
        "combine",
        "comm",
        grid=24,
        block=768,
    ),
    "multimem_all_reduce": _kernel(
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
        "unsigned int**, unsigned long, unsigned long)",
        "multimem_all_reduce_kernel",
        "comm",
    ),
    "two_shot_all_reduce": _kernel(
        "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16>(c10::BFloat16*, "
        "unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "two_shot_all_reduce_kernel_inplace",
        "comm",
    ),
    "vllm_custom_all_reduce": _kernel(
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)",
        "cross_device_reduce_1stage",
        "comm",
        grid=36,
        block=512,
    ),
    "rccl_all_reduce": _kernel(
        "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_Generic_4", "comm", 104, 256
    ),
    "tensile_gemm": _kernel(
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1"
        "_CADS0_EPS0_GRVWA8_GRVWB8_GSUAMB_IU1_K1",
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64",
        "gemm",
        grid=608,
    ),
    "direct_copy": _kernel(
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
        "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
        "operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
        "{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::"
        "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
        "operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
        "{lambda(float)#1} const&)::{lambda(int)#1})",
        "elementwise_kernel",
        "elementwise",
        grid=1024,
        block=128,
    ),
    # Inductor's kernels are named by what they fuse and numbered per graph; a recompile renumbers them.
    "triton_fused_pointwise": _kernel(
        "triton_poi_fused_add_gelu_mul_tanh_0", "triton_poi_fused_add_gelu_mul_tanh_0", "elementwise", 528, 128
    ),
    "triton_sum_0": _kernel("triton_red_fused_sum_0", "triton_red_fused_sum_0", "reduce", 132, 512),
    "triton_sum_1": _kernel("triton_red_fused_sum_1", "triton_red_fused_sum_1", "reduce", 132, 512),
    "flash_attn": _kernel(
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, "
        "false>(flash::Flash_fwd_params)",
        "flash_fwd_kernel",
        "gemm",
        grid=1024,
        block=128,
    ),
}
"""Every kernel a planned scenario may run, by key: the simulator's :data:`~tracegen.catalogue.KERNELS`
and the ones above."""
