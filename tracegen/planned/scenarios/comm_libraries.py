"""Communication that is not ``nccl*``: DeepEP's MoE all-to-all, PyTorch symmetric memory, vLLM's all-reduce.

Issue 13's case 7: these kernels must count as communication (exposed when nothing is computed
beside them) and the report must list them.  None carries Kineto's collective metadata, and no
name starts with ``nccl``.  Times are ns from the job's origin; ``S`` is a step's start.
"""

from __future__ import annotations

from tracegen.planned.job import PlannedJob, build_job
from tracegen.planned.names import (
    H800,
    HIP_EVENT_RECORD,
    HIP_LAUNCH_KERNEL,
    HIP_STREAM_SYNCHRONIZE,
    HIP_STREAM_WAIT_EVENT,
    MI300X,
)
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import SYNCED_STEP_LEAD_NS, K, nccl, synced_step
from tracegen.planned.scenarios.truth import DeviceTruth, PlantedScenario, all_but, idle

_FRAME = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * 3)
"""The synced_step frame's idle (blocks.py): no other idle in these steps."""


# -- DeepEP (DeepSeek-V3 training on H800): notify + dispatch tokens to the experts, expert gemms, combine back.
def _deepep_program(rank: Rank) -> None:
    th, comm = rank.main, rank.comm_stream
    for _ in range(4):
        with synced_step(th):
            th.op("aten::mm", K["flash_attn"], 200_000)  # attention
            attn = th.record_event()
            th.wait_event(comm, attn)
            th.collective("deep_ep::notify_dispatch", K["deepep_notify_dispatch"], 20_000)
            th.collective("deep_ep::dispatch", K["deepep_dispatch"], 600_000)
            th.op("aten::mm", K["gemm_fwd"], 200_000)  # shared expert, beside the dispatch
            dispatched = th.record_event(comm)
            th.wait_event(None, dispatched)
            th.op("aten::mm", K["gemm_fwd"], 150_000)  # routed experts
            th.op("aten::mm", K["gemm_fwd"], 150_000)
            experts = th.record_event()
            th.wait_event(comm, experts)
            th.collective("deep_ep::combine", K["deepep_combine"], 600_000)
            combined = th.record_event(comm)
            th.wait_event(None, combined)
            th.op("aten::mm", K["gemm_fwd"], 100_000)  # output projection


def _deepep() -> PlannedJob:
    return build_job("deepep_moe", _deepep_program, world_size=8, gpu=H800)


# Attention [S + 7_500, S + 207_500); record/wait; notify's op [S + 7_000, S + 9_000) -> [S + 207_500, S + 227_500);
# dispatch [S + 227_500, S + 827_500); the shared expert (op at S + 11_000) after attention [S + 207_500, S + 407_500);
# routed experts wait for the dispatch: [S + 827_500, S + 1_127_500); combine waits for them: [S + 1_127_500,
# S + 1_727_500); the output gemm waits for it: [S + 1_727_500, S + 1_827_500); the sync returns S + 1_828_500.
# The GPU is busy from S + 7_500 to S + 1_827_500: idle is the frame's.  Communication per step 20_000 + 600_000 +
# 600_000 = 1_220_000; exposed: dispatch beyond the shared expert [S + 407_500, S + 827_500) = 420_000 + combine
# 600_000 = 1_020_000 (notify is beside the shared expert).  Compute 800_000 < exposed: communication-bound.
DEEPEP_MOE = PlantedScenario(
    "deepep_moe",
    ("issue 13 case 7: DeepEP dispatch/combine kernels (dpsk::ep::...) are communication",),
    _deepep,
    (DeviceTruth(0, _FRAME, (1_020_000,) * 4, "communication-bound"),),
    must_fire=("exposed_comm",),
    must_not_fire=all_but("exposed_comm", "straggler"),
    comm_kernels=(K["deepep_notify_dispatch"].name, K["deepep_dispatch"].name, K["deepep_combine"].name),
)


