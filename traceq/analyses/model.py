"""The results of the analyses: frozen dataclasses with units in their names.

These are the machine contract: the JSON report is their ``to_dict()`` output and
``schemas/report.schema.json`` is generated from their type hints.  Definitions of every number
are in ``docs/analyses.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import polars as pl

CAUSES: Final = ("input", "sync", "compile", "launch", "cpu", "dependency", "unknown")
"""Causes of idle time, in report order (``docs/analyses.md``: what the host was doing at each idle ns)."""

GAP_KINDS: Final = ("leading", "between", "trailing")
"""Where an idle interval lies: before a device's first activity, between two, after its last."""


def zero_by_cause() -> dict[str, int]:
    return dict.fromkeys(CAUSES, 0)


@dataclass(frozen=True)
class DeviceBreakdown:
    """Where one device's time went, summed over its step windows (ns)."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"window": ("steps", "activity")}

    rank: int | None
    device: int
    pid: int | None
    source: str
    window: str
    """``steps`` when step ranges were found for the process, ``activity`` for the fallback window."""
    steps: int
    dur_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    idle_by_cause_ns: Mapping[str, int]
    gaps_by_cause: Mapping[str, int]
    kernels: int
    memcpys: int
    memsets: int


@dataclass(frozen=True)
class StepBreakdown:
    """Where one device's time went inside one step window (ns)."""

    rank: int | None
    device: int
    pid: int | None
    step: int | None
    name: str
    start_ns: int
    end_ns: int
    dur_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    idle_by_cause_ns: Mapping[str, int]


@dataclass(frozen=True)
class ActivityRef:
    """The GPU activity that ended a gap."""

    name: str
    kind: str
    stream: int | None
    correlation: int | None
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class CallRef:
    """A CPU-side CUDA API call (the launch of the next activity, or the sync that held it back)."""

    name: str
    start_ns: int
    end_ns: int
    tid: int | None
    correlation: int | None


@dataclass(frozen=True)
class Gap:
    """A maximal idle interval of a device (between two activities, or before its first or after its
    last), the ns of it each cause takes, its dominant cause and the calls behind it."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"cause": CAUSES, "kind": GAP_KINDS}

    rank: int | None
    device: int
    pid: int | None
    start_ns: int
    end_ns: int
    dur_ns: int
    in_steps_ns: int
    """How much of the gap lies inside the device's step windows (what counts toward idle_by_cause)."""
    kind: str
    cause: str
    """The cause with the most ns in the gap (ties: in report order)."""
    causes_ns: Mapping[str, int]
    """ns of the gap per cause (they sum to ``dur_ns``)."""
    next: ActivityRef | None
    """The activity that ended the gap (none after the last activity)."""
    launch: CallRef | None
    sync: CallRef | None
    """The synchronising call that blocked the host in the gap or drained the queue before it."""


