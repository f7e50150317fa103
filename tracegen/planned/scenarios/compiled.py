"""Compiled steps: a ``torch.compile`` warm-up (seed 004 exercise 8) and a step replayed as a CUDA graph.

Issue 13's cases 4 (``small_kernels`` must not advise CUDA graphs on a replayed step) and 5 (the
first, compiling steps are warm-up: named, left out of the steady state, no ``host_sync`` from
them).  Times are ns from the job's origin; ``S`` is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.names import CALL_USER_COMPILER, TORCH_COMPILED_REGION
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, synced_step
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, all_but, idle
from tracegen.planned.thread import Thread

_COMPILE_NS = ((1_000_000_000, 2_000_000_000), (600_000_000, 1_200_000_000))
"""Per compiling step: Dynamo/Inductor work before and after one autotuning benchmark (3 s, then 1.8 s)."""


def _compiling_step(th: Thread, frame: int) -> None:
    before, after = _COMPILE_NS[frame]
    with th.range(TORCH_COMPILED_REGION.format(frame=frame)):  # first call of this frame: compiles it
        with th.range(CALL_USER_COMPILER):
            th.python(before)
            th.op("aten::mm", K["gemm_fwd"], 100_000)  # an autotuning benchmark kernel ...
            th.device_sync()  # ... timed with cudaDeviceSynchronize
            th.python(after)
        gemms(th, [100_000] * 4)  # the compiled graph's first run


def _compile_program(rank: Rank) -> None:
    th = rank.main
    for k in range(6):
        with synced_step(th):
            if k < 2:
                _compiling_step(th, k)
            else:
                with th.range(TORCH_COMPILED_REGION.format(frame=0)):  # a later call: a cache hit, no compile
                    gemms(th, [100_000] * 4)


def _compile() -> PlannedJob:
    return build_job("compile_warmup", _compile_program, first_step=0)


# Step 0 (S = 0): Python to 3_000; the region and call_user_compiler from 3_000; compile work to 1_000_003_000; the
# benchmark's op, its kernel Kb [1_000_007_500, 1_000_107_500); cudaDeviceSynchronize [1_000_005_000, 1_000_108_500);
# compile work to 3_000_108_500; 4 ops, kernels [3_000_113_000, 3_000_513_000); the region closes at 3_000_116_500;
# the step's sync returns 3_000_514_000 = the step's end.
#   Leading [0, 1_000_007_500): 3_000 Python (cpu), compile ranges to 1_000_005_000 (compile, rule 5:
#   1_000_002_000), blocked in the device sync to 1_000_007_500 (sync, rule 3 outranks compile: 2_500).
#   Gap after Kb [1_000_107_500, 3_000_113_000): 1_000 blocked (sync), 2_000_000_000 in call_user_compiler and
#   4_500 in the region's first instance (compile: 2_000_004_500).  The step's sync return: 1_000 (sync).
#   -> cpu 3_000, compile 1_000_002_000 + 2_000_004_500 = 3_000_006_500, sync 2_500 + 1_000 + 1_000 = 4_500.
# Step 1 (S = 3_000_514_000), region "1/0" (its first instance): the same with 600_000_000 and 1_200_000_000, except
# its leading 3_000 of Python come after step 0's sync, first launches after it: sync (rule 6).
#   -> compile 600_002_000 + 1_200_004_500 = 1_800_006_500, sync 3_000 + 2_500 + 1_000 + 1_000 = 7_500.
# Steps 2-5: a "0/0" region again (no longer its first instance: not compile): the synced_step frame, sync 8_500.
_COMPILE_STEPS = (
    idle(cpu=3_000, compile=3_000_006_500, sync=4_500),
    idle(compile=1_800_006_500, sync=7_500),
    *(idle(sync=8_500),) * 4,
)
COMPILE_WARMUP = PlantedScenario(
    "compile_warmup",
    (
        "seed 004 exercise 8: the torch.compile warm-up trap (first steps seconds long)",
        "issue 13 case 5: warm-up steps named, left out of steady state and findings; no host_sync from them",
        "seed 000: measure steady-state steps only",
    ),
    _compile,
    (DeviceTruth(0, _COMPILE_STEPS, (0,) * 6, "compute-bound"),),
    must_not_fire=all_but("memory_bound_kernels"),
    warmup=2,
)


# -- a step replayed as a CUDA graph: static input copy, one cudaGraphLaunch of a 60 us gemm and 99 kernels of 2 us
#    with 1 us between graph nodes, then a sync.
_GRAPH_NODES = ((K["gemm_fwd"], 60_000), *((K[("add", "mul", "gelu")[i % 3]], 2_000) for i in range(99)))


def _graph_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with synced_step(th):
            th.h2d(1 << 20, 20_000)  # inputs into the graph's static buffers
            th.graph_launch(_GRAPH_NODES, graph_id=1, node_gap_ns=1_000)


def _graph() -> PlannedJob:
    return build_job("cuda_graph_replay", _graph_program)


# Copy's op [S + 3_000, S + 5_000), copy [S + 7_500, S + 27_500); cudaGraphLaunch [S + 5_000, S + 8_000); its kernels
# from the copy's end: the gemm [S + 27_500, S + 87_500), node i (1..99) [S + 85_500 + 3_000 i, +2_000), the last
# ending S + 384_500; the sync returns S + 385_500.
#   99 node gaps of 1_000: each ended by a kernel whose launch (the graph launch) ended long before, queued and
#   able to start: dependency (rule 2), 99_000 per step.
#   Edges: the synced_step frame (the copy is the first work).
# Launch latency: only the copy's start - its call's end (2_500) is within 50 us; every graph node starts at least
# 80_500 after cudaGraphLaunch returned.
_GRAPH_STEPS = (
    idle(cpu=3_000, launch=4_500, sync=1_000, dependency=99_000),
    *(idle(sync=8_500, dependency=99_000),) * 3,
)
CUDA_GRAPH_REPLAY = PlantedScenario(
    "cuda_graph_replay",
    ("issue 13 case 4: a step replayed as a CUDA graph -> small_kernels must not advise CUDA graphs",),
    _graph,
    (DeviceTruth(0, _GRAPH_STEPS, (0,) * 4, None, graph_replayed=True),),
    must_not_fire=all_but("memory_bound_kernels", "small_kernels"),
    forbidden_fix_words=("CUDA graph",),
)

COMPILED = (COMPILE_WARMUP, CUDA_GRAPH_REPLAY)
