"""Issue 13's cases about what the host was doing: the ``.item()`` trap, CPU work that is not loading,
HIP's synchronising copy, GPU work no call launched.

Seed 004's exercise 2 (the ``.item()`` trap) and issue 13's cases 1, 8 and 9, on one rank.  Times
are ns from the job's origin; ``S`` is a step's start, ``S'`` the next step's.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.names import HIP_LAUNCH_KERNEL, HIP_MEMCPY_WITH_STREAM, MI300X
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, all_but, idle


# -- the .item() trap (seed 004, exercise 2): phases in NVTX ranges, loss.item() + print at the step's end, the next
#    step's batch copy ends the gap.  The batch comes from torch.randint(...).cuda(): no DataLoader range at all.
def _item_trap_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            with th.range("data_loading"):
                th.python(30_000)  # torch.randint on the CPU
                th.h2d(8 * 2048 * 8, 20_000)
            with th.range("forward"):
                gemms(th, [100_000] * 2)
            with th.range("loss"):
                th.op("aten::_log_softmax", K["log_softmax"], 10_000)
            with th.range("backward"):
                gemms(th, [100_000] * 2, key="gemm_dgrad")
            with th.range("optimizer"):
                th.op("aten::_fused_adamw_", K["fused_adam"], 50_000)
            with th.range("logging_sync"):
                th.item()
                th.python(20_000)  # print(f"Loss: {loss_val:.4f}")


def _item_trap() -> PlannedJob:
    return build_job("item_trap", _item_trap_program)


# CPU: randint to S + 30_000, the copy's op [S + 30_000, S + 32_000), ops of 2_000 to S + 44_000, .item() at S + 44_000
# (copy call [S + 45_000, S + 46_000), sync [S + 46_000, S + 517_000)), print to S + 537_000 = the step's end.
# GPU: copy [S + 34_500, S + 54_500), then back to back: gemms, loss 10_000, gemms, adam 50_000, the 4-byte copy
# [S + 514_500, S + 516_000).  One gap per step boundary, [S + 516_000, S' + 34_500) = 55_500, ended by the next copy:
#   [S + 516_000, S + 517_000) blocked in the sync: sync (rule 3);
#   [S + 517_000, S' + 34_500): the print, the step boundary, randint and the copy's op: sync (rule 6, the copy's call
#   is the first launch after the sync; "data_loading" is no DataLoader range, so rule 4 does not apply).
# Step 0 (no earlier sync): randint 30_000 in "data_loading" is cpu (rule 8), the copy's op 4_500 launch (rule 7).
# The last step's gap is trailing (no next activity, so rules 6 and 7 have no L): 1_000 blocked = sync, the print's
# 20_000 = cpu (rule 8).
_TRAP_STEPS = (
    idle(cpu=30_000, launch=4_500, sync=21_000),
    idle(sync=55_500),
    idle(sync=55_500),
    idle(sync=35_500, cpu=20_000),  # 34_500 + 1_000; the print
)
ITEM_TRAP = PlantedScenario(
    "item_trap",
    (
        "seed 004 exercise 2: the .item() trap (sync at the step's end, the next step's H2D copy ends the gap)",
        "issue 13 case 1: a gap a host-to-device copy ends is sync, not input",
        "seed 004 symptom table: GPU util varies wildly -> sync points",
    ),
    _item_trap,
    (DeviceTruth(0, _TRAP_STEPS, (0,) * 4, "compute-bound"),),
    must_fire=("host_sync",),
    must_not_fire=all_but("host_sync"),
    fix_keywords={"host_sync": ("every",)},
)


# -- CPU work that is not loading: a fast DataLoader (10 us, recorded), then a 600 us Lightning callback after the
#    step's launches; the GPU drains and waits until the next step's copy.
CALLBACK = "[Callback]ModelCheckpoint.on_train_batch_end"


def _callback_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            th.loader(10_000)
            th.h2d(64 << 20, 20_000)
            gemms(th, [100_000] * 4)
            with th.range(CALLBACK):
                th.python(600_000)


def _callback() -> PlannedJob:
    return build_job("callback_not_input", _callback_program)


# Loader [S, S + 10_000); copy's op [S + 10_000, S + 12_000), copy [S + 14_500, S + 34_500); gemms [S + 34_500,
# S + 434_500); the callback [S + 20_000, S + 620_000) = the step's end.  No sync anywhere.  The gap
# [S + 434_500, S' + 14_500), ended by the next copy: 185_500 in the callback (cpu, rule 8), the next loader's 10_000
# (input, rule 4), the copy's op 4_500 (launch, rule 7).  Step 0's leading interval and the last step's trailing one
# split the same way (the trailing one is read on the thread that launched the last kernel: in the callback).
_CALLBACK_STEPS = (idle(input=10_000, launch=4_500, cpu=185_500),) * 4
CALLBACK_NOT_INPUT = PlantedScenario(
    "callback_not_input",
    (
        "issue 13 case 1: CPU work that is not loading (callbacks, logging, a GC pause) is cpu, not input",
        "seed 000 input-stall row, how to confirm: the idle matches the loader wait (10 us, not 200 us)",
    ),
    _callback,
    (DeviceTruth(0, _CALLBACK_STEPS, (0,) * 4, "compute-bound"),),
    must_not_fire=all_but("memory_bound_kernels"),
)


# -- HIP: .item() on ROCm is one hipMemcpyWithStream (PyTorch's memcpy_and_sync), a synchronising copy.
def _hip_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            th.python(40_000)
            for _ in range(2):
                th.op("aten::mm", K["tensile_gemm"], 100_000, api=HIP_LAUNCH_KERNEL)
            th.item(sync_copy=HIP_MEMCPY_WITH_STREAM)
            th.python(40_000)
            for _ in range(2):
                th.op("aten::mm", K["tensile_gemm"], 100_000, api=HIP_LAUNCH_KERNEL)
            th.item(sync_copy=HIP_MEMCPY_WITH_STREAM)


def _hip() -> PlannedJob:
    return build_job("hip_memcpy_with_stream", _hip_program, gpu=MI300X)


# The host_sync scenario's step (diagnosis.py) with HIP calls: .item() at S + 44_000 is hipMemcpyWithStream
# [S + 45_000, S + 247_000) whose copy waits for the gemms: [S + 244_500, S + 246_000); it returns 1_000 after.
# Same times as host_sync, so the same truth: each gap after a copy is 1_000 blocked in hipMemcpyWithStream and the
# rest until the next kernel drained by it (rule 6) -> sync; nothing is launch but step 0's first op.
_HIP_STEPS = (idle(sync=46_500, cpu=40_000, launch=4_500), *(idle(sync=91_000),) * 3)
HIP_MEMCPY_SYNC = PlantedScenario(
    "hip_memcpy_with_stream",
    ("issue 13 case 8: HIP synchronising copies (hipMemcpyWithStream) are sync, not launch",),
    _hip,
    (DeviceTruth(0, _HIP_STEPS, (0,) * 4, None),),
    must_fire=("host_sync",),
    must_not_fire=all_but("host_sync", "memory_bound_kernels"),
    fix_keywords={"host_sync": ("every",)},
)


# -- GPU work with no recorded launch: six copy kernels per step on a side stream, launched by a thread the trace
#    does not record (their correlation ids match no call).
SIDE_STREAM = 13


def _unlaunched_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with th.step():
            start = th.t
            th.python(3_000)
            gemms(th, [100_000] * 4)
            for i in range(1, 7):
                rank.gpu_only(K["direct_copy"], start + 397_500 + 20_000 * i, 10_000, stream=SIDE_STREAM)
            th.device_sync()


def _unlaunched() -> PlannedJob:
    return build_job("gpu_work_without_launch", _unlaunched_program)


# Gemms [S + 7_500, S + 407_500) (the synced_step frame's timing); unlaunched U_i = [S + 397_500 + 20_000 i, +10_000),
# i = 1..6, so U_1 = [S + 417_500, S + 427_500) .. U_6 = [S + 517_500, S + 527_500); cudaDeviceSynchronize from
# S + 11_000 returns S + 528_500 = the step's end.
#   gemms -> U_1, 10_000: no launch for U_1, so T is the thread that launched the gemm before it, blocked in the
#   device sync: sync (rule 3).
#   U_i -> U_{i+1}, 5 x 10_000: neither activity has a launch, so no thread: unknown (rule 1).
#   U_6 -> the next step's first kernel: 1_000 blocked (sync) + the next step's 7_500 (drained: sync).
# Step 0's leading 7_500: cpu 3_000 + launch 4_500.  The last step's trailing 1_000 follows U_6, which no call
# launched: unknown (rule 1).  24 of the 40 GPU activities have no launching call.
_UNLAUNCHED_STEPS = (
    idle(cpu=3_000, launch=4_500, sync=11_000, unknown=50_000),
    idle(sync=18_500, unknown=50_000),
    idle(sync=18_500, unknown=50_000),
    idle(sync=17_500, unknown=51_000),
)
GPU_WORK_WITHOUT_LAUNCH = PlantedScenario(
    "gpu_work_without_launch",
    ("issue 13 case 9: GPU work with no recorded launch -> unknown idle, explained by the count of such activities",),
    _unlaunched,
    (DeviceTruth(0, _UNLAUNCHED_STEPS, (0,) * 4, None, unlaunched_activities=24),),
    must_not_fire=("launch_bound", "input_stall", "exposed_comm", "straggler"),
)

HOST_STATE = (ITEM_TRAP, CALLBACK_NOT_INPUT, HIP_MEMCPY_SYNC, GPU_WORK_WITHOUT_LAUNCH)