@dataclass(frozen=True)
class KernelStat:
    """One kernel name over the whole trace: how often it ran and for how long (ns)."""

    name: str
    count: int
    total_ns: int
    mean_ns: int
    max_ns: int
    share: float
    """``total_ns`` over the summed durations of every kernel in the trace."""


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`traceq.analyses.analyze` computes.

    ``devices``/``steps``/``kernels`` are complete; ``gaps`` holds the longest ``max_gaps`` gaps
    (longest first) while ``gap_table`` holds every gap as a DataFrame (columns documented in
    :func:`traceq.analyses.attribution.attribute`), except in an analysis merged from a job's parts
    (:mod:`traceq.analyses.parts`), whose ``gap_table`` holds no rows (the gaps stay in each
    part's table) and whose ``gaps_total`` counts them.
    """

    step_pattern: str
    devices: tuple[DeviceBreakdown, ...]
    steps: tuple[StepBreakdown, ...]
    gaps: tuple[Gap, ...]
    kernels: tuple[KernelStat, ...]
    gap_table: pl.DataFrame = field(repr=False, compare=False)
    gaps_total: int | None = field(default=None, repr=False, compare=False)
    """Gaps in all, where ``gap_table`` does not hold them all; None: ``gap_table.height``."""
    kernel_totals: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """Every kernel name's count, total and longest duration (:func:`traceq.analyses.breakdown.kernel_totals`);
    ``kernels`` lists the top ones."""
    windows: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """The step windows (:func:`traceq.analyses.steps.step_windows`: dev, window, step, name, start_ns,
    end_ns); no rows in an analysis merged from a job's parts."""

    @property
    def gap_count(self) -> int:
        """How many gaps the devices have in all (``gaps`` lists the longest of them)."""
        return self.gap_table.height if self.gaps_total is None else self.gaps_total

    def devices_frame(self) -> pl.DataFrame:
        """One row per device; ``idle_<cause>_ns`` columns flatten ``idle_by_cause_ns``."""
        return _frame(self.devices)

    def steps_frame(self) -> pl.DataFrame:
        """One row per (device, step window); ``idle_<cause>_ns`` columns as in devices_frame."""
        return _frame(self.steps)


def _frame(items: tuple[Any, ...]) -> pl.DataFrame:
    rows = []
    for item in items:
        row = dict(item.__dict__)
        for key in ("idle_by_cause_ns", "gaps_by_cause"):
            if key in row:
                prefix, suffix = ("idle_", "_ns") if key == "idle_by_cause_ns" else ("gaps_", "")
                row.update({f"{prefix}{cause}{suffix}": int(v) for cause, v in row.pop(key).items()})
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


SEVERITIES: Final = ("high", "medium", "low")


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence behind a finding: a step, a gap, a kernel, a call, a rank."""

    text: str
    """One human-readable line (names, numbers and units included)."""
    rank: int | None = None
    device: int | None = None
    start_ns: int | None = None
    """Where on the timeline, when the evidence is an interval (a gap, a step, a call)."""
    end_ns: int | None = None
    name: str | None = None
    """The kernel, call or range the evidence is about."""
    value_ns: int | None = None
    """The evidence's own measure (a gap's length, a kernel's total time, ...)."""


@dataclass(frozen=True)
class Finding:
    """A diagnosis: what is wrong, how much it costs, the evidence, and the fix to try.

    ``id`` is stable (``launch_bound``, ``host_sync``, ``input_stall``, ``exposed_comm``,
    ``straggler``, ``memory_bound_kernels``, ``small_kernels``); thresholds and definitions are
    in ``docs/findings.md``.
    """

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"severity": SEVERITIES}

    id: str
    severity: str
    title: str
    """One line with the number that triggered the finding."""
    share: float
    """The trigger: the share (0..1) of step time (or of GPU time, per the rule) the cause takes
    on the worst device."""
    metrics: Mapping[str, float]
    """The numbers behind the title, by name (units in the names)."""
    evidence: tuple[Evidence, ...]
    fix: str
    """What to try, in one or two sentences."""


@dataclass(frozen=True)
class MfuStep:
    """Model FLOPs utilisation of one step window of one device."""

    rank: int | None
    device: int
    step: int | None
    dur_ns: int
    mfu: float
    hfu: float | None


@dataclass(frozen=True)
class Mfu:
    """MFU (and HFU with recomputation) from the user's model description and the GPU's peak."""

    model_flops_per_token: float
    hardware_flops_per_token: float | None
    tokens_per_step: float
    gpus: int
    peak_flops_per_gpu: float
    peak_source: str
    """Where the peak came from: ``--peak-tflops``, or the GPU name matched in the peak table."""
    mean_mfu: float
    mean_hfu: float | None
    steps: tuple[MfuStep, ...]


CLOCK_METHODS: Final = ("single_clock", "anchor", "collective_end", "none")
"""How the ranks' clocks were put on one clock (``docs/multi-rank.md``)."""

JOB_VERDICTS: Final = ("slow_rank", "slow_link", "slow_rank_and_link", "skewed", "balanced", "no_collectives")
"""What the cross-rank analysis concludes about a job's collectives."""


