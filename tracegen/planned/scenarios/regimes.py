"""Seed 000's three regimes (overhead-, memory-, compute-bound), one fix each, and a clean control.

The memory-bound regime is :data:`~tracegen.planned.scenarios.diagnosis.MEMORY_BOUND` (the
diagnosis row's timeline); the overhead-bound one here is the regime figure's workload (a small
matmul and elementwise ops at 3.6 us of CPU per launch).  Times are ns from the job's origin; ``S``
is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, nccl, synced_step
from tracegen.planned.scenarios.diagnosis import LAUNCH_BOUND_TIMING
from tracegen.planned.scenarios.truth import FINDINGS, DeviceTruth, PlantedScenario, all_but, idle

_FRAME = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * 3)
"""The synced_step frame's idle (blocks.py) over four steps."""
_LAYER = (("aten::mm", "sgemm", 3_000), *(("aten::add", "add", 1_500),) * 2, *(("aten::gelu", "gelu", 1_500),) * 2)
"""One layer at small n: a 3 us matmul, then four 1.5 us elementwise ops."""


# -- overhead-bound: ten such layers per step, 3.6 us of CPU per launch, no sync.
def _overhead_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():  # 50 ops of 3_600: S .. S + 180_000
            for _ in range(10):
                for name, key, dur in _LAYER:
                    th.op(name, K[key], dur)


def _overhead() -> PlannedJob:
    return build_job("regime_overhead_bound", _overhead_program, timing=LAUNCH_BOUND_TIMING)


# As in launch_bound (diagnosis.py): kernel i runs from S + 3_600 i + 6_100, so the gap after it is 3_600 - d_i:
# 600 after a matmul, 2_100 after an elementwise op, all launch (rule 7).  Window [S, S + 180_000): gaps after
# kernels 0..47: 10 matmuls x 600 + 38 x 2_100 = 85_800; step 0 adds its leading 6_100 (91_900); later steps add the
# previous step's gaps after kernels 48 and 49 (both elementwise): 2 x 2_100 (90_000).
REGIME_OVERHEAD_BOUND = PlantedScenario(
    "regime_overhead_bound",
    (
        "seed 000 regime: overhead-bound (CPU time per kernel x kernels; small matmul + elementwise at small n)",
        "seed 000 tools table: CUDA graphs / fusion help, faster kernels do not",
    ),
    _overhead,
    (DeviceTruth(0, (idle(launch=91_900), *(idle(launch=90_000),) * 3), (0,) * 4, "overhead-bound"),),
    must_fire=("launch_bound",),
    must_not_fire=all_but("launch_bound", "small_kernels"),
    fix_keywords={"launch_bound": ("CUDA graph",)},
)


# -- compute-bound: six 300 us gemms per step, the CPU far ahead.
def _compute_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with synced_step(th):
            gemms(th, [300_000] * 6)


def _compute() -> PlannedJob:
    return build_job("regime_compute_bound", _compute_program)


# Gemms back to back [S + 7_500, S + 1_807_500); the sync returns S + 1_808_500.  Idle: the frame's (0.5%).
REGIME_COMPUTE_BOUND = PlantedScenario(
    "regime_compute_bound",
    ("seed 000 regime: compute-bound (large matmuls; compilation does not help)",),
    _compute,
    (DeviceTruth(0, _FRAME, (0,) * 4, "compute-bound"),),
    must_not_fire=FINDINGS,
    forbidden_fix_words=("CUDA graph",),
)


# -- the clean control: a prefetched batch, forward and backward gemms with a layer norm, the gradients' all-reduce
#    hidden behind the last gemm, a fused optimizer, one sync per step.
def _clean_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            th.loader(8_000)
            th.h2d(64 << 20, 10_000)
            th.op("aten::mm", K["gemm_fwd"], 200_000)
            th.op("aten::native_layer_norm", K["layer_norm"], 20_000)
            gemms(th, [200_000] * 2, key="gemm_dgrad")
            grads = th.record_event()
            th.wait_event(rank.comm_stream, grads)
            th.collective("c10d::allreduce_", K["allreduce"], 100_000, comm=nccl("allreduce", 8))
            th.op("aten::mm", K["gemm_wgrad"], 200_000)  # beside the all-reduce
            reduced = th.record_event(rank.comm_stream)
            th.wait_event(None, reduced)
            th.op("aten::_fused_adamw_", K["fused_adam"], 30_000)
            th.sync()


def _clean() -> PlannedJob:
    return build_job("clean_control", _clean_program, world_size=8)


# Loader [S, S + 8_000); copy [S + 12_500, S + 22_500); gemm, norm, gemms [S + 22_500, S + 642_500); the all-reduce
# [S + 642_500, S + 742_500) beside the last gemm [S + 642_500, S + 842_500); Adam [S + 842_500, S + 872_500); the
# sync returns S + 873_500.  Idle: at each step boundary 1_000 blocked (sync), the loader's 8_000 (input, 0.9%), the
# copy's op 4_500 (sync, rule 6; launch in step 0).  Exposed communication 0.
REGIME_CLEAN = PlantedScenario(
    "clean_control",
    ("the clean control: a healthy compute-bound step, no finding",),
    _clean,
    (
        DeviceTruth(
            0,
            (idle(input=8_000, launch=4_500, sync=1_000), *(idle(input=8_000, sync=5_500),) * 3),
            (0,) * 4,
            "compute-bound",
        ),
    ),
    must_not_fire=FINDINGS,
    comm_kernels=(K["allreduce"].name,),
)

REGIMES = (REGIME_OVERHEAD_BOUND, REGIME_COMPUTE_BOUND, REGIME_CLEAN)
