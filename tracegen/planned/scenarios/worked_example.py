"""Seed 000's worked example (section 4) at a thousandth of its scale, and its fixed variants.

The seed's measured step on one rank of a 32-GPU FSDP job: compute 2.90 s, exposed NCCL 0.40 s
(the last reduce-scatters), a data-loader wait at the step's start 0.18 s, an ``.item()`` sync in the
logging code 0.12 s: 3.60 s.  Here in ms: compute 2_900_000 ns (a 20 us input copy, eight 320 us
gemms, a 320 us optimizer minus the 1.5 us ``.item()`` copy), three 200 us reduce-scatters of which
the last two have no compute beside them, a 180 us loader wait and 120 us after the sync.  The
seed's fixes: overlap the reduce-scatters (3.20), remove the idle (3.30: prefetching workers, the
loss logged from the step before without blocking), both (2.90).  Five steps each ("five
steady-state steps on one rank").  Times are ns from the job's origin; ``S`` is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, nccl
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, idle
from tracegen.planned.thread import Thread
from tracegen.planned.timing import CudaEvent

STEPS = 5
_RS = nccl("reduce_scatter", 32)
_QUIET = ("launch_bound", "straggler", "memory_bound_kernels", "small_kernels")


def _backward_and_reduce(rank: Rank, th: Thread, *, overlapped: bool) -> None:
    """Six gemms, then the reduce-scatters with the last two gemms; exposed unless ``overlapped``."""
    comm = rank.comm_stream
    gemms(th, [320_000] * 6, key="gemm_dgrad")
    th.wait_event(comm, th.record_event())
    th.collective("nccl:reduce_scatter", K["reduce_scatter"], 200_000, comm=_RS)  # hidden behind gemm 6
    if overlapped:  # backward prefetch: every reduce-scatter issued before the last gemms
        th.collective("nccl:reduce_scatter", K["reduce_scatter"], 200_000, comm=_RS)
        th.collective("nccl:reduce_scatter", K["reduce_scatter"], 200_000, comm=_RS)
        gemms(th, [320_000] * 2, key="gemm_wgrad")
    else:
        gemms(th, [320_000] * 2, key="gemm_wgrad")
        th.wait_event(comm, th.record_event())
        th.collective("nccl:reduce_scatter", K["reduce_scatter"], 200_000, comm=_RS)
        th.collective("nccl:reduce_scatter", K["reduce_scatter"], 200_000, comm=_RS)
    th.wait_event(None, th.record_event(comm))


def _measured_program(rank: Rank, *, overlapped: bool) -> None:
    th = rank.main
    for _ in range(STEPS):
        with th.step():
            th.loader(180_000)
            th.h2d(256 << 20, 20_000)
            _backward_and_reduce(rank, th, overlapped=overlapped)
            th.op("aten::_fused_adamw_", K["fused_adam"], 318_500)
            th.item()
            th.python(114_500)  # logging the loss


def _worked_example() -> PlannedJob:
    return build_job("worked_example", lambda r: _measured_program(r, overlapped=False), world_size=32)


def _fixed_comm() -> PlannedJob:
    return build_job("worked_example_fixed_comm", lambda r: _measured_program(r, overlapped=True), world_size=32)


# Measured step: loader [S, S + 180_000); copy [S + 184_500, S + 204_500); gemms 0-5 [S + 204_500, S + 2_124_500);
# RS1 [S + 2_124_500, S + 2_324_500) beside gemm 6 [S + 2_124_500, S + 2_444_500); gemm 7 to S + 2_764_500; RS2, RS3
# [S + 2_764_500, S + 3_164_500) alone; Adam [S + 3_164_500, S + 3_483_000); the .item() copy [S + 3_483_000,
# S + 3_484_500), its sync (from S + 214_000) returns S + 3_485_500; logging to S + 3_600_000 = the step's end.
# Compute 20_000 + 8 x 320_000 + 318_500 + 1_500 = 2_900_000; exposed 400_000.
#   The step-boundary gap [S + 3_484_500, S' + 184_500): 1_000 blocked + 114_500 logging (sync, rule 6, in step k),
#   the next loader 180_000 (input), the copy's op 4_500 (sync, rule 6): per steady step input 180_000, sync 120_000.
#   Step 0: no sync before it, the copy's op is launch.  The last step's gap is trailing (no L): its 114_500 of
#   logging are cpu (rule 8), 1_000 blocked is sync.
# Fixed communication: RS1-3 [S + 2_124_500, S + 2_724_500) all beside gemms 6, 7 [S + 2_124_500, S + 2_764_500);
# Adam [S + 2_764_500, S + 3_083_000) and the rest 400_000 earlier: a 3_200_000 step, exposed 0, the same idle.
_MEASURED_STEPS = (
    idle(input=180_000, launch=4_500, sync=115_500),
    *(idle(input=180_000, sync=120_000),) * 3,
    idle(input=180_000, sync=5_500, cpu=114_500),
)
WORKED_EXAMPLE = PlantedScenario(
    "worked_example",
    ("seed 000 section 4: the worked example (2.90 compute / 0.40 exposed NCCL / 0.18 loader / 0.12 .item())",),
    _worked_example,
    (DeviceTruth(0, _MEASURED_STEPS, (400_000,) * STEPS, "compute-bound", step_ns=(3_600_000,) * STEPS),),
    must_fire=("exposed_comm",),
    must_not_fire=_QUIET,
    fix_keywords={"exposed_comm": ("prefetch", "HSDP")},
    comm_kernels=(K["reduce_scatter"].name,),
)
WORKED_EXAMPLE_FIXED_COMM = PlantedScenario(
    "worked_example_fixed_comm",
    ("seed 000 section 4, fix 1 only: no exposed communication (3.20 per step)",),
    _fixed_comm,
    (DeviceTruth(0, _MEASURED_STEPS, (0,) * STEPS, "compute-bound", step_ns=(3_200_000,) * STEPS),),
    must_not_fire=(*_QUIET, "exposed_comm"),
    comm_kernels=(K["reduce_scatter"].name,),
)


def _prefetched_program(rank: Rank, *, overlapped: bool) -> None:
    """Fix 2: the batch is ready (a 5 us take from prefetching workers); the loss of step k-1 is logged in step k
    after waiting on an event of step k-1, while the GPU runs step k: the CPU never drains the queue."""
    th = rank.main
    previous: CudaEvent | None = None
    for _ in range(STEPS):
        with th.step():
            th.loader(5_000)
            th.h2d(256 << 20, 20_000)
            _backward_and_reduce(rank, th, overlapped=overlapped)
            th.op("aten::_fused_adamw_", K["fused_adam"], 320_000)
            done = th.record_event()
            if previous is not None:
                th.event_sync(previous)
            th.python(5_000)  # logging step k-1's loss
            previous = done


def _fixed_idle() -> PlannedJob:
    return build_job("worked_example_fixed_idle", lambda r: _prefetched_program(r, overlapped=False), world_size=32)


def _fixed_both() -> PlannedJob:
    return build_job("worked_example_fixed_both", lambda r: _prefetched_program(r, overlapped=True), world_size=32)


# GPU work per step, back to back from the step's copy at G_k: 3_300_000 (copy, gemms, RS2-3 exposed, Adam 320_000)
# or 2_900_000 with the reduce-scatters overlapped.  Step 0 queues its work by S + 43_000 (38_000 of calls + 5_000 of
# logging; 41_000 when overlapped: one event pair fewer) without waiting; G_0 = 9_500 (loader 5_000 + op + latency).
# Step k >= 1 waits for step k-1's event (done at G_{k-1} + P, P the GPU period), so from step 2 on a step lasts
# exactly P and step k+1's work is queued long before step k's ends: the GPU never idles after G_0.
#   Idle: step 0's leading interval only, loader 5_000 (input) + the copy's op 4_500 (launch).
#   Exposed (not overlapped): step k's window [G_{k-1} + 6_000, G_k + 6_000) holds step k-1's RS2-3 (from
#   G_{k-1} + 2_580_000): 400_000 in every step but step 0 ([0, 43_000), before any reduce-scatter).
_PREFETCHED_STEPS = (idle(input=5_000, launch=4_500), *(idle(),) * (STEPS - 1))
WORKED_EXAMPLE_FIXED_IDLE = PlantedScenario(
    "worked_example_fixed_idle",
    ("seed 000 section 4, fix 2 only: no idle (more workers, the loss logged without a blocking .item(); 3.30)",),
    _fixed_idle,
    (DeviceTruth(0, _PREFETCHED_STEPS, (0, *(400_000,) * (STEPS - 1)), "compute-bound"),),
    must_fire=("exposed_comm",),
    must_not_fire=(*_QUIET, "input_stall", "host_sync"),
    comm_kernels=(K["reduce_scatter"].name,),
)
WORKED_EXAMPLE_FIXED_BOTH = PlantedScenario(
    "worked_example_fixed_both",
    ("seed 000 section 4, fixes 1 and 2: no exposed communication, no idle (2.90 per step)",),
    _fixed_both,
    (DeviceTruth(0, _PREFETCHED_STEPS, (0,) * STEPS, "compute-bound"),),
    must_not_fire=(*_QUIET, "input_stall", "host_sync", "exposed_comm"),
    comm_kernels=(K["reduce_scatter"].name,),
)

WORKED_EXAMPLES = (WORKED_EXAMPLE, WORKED_EXAMPLE_FIXED_COMM, WORKED_EXAMPLE_FIXED_IDLE, WORKED_EXAMPLE_FIXED_BOTH)
