"""Seed 000's straggler row on four ranks, three steps, one all-reduce per step: slow GPU, slow CPU, slow loader.

Issue 13's case 6: one collective per step must be enough to name the straggler when every wait
points at it, and a rank late for CPU reasons must be named with its host state.  Every rank
computes, then all-reduces its gradients (the all-reduce ends on every rank at the last rank's
arrival + 100 us), then steps the optimizer and synchronises, so the ranks' steps start together.
Times are ns from the job's origin; ``S`` is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, nccl, reduce_then_step, synced_step
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, StragglerTruth, idle

RANKS = 4
TRANSFER_NS = 100_000
_COMM = nccl("allreduce", RANKS)
_FRAME = (idle(cpu=3_000, launch=4_500, sync=1_000), idle(sync=8_500), idle(sync=8_500))
"""The synced_step frame's idle (blocks.py) over three steps."""
_QUIET = ("launch_bound", "host_sync", "memory_bound_kernels", "small_kernels")


# -- a slow GPU: rank 2's gemms take 1.5x as long (thermal limits).
def _slow_gpu_program(rank: Rank) -> None:
    th = rank.main
    gemm_ns = 150_000 if rank.index == 2 else 100_000
    for _ in range(3):
        with synced_step(th):
            gemms(th, [gemm_ns] * 4, key="gemm_wgrad")
            reduce_then_step(rank, th, TRANSFER_NS, comm=_COMM)


def _slow_gpu() -> PlannedJob:
    return build_job("straggler_slow_gpu", _slow_gpu_program, ranks=RANKS)


# Gemms from S + 7_500: done at S + 407_500 (ranks 0, 1, 3) and S + 607_500 (rank 2), each rank's all-reduce
# starting then; all end at S + 607_500 + 100_000 = S + 707_500; Adam [S + 707_500, S + 757_500); every sync returns
# S + 758_500 = the step's end on every rank.  Fast ranks wait 200_000 (26.4% of the step) inside the all-reduce:
# exposed 300_000 per step; rank 2's is 100_000.  No idle but the frame's.
_SLOW_GPU_FAST = (300_000,) * 3
STRAGGLER_SLOW_GPU = PlantedScenario(
    "straggler_slow_gpu",
    (
        "seed 000 diagnosis row: straggler (long NCCL kernels on the fast ranks)",
        "issue 13 case 6: one all-reduce per step over three steps; the others lose over a quarter of their step",
    ),
    _slow_gpu,
    tuple(DeviceTruth(r, _FRAME, (100_000,) * 3 if r == 2 else _SLOW_GPU_FAST, "compute-bound") for r in range(RANKS)),
    must_fire=("straggler",),
    must_not_fire=(*_QUIET, "input_stall"),
    fix_keywords={"straggler": ("node",)},
    straggler=StragglerTruth(2, "gpu"),
    comm_kernels=(K["allreduce"].name,),
)


# -- a slow CPU: rank 1 pauses 500 us (a GC-like pause, nothing recorded) after launching its forward.
GC_PAUSE_NS = 500_000


def _gc_pause_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(3):
        with synced_step(th):
            gemms(th, [100_000] * 2, key="gemm_fwd")
            if rank.index == 1:
                th.python(GC_PAUSE_NS)
            gemms(th, [100_000] * 2, key="gemm_wgrad")
            reduce_then_step(rank, th, TRANSFER_NS, comm=_COMM)


def _gc_pause() -> PlannedJob:
    return build_job("straggler_gc_pause", _gc_pause_program, ranks=RANKS)


