"""Seed 000's diagnosis table ("Reading a timeline"), one timeline per row, on one rank.

The rows: launch-bound, exposed communication, input stall, host-device sync, memory-bound
kernels (the straggler row needs several ranks: :mod:`tracegen.planned.scenarios.multi_rank`).
Times are ns from the job's origin; ``S`` is a step's start.  Every step window's idle ns by cause
is worked out below from the rules of :mod:`tracegen.planned.rank` and the spec's table.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, nccl, reduce_then_step, synced_step
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, all_but, idle
from tracegen.planned.timing import Timing

# -- launch-bound: 2 us kernels, 3.6 us of CPU per launch (seed 000's proposition), kernels starting 2.5 us after
#    their cudaLaunchKernel returns (issue 13, case 2), and memory-bound by name (case 4: no memory_bound_kernels).
LAUNCH_BOUND_TIMING = Timing(op_before_ns=2_000, launch_ns=1_600)
"""t_cpu = 2_000 + 1_600 = 3_600 ns per op, no CPU time between ops."""
_TINY = (
    ("aten::add", "add"),
    ("aten::mul", "mul"),
    ("aten::gelu", "gelu"),
    ("aten::mul", "mul_scalar"),
    ("aten::tanh", "tanh"),
)


def _launch_bound_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():  # S .. S + 50 * 3_600 = S + 180_000
            for i in range(50):
                name, key = _TINY[i % 5]
                th.op(name, K[key], 2_000)


def _launch_bound() -> PlannedJob:
    return build_job("launch_bound", _launch_bound_program, timing=LAUNCH_BOUND_TIMING)


# Op i of a step starts at S + 3_600 i; its call ends at S + 3_600 i + 3_600; its kernel K_i runs
# [S + 3_600 i + 6_100, S + 3_600 i + 8_100) (the GPU is free by then: K_{i-1} ended at S + 3_600 i + 4_500).
# Between K_i and K_{i+1}: 1_600 ns; op i+1 started at S + 3_600 i + 3_600, before the gap, and its kernel
# starts exactly at its call's end + latency, so every gap ns is `launch` (rule 7; rule 2 never holds).
# Window [S, S + 180_000): K_0..K_47 whole, K_48 = [S + 178_900, S + 180_900) crosses into the next window.
#   Step 0: the leading 6_100 (op 0 from S) + 48 gaps K_0..K_48 x 1_600 = 6_100 + 76_800 = 82_900.
#   Later steps: the previous step's K_48 tail [S, S + 900), gap K_48 -> K_49 [S + 900, S + 2_500) = 1_600,
#   K_49 [S + 2_500, S + 4_500), gap K_49 -> K_0 [S + 4_500, S + 6_100) = 1_600, then 48 gaps:
#   1_600 + 1_600 + 76_800 = 80_000.
LAUNCH_BOUND = PlantedScenario(
    "launch_bound",
    (
        "seed 000 diagnosis row: launch-bound",
        "seed 000 proposition: 2 us kernels, 3.6 us per launch -> busy 2/3.6 = 56%",
        "issue 13 case 2: kernels start 2.5 us after cudaLaunchKernel returns",
        "issue 13 case 4: overhead-bound steps of 2 us kernels, 44% launch idle -> no memory_bound_kernels",
        "seed 000 regime: overhead-bound",
    ),
    _launch_bound,
    (
        DeviceTruth(
            0,
            (idle(launch=82_900), idle(launch=80_000), idle(launch=80_000), idle(launch=80_000)),
            (0, 0, 0, 0),
            "overhead-bound",
        ),
    ),
    must_fire=("launch_bound",),
    must_not_fire=all_but("launch_bound", "small_kernels"),
    fix_keywords={"launch_bound": ("CUDA graph", "fusion")},
)


# -- exposed communication: the all-reduce after the backward has nothing computed beside it.
def _exposed_comm_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with synced_step(th):
            gemms(th, [100_000] * 4, key="gemm_wgrad")
            reduce_then_step(rank, th, 600_000, comm=nccl("allreduce", 8))


def _exposed_comm() -> PlannedJob:
    return build_job("exposed_comm", _exposed_comm_program, world_size=8)


# Ops at S + 3_000 + 2_000 j (j < 4): kernels back to back [S + 7_500, S + 407_500); CPU at S + 11_000.
# reduce_then_step: the all-reduce's call ends at S + 15_000 but it waits for the gemms: [S + 407_500, S + 1_007_500);
# the optimizer waits for it: [S + 1_007_500, S + 1_057_500); the sync (called at S + 19_000) returns at
# S + 1_058_500 = the step's end.  Idle: only the synced_step frame's (blocks.py).  Exposed: 600_000 per step.
_EXPOSED_STEPS = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * 3)
EXPOSED_COMM = PlantedScenario(
    "exposed_comm",
    (
        "seed 000 diagnosis row: exposed communication (NCCL kernels with an empty compute stream, end of backward)",
        "seed 004 symptom table: multi-GPU scaling < 0.8x -> communication",
    ),
    _exposed_comm,
    (DeviceTruth(0, _EXPOSED_STEPS, (600_000,) * 4, "communication-bound"),),
    must_fire=("exposed_comm",),
    must_not_fire=all_but("exposed_comm"),
    fix_keywords={"exposed_comm": ("bucket", "prefetch")},
    comm_kernels=(K["allreduce"].name,),
)


# -- input stall: the main thread waits 500 us in the DataLoader at the start of every step, then the batch's copy.
def _input_stall_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            th.loader(500_000)
            th.h2d(64 << 20, 20_000)
            gemms(th, [100_000] * 4)
            th.sync()


def _input_stall() -> PlannedJob:
    return build_job("input_stall", _input_stall_program)


# Loader [S, S + 500_000); the copy's op [S + 500_000, S + 502_000), copy [S + 504_500, S + 524_500); gemm ops from
# S + 502_000, kernels queued behind the copy: [S + 524_500, S + 924_500); sync from S + 510_000 returns S + 925_500.
# Idle from the last kernel (S - 1_000 of the next step) to the next copy (S' + 504_500):
#   the sync's return, [S' - 1_000, S'): sync (rule 3, blocked);
#   the loader, [S', S' + 500_000): input (rule 4);
#   the copy's op until the copy starts, [S' + 500_000, S' + 504_500): sync (rule 6: first launch after the sync).
# Step 0 has no earlier sync: its leading 500_000 are input and the copy's 4_500 launch (rule 7).
_INPUT_STEPS = (idle(input=500_000, launch=4_500, sync=1_000), *(idle(input=500_000, sync=5_500),) * 3)
INPUT_STALL = PlantedScenario(
    "input_stall",
    (
        "seed 000 diagnosis row: input stall (GPU idle at the start of each step; main thread in the data loader)",
        "seed 004 exercise 9 / symptom table: data loading",
        "issue 13 case 3: idle at the step's start before the first kernel (the leading interval of step 0)",
    ),
    _input_stall,
    # Each step: the copy and four gemms (420_000) from S + 504_500 to S + 924_500, the sync's return: 925_500.
    (DeviceTruth(0, _INPUT_STEPS, (0,) * 4, "input-bound", step_ns=(925_500,) * 4),),
    must_fire=("input_stall",),
    must_not_fire=all_but("input_stall"),
    fix_keywords={"input_stall": ("worker", "pin_memory")},
)


# -- host-device sync: `if loss < x:` after each half of the step: .item() then 40 us of Python, queue drained.
def _host_sync_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            th.python(40_000)
            gemms(th, [100_000] * 2)
            th.item()
            th.python(40_000)
            gemms(th, [100_000] * 2)
            th.item()


def _host_sync() -> PlannedJob:
    return build_job("host_sync", _host_sync_program)


# Python to S + 40_000; gemms [S + 44_500, S + 244_500); .item() at S + 44_000: its copy call [S + 45_000, S + 46_000),
# the copy [S + 244_500, S + 246_000), the sync [S + 46_000, S + 247_000); Python to S + 287_000; gemms
# [S + 291_500, S + 491_500); .item(): copy [S + 491_500, S + 493_000), sync returns S + 494_000 = the step's end.
#   Mid-step gap [S + 246_000, S + 291_500) = 45_500: 1_000 blocked + 44_500 after the sync until the first launch's
#   kernel (rule 6) -> sync 45_500.
#   Step-end gap [S + 493_000, S' + 44_500): 1_000 blocked in this step, 44_500 (Python + op) in the next -> sync.
#   Step 0: leading 40_000 Python (cpu, rule 8) + 4_500 (launch); later steps: 44_500 sync.
_HOST_SYNC_STEPS = (idle(sync=46_500, cpu=40_000, launch=4_500), *(idle(sync=91_000),) * 3)
HOST_SYNC = PlantedScenario(
    "host_sync",
    (
        "seed 000 diagnosis row: host-device sync (cudaStreamSynchronize / a device-to-host copy, then a GPU gap)",
        "seed 004 symptom table: GPU util varies wildly -> sync points",
    ),
    _host_sync,
    # Each step ends when the second .item()'s sync returns: S + 494_000 (403_000 of GPU work and 91_000 idle).
    (DeviceTruth(0, _HOST_SYNC_STEPS, (0,) * 4, "compute-bound", step_ns=(494_000,) * 4),),
    must_fire=("host_sync",),
    must_not_fire=all_but("host_sync"),
    fix_keywords={"host_sync": ("every", "asynchronous")},
)


# -- memory-bound kernels: long norms, softmax and elementwise kernels, the CPU far ahead (no launch gaps).
_MEMORY_BOUND_OPS = (
    ("aten::mm", "gemm_fwd", 40_000),
    ("aten::native_layer_norm", "layer_norm", 60_000),
    ("aten::_softmax", "softmax", 60_000),
    ("aten::gelu", "gelu", 60_000),
    ("aten::mm", "gemm_fwd", 40_000),
    ("aten::native_layer_norm", "layer_norm", 60_000),
    ("aten::add", "add", 60_000),
    ("aten::mul", "mul", 60_000),
)


def _memory_bound_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with synced_step(th):
            for name, key, dur in _MEMORY_BOUND_OPS:
                th.op(name, K[key], dur)


def _memory_bound() -> PlannedJob:
    return build_job("memory_bound", _memory_bound_program)


# 8 ops from S + 3_000, kernels back to back [S + 7_500, S + 507_500) (500_000: 80_000 gemm, 420_000 memory-bound);
# the sync returns S + 508_500.  Idle: the synced_step frame only.  No gap before any kernel but the first.
_MEMORY_STEPS = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * 3)
MEMORY_BOUND = PlantedScenario(
    "memory_bound",
    (
        "seed 000 diagnosis row: memory-bound kernels (long elementwise, norm, softmax)",
        "seed 004 symptom table: GPU util high, MFU low -> memory bandwidth",
        "issue 13 case 4: memory-bound step with no launch gaps -> no CUDA-graph advice",
        "seed 000 regime: memory-bound",
    ),
    _memory_bound,
    (DeviceTruth(0, _MEMORY_STEPS, (0,) * 4, "memory-bound"),),
    must_fire=("memory_bound_kernels",),
    must_not_fire=all_but("memory_bound_kernels"),
    fix_keywords={"memory_bound_kernels": ("fus",)},
    forbidden_fix_words=("CUDA graph",),
)

DIAGNOSIS = (LAUNCH_BOUND, EXPOSED_COMM, INPUT_STALL, HOST_SYNC, MEMORY_BOUND)
