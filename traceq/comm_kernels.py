"""Which GPU kernels are communication: one documented list of kernel-name patterns.

Both the importers (the ``is_comm`` column they write) and the analyses (which recompute
``is_comm`` from the kernel names with the user's patterns added, ``--comm-pattern``) read
:data:`DEFAULT_COMM_PATTERNS`, so a kernel is communication by the same rule wherever it is asked.
Each pattern is a Rust-syntax regex (what polars matches: no look-around) searched anywhere in the
kernel's name, case-sensitively unless it says ``(?i)``; a name matching any pattern is a
communication kernel.  Every name below was read in the library's source or in a published trace;
the comment above each pattern says where.  ``docs/analyses.md`` ("Communication kernels") lists
them for users.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import polars as pl

from traceq.errors import InvalidArgumentError


@dataclass(frozen=True)
class CommPattern:
    """One library's communication kernels: its name and a regex over kernel names."""

    library: str
    regex: str


DEFAULT_COMM_PATTERNS: Final[tuple[CommPattern, ...]] = (
    # NVIDIA/nccl: ncclKernel_<Coll>_<Algo>_<Proto>_<Op>_<type> (NCCL <= 2.18; the HTA traces in
    # ../shared/sample_traces: ncclKernel_AllReduce_RING_LL_Sum_float), ncclDevKernel_<...> (2.19 on,
    # src/device/generate.py; the nsys 2-GPU export: ncclDevKernel_SendRecv), NCCL 2.x
    # nccl<Coll>RingLLKernel_*.  RCCL (ROCm/rccl) keeps these names (ncclDevKernel_Generic_1 on MI300X).
    CommPattern("NCCL", r"(?i)^nccl"),
    # ROCm/rccl: rccl_main_kernel (src/device/common.h, "Declare rccl main/general kernel"), and the
    # first RCCL's RcclKernel* / rcclAllReduceFirstCopy.
    CommPattern("RCCL", r"(?i)^rccl"),
    # MSCCL (Azure/msccl, and inside ROCm/rccl src/include/msccl/msccl_kernel.h):
    # MSCCL_KERNEL_ENTRY_NAME(devredop, type, proto) = mscclKernel_Sum_half_Simple; on MI300X traces
    # mscclKernel_Sum_hip_bfloat16_Simple_false.
    CommPattern("MSCCL", r"^mscclKernel_"),
    # MSCCL++ (microsoft/mscclpp apps/nccl/src/allreduce.hpp: allreduceAllPairs, allreduce7 ...
    # allreduce11; allgather.hpp: allgather8): kernels in the global namespace, so a demangled name
    # is "void allreduce7<(Op)0, __half>(...)" and a short one "allreduce7".
    CommPattern("MSCCL++", r"^(?:void )?(?:allreduce(?:\d+|AllPairs)|allgather\d+)\b"),
    # DeepEP (deepseek-ai/DeepEP csrc/kernels/intranode.cu, internode.cu, internode_ll.cu:
    # deep_ep::intranode::{notify_dispatch, cached_notify_dispatch, dispatch, combine, ...},
    # deep_ep::internode_ll::{dispatch, combine, clean_low_latency_buffer}); DeepSeek's own build in
    # deepseek-ai/profile-data (train.json, decode.json): dpsk::ep::internode::{dispatch, combine,
    # notify_dispatch, cached_notify}, dispatch_ll, combine_ll.  The layout kernels
    # (deep_ep::layout::get_dispatch_layout, dpsk::ep::cuda::get_dispatch_layout) compute locally and
    # are left out; \b keeps the CUB kernels of namespace cdpsk::ep:: out.
    CommPattern("DeepEP", r"\b(?:dpsk::ep|deep_ep)::(?:intranode|internode(?:_ll)?)::"),
    # PyTorch symmetric memory (pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/
    # CUDASymmetricMemoryOps.cu): multimem_all_reduce_kernel, multimem_one_shot_all_reduce_kernel,
    # multimem_all_gather_kernel, one_shot_all_reduce_kernel, two_shot_all_reduce_kernel(_inplace);
    # "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(...)" in vLLM traces.
    CommPattern(
        "PyTorch symmetric memory",
        r"\bmultimem_(?:one_shot_)?all_(?:reduce|gather)_kernel|\b(?:one|two)_shot_all_reduce_kernel",
    ),
    # c10d's intra-node all-reduce of PyTorch 2.3-2.4 (torch/csrc/distributed/c10d/intra_node_comm.cu:
    # oneShotAllReduceKernel, twoShotAllReduceKernel, hybridCubeMeshAllReduceKernel); TensorRT-LLM's
    # custom all-reduce uses the first two names too (cpp/tensorrt_llm/kernels/customAllReduceKernels.cu).
    CommPattern("c10d intra-node", r"\b(?:one|two)ShotAllReduceKernel|\bhybridCubeMeshAllReduceKernel"),
    # vLLM's custom all-reduce (vllm-project/vllm csrc/custom_all_reduce.cuh): cross_device_reduce_1stage,
    # cross_device_reduce_2stage, cross_device_reduce_half_butterfly; sglang and aiter keep the names.
    CommPattern("vLLM custom all-reduce", r"\bcross_device_reduce_(?:1stage|2stage|half_butterfly)"),
    # NVSHMEM's stream collectives (src/host/coll/: barrier_on_stream_kernel(_threadgroup),
    # sync_on_stream_kernel_threadgroup, alltoall_on_stream_kernel, broadcast_<T>_on_stream_kernel,
    # rdxn_on_stream_kernel, nvshmemi_<T>_wait_until_on_stream_kernel; vendored in bytedance/flux
    # 3rdparty/nvshmem), and ROCSHMEM's rocshmem_reduce_on_stream_kernel.
    CommPattern("NVSHMEM", r"_on_stream_kernel"),
    # Gloo's CUDA collectives move data through host memory (memcpys); their one GPU kernel is the
    # reduction step (facebookincubator/gloo gloo/cuda.cu: gloo::_Kernel_<T>_cudaSum, _cudaProduct,
    # _cudaMin, _cudaMax).
    CommPattern("Gloo", r"\bgloo::_Kernel_"),
)
"""The communication kernels traceq knows, by library, in the order a name is attributed to one."""

