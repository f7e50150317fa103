"""Before/after pairs: one change to a planned timeline, and what it does to the steady step, to the ns.

Issue 15's acceptance: a diff of two traces must decompose the change of the steady step time into
compute, exposed communication and idle by cause, exactly.  Each :class:`PlannedPair` is two planted
scenarios (a scenario of the catalogue and its changed twin, both with their truth written by hand)
and the change per steady step, worked out below from the rules of :mod:`tracegen.planned.rank` and
checked against the two truths' own arithmetic by the tests: the input stall fixed, a sync removed,
kernels fused, communication overlapped, a regression planted.  Times are ns from a step's start ``S``;
every step of these scenarios is steady (no warm-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from tracegen.planned.job import build_job
from tracegen.planned.rank import Rank
from tracegen.planned.scenarios.blocks import K, gemms, synced_step
from tracegen.planned.scenarios.diagnosis import HOST_SYNC, INPUT_STALL
from tracegen.planned.scenarios.truth import CAUSES, FINDINGS, DeviceTruth, PlantedScenario, all_but, idle
from tracegen.planned.scenarios.worked_example import WORKED_EXAMPLE, WORKED_EXAMPLE_FIXED_COMM

STEPS: Final = 4


# -- the input stall fixed: the loader of INPUT_STALL takes 5 us instead of 500 us (prefetching workers).
def _input_ready_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(STEPS):
        with th.step():
            th.loader(5_000)
            th.h2d(64 << 20, 20_000)
            gemms(th, [100_000] * 4)
            th.sync()


# Loader [S, S + 5_000); the copy's op [S + 5_000, S + 7_000), copy [S + 9_500, S + 29_500); gemms queued behind it
# [S + 29_500, S + 429_500); the sync (from S + 15_000) returns S + 430_500: the step's end.
# Idle: [S, S + 5_000) input (rule 4); [S + 5_000, S + 9_500) the copy's op: launch in step 0 (rule 7), sync later
# (rule 6: the first launch after the previous step's sync); the sync's return [S + 429_500, S + 430_500): sync.
INPUT_READY = PlantedScenario(
    "input_ready",
    ("issue 15: the input stall of input_stall fixed (a 5 us loader wait)",),
    lambda: build_job("input_ready", _input_ready_program),
    (
        DeviceTruth(
            0,
            (idle(input=5_000, launch=4_500, sync=1_000), *(idle(input=5_000, sync=5_500),) * (STEPS - 1)),
            (0,) * STEPS,
            "compute-bound",
            step_ns=(430_500,) * STEPS,
        ),
    ),
    must_not_fire=FINDINGS,
)


# -- a sync removed: host_sync's first .item() (mid-step) is gone; the one at the step's end stays.
def _one_item_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(STEPS):
        with th.step():
            th.python(40_000)
            gemms(th, [100_000] * 2)
            th.python(40_000)
            gemms(th, [100_000] * 2)
            th.item()


# Python to S + 40_000; gemm ops at S + 40_000 and S + 42_000: kernels [S + 44_500, S + 244_500); Python to S + 84_000;
# gemm ops at S + 84_000, S + 86_000: kernels queued [S + 244_500, S + 444_500); .item() at S + 88_000: its copy call
# [S + 89_000, S + 90_000), the copy [S + 444_500, S + 446_000), the sync (from S + 90_000) returns S + 447_000.
# Idle: [S, S + 44_500) before the first kernel: cpu 40_000 + launch 4_500 in step 0, sync (rule 6: the previous
# step's sync drained the queue) later; [S + 446_000, S + 447_000) blocked in the sync.  GPU work 401_500 per step.
HOST_SYNC_ONE_ITEM = PlantedScenario(
    "host_sync_one_item",
    ("issue 15: host_sync with its mid-step .item() removed (one sync per step)",),
    lambda: build_job("host_sync_one_item", _one_item_program),
    (
        DeviceTruth(
            0,
            (idle(cpu=40_000, launch=4_500, sync=1_000), *(idle(sync=45_500),) * (STEPS - 1)),
            (0,) * STEPS,
            "compute-bound",
            step_ns=(447_000,) * STEPS,
        ),
    ),
    must_fire=("host_sync",),  # 34_375 / 447_000 = 7.7% of the steady step: still a (low) finding
    must_not_fire=all_but("host_sync"),
)


# -- kernels fused: four elementwise kernels after a gemm become one Triton kernel; Inductor renumbers its reduction.
_UNFUSED_OPS = (("aten::add", "add"), ("aten::mul", "mul"), ("aten::gelu", "gelu"), ("aten::tanh", "tanh"))


def _unfused_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(STEPS):
        with synced_step(th):
            th.op("aten::mm", K["gemm_fwd"], 200_000)
            for name, key in _UNFUSED_OPS:
                th.op(name, K[key], 50_000)
            th.op("triton_red_fused_sum_0", K["triton_sum_0"], 30_000)


def _fused_program(rank: Rank) -> None:
    th = rank.main
    for _ in range(STEPS):
        with synced_step(th):
            th.op("aten::mm", K["gemm_fwd"], 200_000)
            th.op("triton_poi_fused_add_gelu_mul_tanh_0", K["triton_fused_pointwise"], 60_000)
            th.op("triton_red_fused_sum_1", K["triton_sum_1"], 30_000)


# Unfused: six ops from S + 3_000, kernels back to back from S + 7_500: 200_000 + 4 x 50_000 + 30_000 = 430_000, to
# S + 437_500; the sync (from S + 15_000) returns S + 438_500.  Fused: 200_000 + 60_000 + 30_000 = 290_000 from
# S + 7_500 to S + 297_500; the sync (from S + 9_000) returns S + 298_500.  Idle: synced_step's frame in both
# (blocks.py).  Memory-bound time 230_000 against 200_000 of gemm (beyond half of it: 130_000, 29.6% of the step);
# fused, 90_000: less than half the gemm time.
_FRAME_STEPS = (idle(cpu=3_000, launch=4_500, sync=1_000), *(idle(sync=8_500),) * (STEPS - 1))
UNFUSED = PlantedScenario(
    "unfused_elementwise",
    ("issue 15: a gemm and four 50 us elementwise kernels, before fusion",),
    lambda: build_job("unfused_elementwise", _unfused_program),
    (DeviceTruth(0, _FRAME_STEPS, (0,) * STEPS, "memory-bound", step_ns=(438_500,) * STEPS),),
    must_fire=("memory_bound_kernels",),
    must_not_fire=all_but("memory_bound_kernels"),
    kernel_ns={K["add"].name: STEPS * 50_000, K["triton_sum_0"].name: STEPS * 30_000},
)
FUSED = PlantedScenario(
    "fused_elementwise",
    ("issue 15: the four elementwise kernels fused into one 60 us Triton kernel",),
    lambda: build_job("fused_elementwise", _fused_program),
    (DeviceTruth(0, _FRAME_STEPS, (0,) * STEPS, "compute-bound", step_ns=(298_500,) * STEPS),),
    must_not_fire=FINDINGS,
    kernel_ns={K["triton_fused_pointwise"].name: STEPS * 60_000, K["triton_sum_1"].name: STEPS * 30_000},
)


# -- a regression planted: one of four gemms runs 160 us instead of 100 us (same kernel, a worse shape or config).
def _gemms_program(rank: Rank, durations: tuple[int, ...]) -> None:
    th = rank.main
    for _ in range(STEPS):
        with synced_step(th):
            gemms(th, durations)


# Four ops from S + 3_000, kernels from S + 7_500: 400_000 to S + 407_500, the sync (from S + 11_000) returns
# S + 408_500; slower, 460_000 to S + 467_500, the sync returns S + 468_500.  Idle: synced_step's frame in both.
FOUR_GEMMS = PlantedScenario(
    "four_gemms",
    ("issue 15: four 100 us gemms per synchronised step, the baseline of a regression",),
    lambda: build_job("four_gemms", lambda r: _gemms_program(r, (100_000,) * 4)),
    (DeviceTruth(0, _FRAME_STEPS, (0,) * STEPS, "compute-bound", step_ns=(408_500,) * STEPS),),
    must_not_fire=FINDINGS,
    kernel_ns={K["gemm_fwd"].name: STEPS * 400_000},
)
FOUR_GEMMS_ONE_SLOW = PlantedScenario(
    "four_gemms_one_slow",
    ("issue 15: the same step with one gemm 60 us slower",),
    lambda: build_job("four_gemms_one_slow", lambda r: _gemms_program(r, (100_000, 100_000, 100_000, 160_000))),
    (DeviceTruth(0, _FRAME_STEPS, (0,) * STEPS, "compute-bound", step_ns=(468_500,) * STEPS),),
    must_not_fire=FINDINGS,
    kernel_ns={K["gemm_fwd"].name: STEPS * 460_000},
)

PAIR_SCENARIOS: Final = (INPUT_READY, HOST_SYNC_ONE_ITEM, UNFUSED, FUSED, FOUR_GEMMS, FOUR_GEMMS_ONE_SLOW)
"""The scenarios the pairs add to the catalogue (the others are in it already)."""


@dataclass(frozen=True)
class KernelChange:
    """What a pair's kernel table must show: names gone, names new, and per class the change per step."""

    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    matched_by_normalised_name: tuple[tuple[str, str], ...] = ()
    """(before, after) names that differ and match once normalised (an Inductor kernel renumbered)."""
    class_delta_ns: Mapping[str, int] = field(default_factory=dict)
    """Per kernel class, the change of its kernels' time per step."""


