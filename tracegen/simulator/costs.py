"""The cost model: how long each part of a simulated step takes, for a scenario's knobs.

:func:`costs_for` turns a scenario's :class:`~tracegen.scenario.Knobs` (and ``tuned``) into the
:class:`Costs` the rank simulator draws from: kernel durations per GEMM shape and kernel class,
CPU overheads per op and launch, input loading and copy, and the DDP all-reduce's bucket size and
transfer time.  A knob changes only the costs it plants; the rank simulator adds the jitter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from tracegen.scenario import Knobs


@dataclass(frozen=True)
class Costs:
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


def costs_for(knobs: Knobs, tuned: bool) -> Costs:
    """The costs of a step with ``knobs`` planted; ``tuned``: prefetched pinned input, a small last bucket."""
    c = Costs(gemm=dict(_MEDIUM_GEMMS))
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