USER_PATTERN = "--comm-pattern"
"""What :func:`matched_by` says of a name only the user's patterns match."""

TRACE_METADATA = "trace metadata"
"""What :func:`matched_by` says of a kernel the trace itself marks as a collective (Kineto's
``Collective name`` argument) that no pattern matches."""


def default_regex() -> str:
    """:data:`DEFAULT_COMM_PATTERNS` as one regex."""
    return combined(tuple(p.regex for p in DEFAULT_COMM_PATTERNS))


def combined(patterns: Sequence[str]) -> str:
    """One regex matching what any of ``patterns`` matches; one that matches nothing when empty."""
    if not patterns:
        return r"[^\s\S]"
    return "|".join(f"(?:{p})" for p in patterns)


def effective_patterns(extra: Sequence[str] = (), *, defaults: bool = True) -> tuple[str, ...]:
    """The regexes that make a kernel communication: the defaults (unless ``defaults`` is false),
    then ``extra``."""
    base = tuple(p.regex for p in DEFAULT_COMM_PATTERNS) if defaults else ()
    return (*base, *extra)


def comm_name_expr(name: pl.Expr, patterns: Sequence[str] | None = None) -> pl.Expr:
    """Whether each name (a String or Categorical expression) is a communication kernel by
    ``patterns`` (default: :data:`DEFAULT_COMM_PATTERNS`); null names are not."""
    regex = default_regex() if patterns is None else combined(patterns)
    return name.cast(pl.String).str.contains(regex).fill_null(False)


def matched_by(name: str, extra: Sequence[str] = (), *, defaults: bool = True) -> str | None:
    """The library whose default pattern matches ``name`` first, :data:`USER_PATTERN` when only one
    of ``extra`` does, None when none does."""
    frame = pl.DataFrame({"name": [name]})
    if defaults:
        for p in DEFAULT_COMM_PATTERNS:
            if frame.select(pl.col("name").str.contains(p.regex)).item():
                return p.library
    if extra and frame.select(pl.col("name").str.contains(combined(extra))).item():
        return USER_PATTERN
    return None


def check_patterns(patterns: Sequence[str], option: str) -> None:
    """Raise :class:`~traceq.errors.InvalidArgumentError` naming ``option`` for a pattern that is no
    valid regex (Rust syntax)."""
    for pattern in patterns:
        try:
            pl.Series([""], dtype=pl.String).str.contains(pattern)
        except pl.exceptions.PolarsError as exc:
            raise InvalidArgumentError(
                f"{option} {pattern!r} is not a valid regex ({str(exc).splitlines()[0]})",
                hint="use Rust regex syntax (no look-around); (?i) makes it match any case",
            ) from exc


__all__ = [
    "DEFAULT_COMM_PATTERNS",
    "TRACE_METADATA",
    "USER_PATTERN",
    "CommPattern",
    "check_patterns",
    "combined",
    "comm_name_expr",
    "default_regex",
    "effective_patterns",
    "matched_by",
]