# -- tensor-parallel layers reducing with symmetric memory (multimem / two-shot) and vLLM's custom all-reduce, each
#    on the compute stream right after its gemm (nothing beside it).
_TP_OPS = (
    ("aten::mm", "gemm_fwd", 100_000),
    ("symm_mem::multimem_all_reduce_", "multimem_all_reduce", 40_000),
    ("aten::mm", "gemm_fwd", 100_000),
    ("symm_mem::two_shot_all_reduce_", "two_shot_all_reduce", 40_000),
    ("aten::mm", "gemm_fwd", 100_000),
    ("_C_custom_ar::all_reduce", "vllm_custom_all_reduce", 40_000),
)


def _symm_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(4):
        with synced_step(th):
            for name, key, dur in _TP_OPS:
                th.op(name, K[key], dur)


def _symm() -> PlannedJob:
    return build_job("symmetric_memory_comm", _symm_program, world_size=8)


# Six kernels back to back [S + 7_500, S + 427_500); the sync returns S + 428_500.  Idle: the frame's.  The three
# all-reduces (40_000 each) have no compute beside them: exposed 120_000 per step; compute 300_000: compute-bound.
SYMMETRIC_MEMORY_COMM = PlantedScenario(
    "symmetric_memory_comm",
    (
        "issue 13 case 7: PyTorch symmetric memory (multimem_all_reduce_kernel, two-shot) "
        "and vLLM's custom all-reduce are communication",
    ),
    _symm,
    (DeviceTruth(0, _FRAME, (120_000,) * 4, "compute-bound"),),
    must_fire=("exposed_comm",),
    must_not_fire=all_but("exposed_comm", "straggler"),
    comm_kernels=(K["multimem_all_reduce"].name, K["two_shot_all_reduce"].name, K["vllm_custom_all_reduce"].name),
)


# -- RCCL on ROCm: the exposed_comm scenario's step (diagnosis.py) with HIP calls, Tensile gemms and RCCL's kernel.
def _rccl_program(rank: Rank) -> None:
    th, comm = rank.main, rank.comm_stream
    for _ in range(4):
        with th.step():
            th.python(SYNCED_STEP_LEAD_NS)
            for _ in range(4):
                th.op("aten::mm", K["tensile_gemm"], 100_000, api=HIP_LAUNCH_KERNEL)
            grads = th.record_event(api=HIP_EVENT_RECORD)
            th.wait_event(comm, grads, api=HIP_STREAM_WAIT_EVENT)
            th.collective(
                "c10d::allreduce_", K["rccl_all_reduce"], 600_000, comm=nccl("allreduce", 8), api=HIP_LAUNCH_KERNEL
            )
            reduced = th.record_event(comm, api=HIP_EVENT_RECORD)
            th.wait_event(None, reduced, api=HIP_STREAM_WAIT_EVENT)
            th.op("aten::_fused_adamw_", K["fused_adam"], 50_000, api=HIP_LAUNCH_KERNEL)
            th.sync(api=HIP_STREAM_SYNCHRONIZE)


def _rccl() -> PlannedJob:
    return build_job("rccl_all_reduce", _rccl_program, world_size=8, gpu=MI300X)


# exposed_comm's times exactly (same calls, same durations): the all-reduce [S + 407_500, S + 1_007_500) alone on the
# GPU, 600_000 exposed per step; idle: the synced_step frame.
RCCL_ALL_REDUCE = PlantedScenario(
    "rccl_all_reduce",
    ("issue 13 case 7: RCCL collectives on ROCm (hipLaunchKernel) are communication",),
    _rccl,
    (DeviceTruth(0, _FRAME, (600_000,) * 4, None),),
    must_fire=("exposed_comm",),
    must_not_fire=("launch_bound", "host_sync", "input_stall", "small_kernels"),
    comm_kernels=(K["rccl_all_reduce"].name,),
)

COMM_LIBRARIES = (DEEPEP_MOE, SYMMETRIC_MEMORY_COMM, RCCL_ALL_REDUCE)