@dataclass(frozen=True)
class PlannedPair:
    """A change and what it does: ``delta_ns`` is the change per steady step of the mean step
    (``step``) and of each part that changes (``compute``, ``exposed_comm``, a cause of idle);
    every part not named changes by 0."""

    name: str
    expresses: str
    before: PlantedScenario
    after: PlantedScenario
    delta_ns: Mapping[str, int]
    resolved: tuple[str, ...] = ()
    """Findings that fire before and not after."""
    new: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """Findings that fire on both sides, with another share."""
    kernels: KernelChange = field(default_factory=KernelChange)


# The means over the four (steady) steps; idle per step from the truths above and beside each scenario.
PAIRS: Final[tuple[PlannedPair, ...]] = (
    PlannedPair(
        # 925_500 -> 430_500 per step; input 500_000 -> 5_000; compute 420_000, sync 17_500 / 4, launch 4_500 / 4 both
        "input_stall_fixed",
        "input stall fixed: the loader's wait drops from 500 us to 5 us per step",
        INPUT_STALL,
        INPUT_READY,
        {"step": -495_000, "input": -495_000},
        resolved=("input_stall",),
    ),
    PlannedPair(
        # 494_000 -> 447_000; compute 403_000 -> 401_500 (one 1_500 ns DtoH copy fewer);
        # sync (46_500 + 3 x 91_000) / 4 = 79_875 -> (1_000 + 3 x 45_500) / 4 = 34_375; cpu 10_000, launch 1_125 both
        "sync_removed",
        "a sync removed: one of the two .item() calls per step goes",
        HOST_SYNC,
        HOST_SYNC_ONE_ITEM,
        {"step": -47_000, "compute": -1_500, "sync": -45_500},
        changed=("host_sync",),
    ),
    PlannedPair(
        # 438_500 -> 298_500; compute 430_000 -> 290_000; the frame's idle (cpu 750, launch 1_125, sync 6_625) both
        "kernels_fused",
        "kernels fused: four elementwise kernels become one Triton kernel",
        UNFUSED,
        FUSED,
        {"step": -140_000, "compute": -140_000},
        resolved=("memory_bound_kernels",),
        kernels=KernelChange(
            removed=(K["add"].name, K["mul"].name, K["gelu"].name, K["tanh"].name),
            added=(K["triton_fused_pointwise"].name,),
            matched_by_normalised_name=((K["triton_sum_0"].name, K["triton_sum_1"].name),),
            class_delta_ns={"elementwise": 60_000 - 4 * 50_000, "gemm": 0, "reduction": 0},
        ),
    ),
    PlannedPair(
        # 3_600_000 -> 3_200_000; exposed 400_000 -> 0; compute 2_900_000 and the idle (_MEASURED_STEPS) both
        "overlap_on",
        "overlap turned on: the last two reduce-scatters issued before the last gemms (seed 000's fix 1)",
        WORKED_EXAMPLE,
        WORKED_EXAMPLE_FIXED_COMM,
        {"step": -400_000, "exposed_comm": -400_000},
        resolved=("exposed_comm",),
    ),
    PlannedPair(
        # 408_500 -> 468_500; compute 400_000 -> 460_000; the frame's idle both
        "regression",
        "a regression planted: one gemm of four runs 60 us slower",
        FOUR_GEMMS,
        FOUR_GEMMS_ONE_SLOW,
        {"step": 60_000, "compute": 60_000},
        kernels=KernelChange(class_delta_ns={"gemm": 60_000}),
    ),
)
BY_PAIR: Final[Mapping[str, PlannedPair]] = {p.name: p for p in PAIRS}


PARTS: Final = ("compute", "exposed_comm", *CAUSES)
"""The parts of a step a diff decomposes it into, in order: they sum to the step."""


def steady_means(scenario: PlantedScenario) -> dict[str, Fraction]:
    """The truth's steady step and its parts, per step, as the mean over ranks of each rank's mean
    over its steady steps (exact): ``step`` and :data:`PARTS`, compute being what the step leaves
    after exposed communication and idle."""
    per_rank = []
    for truth in scenario.devices:
        if not truth.step_ns:
            raise ValueError(f"{scenario.name}: rank {truth.rank} states no step durations")
        steps = range(scenario.warmup, len(truth.steps))
        n = len(steps)
        means = {"step": Fraction(sum(truth.step_ns[i] for i in steps), n)}
        means["exposed_comm"] = Fraction(sum(truth.exposed_comm_ns[i] for i in steps), n)
        for cause in CAUSES:
            means[cause] = Fraction(sum(truth.steps[i][cause] for i in steps), n)
        means["compute"] = means["step"] - means["exposed_comm"] - sum((means[c] for c in CAUSES), Fraction(0))
        per_rank.append(means)
    return {k: sum((m[k] for m in per_rank), Fraction(0)) / len(per_rank) for k in ("step", *PARTS)}