@dataclass(frozen=True)
class ClockAlignment:
    """How the sources' clocks were aligned: ``aligned_ns = start_ns + offsets_ns[source]``, on the
    clock of ``reference``.  The event table keeps every trace's own clock; only the collective
    analysis applies the offsets."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"method": CLOCK_METHODS}
    FIELD_DOCS: ClassVar[dict[str, str]] = {
        "method": "single_clock (one file), anchor (the traces' own epoch anchors), collective_end (the end of "
        "the first collective every rank shares), none (no way to align: collectives not compared).",
        "offsets_ns": "ns to add to a source's times to put them on the reference clock, by source path.",
        "residual_skew_ns": "Median, over matched collectives, of the spread of their end times after alignment "
        "(collectives end together, so this is what alignment and matching leave over); null without collectives.",
    }

    method: str
    reference: str | None
    """The source whose clock the aligned times are on (the lowest rank's)."""
    offsets_ns: Mapping[str, int]
    residual_skew_ns: int | None
    note: str
    """One line: how the clocks were aligned, or why they could not be."""


@dataclass(frozen=True)
class CollectiveStat:
    """One collective matched across ranks: the n-th of its kind on its channel on every rank.

    Times on the aligned clock (ns).  ``waits_ns`` and ``last`` index :attr:`JobAnalysis.ranks`.
    """

    index: int
    """Position in time order (by the earliest arrival)."""
    kind: str
    """AllReduce, AllGather, ReduceScatter, SendRecv, Broadcast, AllToAll, Reduce, Send, Recv, or the
    kernel's name when it names none of these."""
    channel: str
    """``stream 20`` when every rank runs this kind on the same stream ids, else ``stream #1`` (the
    rank's first stream of this kind by first use, then #2, ...)."""
    seq: int
    """n: the collective's position (from 0) among those of its kind on its channel."""
    ranks: int
    """Ranks that took part."""
    start_ns: int
    """The earliest arrival (kernel start)."""
    end_ns: int
    """The latest kernel end."""
    arrival_skew_ns: int
    """Latest start − earliest start."""
    last: int | None
    """The rank (position in ``JobAnalysis.ranks``) that arrived last; null when all started together."""
    transfer_ns: int
    """The last arrival's kernel duration: the collective's time once every rank was there."""
    end_spread_ns: int
    """Latest end − earliest end (small when the clocks are aligned and the match is right)."""
    waits_ns: tuple[int | None, ...]
    """Per rank (as ``JobAnalysis.ranks``): its start → the last rank's start; null when absent."""


@dataclass(frozen=True)
class RankSummary:
    """One rank (device) of a job: its breakdown per step and what it did at the collectives."""

    rank: int | None
    device: int
    pid: int | None
    source: str
    steps: int
    """Step windows (0: the activity window, counted as one step below)."""
    step_ns_per_step: float
    compute_ns_per_step: float
    exposed_comm_ns_per_step: float
    idle_ns_per_step: float
    compute_excess_ns_per_step: float
    """Compute per step − the median over all ranks (``JobAnalysis.median_compute_ns_per_step``)."""
    collectives: int
    """Matched collectives it took part in."""
    last_arrivals: int
    """How many of them it arrived at last."""
    expected_last_arrivals: float
    """How many it would arrive at last by chance: Σ 1/ranks over its collectives with arrival skew."""
    last_arrival_bound: float
    """Chernoff bound on the chance of arriving last at least ``last_arrivals`` times by chance (1 when
    not above the expectation)."""
    wait_ns: int
    """Its total wait inside collectives (its start → the last rank's start)."""
    exposed_wait_ns: int
    """The part of ``wait_ns`` with no compute of its own beside it (time lost, not hidden)."""
    wait_caused_ns: int
    """The other ranks' total wait in the collectives it arrived at last."""
    exposed_wait_caused_ns: int
    """The exposed part of ``wait_caused_ns``."""
    wait_caused_share: float
    """Median over the other communicating ranks of (the exposed wait it caused them / their step time):
    what it costs the others."""
    straggler: bool
    """Arrives last far more often than chance and computes more per step than the median of the others."""


@dataclass(frozen=True)
class JobAnalysis:
    """A whole job across ranks: clock alignment, collectives matched across ranks, per-rank summary and
    the verdict: a slow rank (compute skew), a slow link (long collectives, little arrival skew), both,
    or neither.  Definitions: ``docs/multi-rank.md``.

    ``collectives`` holds the first ``max_collectives`` matched collectives in time order
    (``collectives_total`` counts them all); ``collective_table`` holds every matched call as a
    DataFrame (columns in :func:`traceq.analyses.collectives.match_collectives`).
    """

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"verdict": JOB_VERDICTS}

    clock: ClockAlignment
    comm_calls: int
    """Communication kernels on the ranks."""
    unmatched_calls: int
    """Those that matched no call on another rank (their n-th has no partner)."""
    collectives_total: int
    collectives: tuple[CollectiveStat, ...]
    ranks: tuple[RankSummary, ...]
    """One per device, in device order (rank, then source, process, GPU)."""
    median_compute_ns_per_step: float
    median_arrival_skew_ns: int | None
    median_transfer_ns: int | None
    """Median over collectives of ``transfer_ns`` (the last arrival's kernel duration)."""
    wait_share: float
    """Σ waits / Σ collective kernel time over matched calls: how much of the collectives is waiting."""
    exposed_comm_share: float
    """Median over ranks of exposed communication / step time."""
    verdict: str
    straggler: int | None
    """The slow rank (position in ``ranks``) when the verdict names one."""
    slowest: int | None
    """The rank that caused the most wait (position in ``ranks``); null without arrival skew."""
    note: str
    """One line: the verdict and its numbers, or why collectives could not be compared."""
    collective_table: pl.DataFrame = field(repr=False, compare=False)
