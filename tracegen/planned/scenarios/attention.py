"""Seed 004's exercise 5 ("attention is the bottleneck, or is it?") as two traces: seq_len 512 and 8192.

The exercise's table (small model, dim 768): attention takes 25.8% of the forward's FLOPs at
seq_len 512 (FFN 74.2%), 67.8% at 8192 (FFN 32.2%).  Planted as kernel time, a 1 ms forward per
step: the FlashAttention kernel and three FFN gemms.  What the trace must show is the kernel table
(total time per kernel name), which answers the exercise's question; nothing is wrong with either
step, so no finding fires.  ``S`` is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, synced_step
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, idle

STEPS = 4
_FRAME = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * (STEPS - 1))
"""The synced_step frame's idle (blocks.py): the kernels run back to back from S + 7_500."""
_QUIET = (
    "launch_bound",
    "host_sync",
    "input_stall",
    "exposed_comm",
    "straggler",
    "memory_bound_kernels",
    "small_kernels",
)


def _attention_job(name: str, attention_ns: int, ffn_ns: tuple[int, int, int]) -> PlannedJob:
    def program(rank: Rank) -> None:
        th = rank.main
        for _ in range(STEPS):
            with synced_step(th):
                th.op("aten::_scaled_dot_product_flash_attention", K["flash_attn"], attention_ns)
                gemms(th, ffn_ns)

    return build_job(name, program)


def _scenario(seq_len: int, attention_ns: int, ffn_ns: tuple[int, int, int], answer: str) -> PlantedScenario:
    name = f"attention_seq{seq_len}"
    return PlantedScenario(
        name,
        (f"seed 004 exercise 5: at seq_len {seq_len} {answer}",),
        lambda: _attention_job(name, attention_ns, ffn_ns),
        (DeviceTruth(0, _FRAME, (0,) * STEPS, "compute-bound"),),
        must_not_fire=_QUIET,
        kernel_ns={K["flash_attn"].name: STEPS * attention_ns, K["gemm_fwd"].name: STEPS * sum(ffn_ns)},
    )


# 258_000 + 247_000 + 247_000 + 248_000 = 1_000_000 per step: attention 25.8%, FFN 74.2%.
ATTENTION_SEQ512 = _scenario(512, 258_000, (247_000, 247_000, 248_000), "FFN dominates (74.2%)")
# 678_000 + 107_000 + 107_000 + 108_000 = 1_000_000: attention 67.8%, FFN 32.2%.
ATTENTION_SEQ8192 = _scenario(8192, 678_000, (107_000, 107_000, 108_000), "attention dominates (67.8%)")

ATTENTION = (ATTENTION_SEQ512, ATTENTION_SEQ8192)