# Ranks 0, 2, 3: gemms [S + 7_500, S + 407_500), all-reduce from S + 407_500.
# Rank 1: forward gemms [S + 7_500, S + 207_500); the pause from S + 7_000 to S + 507_000; the next ops at S + 507_000
# and S + 509_000, kernels [S + 511_500, S + 711_500); its all-reduce from S + 711_500.
# All-reduces end S + 811_500; Adam [S + 811_500, S + 861_500); syncs return S + 862_500 = the step's end.
#   Rank 1's gap [S + 207_500, S + 511_500): the pause (its thread inside only the step range) until the next op
#   starts at S + 507_000: cpu 299_500 (rule 8); the op to its kernel: launch 4_500 (rule 7; no sync since the step
#   began drained the queue, since the forward was launched after it).
#   The others wait 304_000 (35.2% of the step) for rank 1: exposed 404_000 per step; rank 1's: 100_000.
_GC_RANK1 = (
    idle(cpu=3_000 + 299_500, launch=4_500 + 4_500, sync=1_000),
    idle(cpu=299_500, launch=4_500, sync=8_500),
    idle(cpu=299_500, launch=4_500, sync=8_500),
)
STRAGGLER_GC_PAUSE = PlantedScenario(
    "straggler_gc_pause",
    (
        "seed 000 diagnosis row: straggler",
        "issue 13 case 6: the slow rank is slow because of its CPU (a GC pause); its host state named",
    ),
    _gc_pause,
    tuple(
        DeviceTruth(r, _GC_RANK1 if r == 1 else _FRAME, (100_000,) * 3 if r == 1 else (404_000,) * 3, None)
        for r in range(RANKS)
    ),
    must_fire=("straggler",),
    must_not_fire=(*_QUIET, "input_stall"),
    straggler=StragglerTruth(1, "cpu", ("CPU", "pause", "GC")),
    comm_kernels=(K["allreduce"].name,),
)


# -- a slow loader: rank 3's DataLoader takes 620 us per batch, the others' 20 us.
def _slow_loader_program(rank: Rank) -> None:
    th = rank.main
    loader_ns = 620_000 if rank.index == 3 else 20_000
    for _ in range(3):
        with th.step():
            th.loader(loader_ns)
            th.h2d(64 << 20, 20_000)
            gemms(th, [100_000] * 4, key="gemm_wgrad")
            reduce_then_step(rank, th, TRANSFER_NS, comm=_COMM)
            th.sync()


def _slow_loader() -> PlannedJob:
    return build_job("straggler_slow_loader", _slow_loader_program, ranks=RANKS)


# With loader time l: copy [S + l + 4_500, S + l + 24_500), gemms to S + l + 424_500, the all-reduce from then:
# S + 444_500 (l = 20_000), S + 1_044_500 (rank 3).  All end S + 1_144_500; Adam to S + 1_194_500; syncs return
# S + 1_195_500 = the step's end on every rank.
#   Each rank's step-boundary gap, ended by its copy: 1_000 blocked (sync), the loader l (input, rule 4), the copy's op
#   4_500 (sync, rule 6; launch in step 0, which no sync precedes).
#   The others wait 600_000 (50.2% of the step): exposed 700_000 per step; rank 3's: 100_000.
def _loader_steps(loader_ns: int) -> tuple[dict[str, int], ...]:
    return (
        idle(input=loader_ns, launch=4_500, sync=1_000),
        idle(input=loader_ns, sync=5_500),
        idle(input=loader_ns, sync=5_500),
    )


STRAGGLER_SLOW_LOADER = PlantedScenario(
    "straggler_slow_loader",
    (
        "seed 000 diagnosis row: straggler",
        "issue 13 case 6: the slow rank is late because of its loader; its host state named",
    ),
    _slow_loader,
    tuple(
        DeviceTruth(
            r,
            _loader_steps(620_000 if r == 3 else 20_000),
            (100_000,) * 3 if r == 3 else (700_000,) * 3,
            "input-bound" if r == 3 else "communication-bound",
        )
        for r in range(RANKS)
    ),
    must_fire=("straggler", "input_stall"),
    must_not_fire=_QUIET,
    straggler=StragglerTruth(3, "input", ("loader", "input")),
    comm_kernels=(K["allreduce"].name,),
)

MULTI_RANK = (STRAGGLER_SLOW_GPU, STRAGGLER_GC_PAUSE, STRAGGLER_SLOW_LOADER)
