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

from traceq.analyses.options import Options
from traceq.intervals import Intervals

CAUSES: Final = ("input", "sync", "compile", "launch", "cpu", "dependency", "unknown")
"""Causes of idle time, in report order (``docs/analyses.md``: what the host was doing at each idle ns)."""

GAP_KINDS: Final = ("leading", "between", "trailing")
"""Where an idle interval lies: before a device's first activity, between two, after its last."""


def zero_by_cause() -> dict[str, int]:
    return dict.fromkeys(CAUSES, 0)


REGIME_VERDICTS: Final = (
    "overhead-bound",
    "memory-bound",
    "compute-bound",
    "communication-bound",
    "input-bound",
    "idle",
)
"""What limits a device's steady step (``docs/analyses.md``, "Regimes"); ``idle`` when nothing does."""


@dataclass(frozen=True)
class Regime:
    """What limits a device's steady-state step (seed 000's regimes), with the numbers behind it (ns
    over its steady step windows)."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"verdict": REGIME_VERDICTS}

    verdict: str
    step_ns: int
    """Steady step time: the step windows outside warm-up."""
    overhead_ns: int
    """Idle ns the host spent issuing kernels, and CPU idle inside short gaps before kernels."""
    memory_ns: int
    """Time memory-bound kernel classes run (union)."""
    compute_ns: int
    """Time math kernel classes run (gemm, conv, attention; union)."""
    communication_ns: int
    """Exposed communication."""
    input_ns: int
    """Idle ns waiting for the data loader."""
    t_k_ns: int | None
    """Median kernel duration (communication kernels aside)."""
    t_cpu_ns: int | None
    """Median interval between consecutive launches on the main launching thread."""
    graph_share: float
    """Share of the kernels a CUDA-graph launch replayed."""


@dataclass(frozen=True)
class SteadyState:
    """A device's breakdown over its steady step windows (warm-up left out): what the findings and
    the regime weigh (ns)."""

    windows: int
    """Step windows counted (the activity window counts as one)."""
    dur_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    idle_by_cause_ns: Mapping[str, int]
    longest_cpu_idle_ns: int
    """The longest single stretch of ``cpu`` idle (host busy with other work: Python, callbacks, a
    garbage-collection pause) inside these windows."""
    launches: int | None = None
    """API calls that launched work on the device (kernels, copies, memsets, graph launches) starting
    inside these windows (:mod:`traceq.analyses.host_calls`); None in a report saved by a traceq that
    did not count them."""
    syncs: int | None = None
    """Synchronising calls of the device's process starting inside these windows; None as ``launches``."""


@dataclass(frozen=True)
class CommKernelStat:
    """One kernel name counted as communication (``docs/analyses.md``, "Communication kernels"): how
    often it ran, for how long, and which rule counted it."""

    name: str
    count: int
    total_ns: int
    matched_by: str
    """The library whose default pattern matched it (``NCCL``, ``DeepEP``, ...), ``--comm-pattern``
    (one of the user's patterns), or ``trace metadata`` (the trace marks it a collective)."""


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
    warmup_steps: int
    """Leading step windows left out of the steady state (``docs/analyses.md``, "Warm-up")."""
    steady: SteadyState
    launch_latency_ns: int
    """The device's measured launch latency (launch return to kernel start on an idle GPU)."""
    regime: Regime | None
    unlaunched_activities: int
    """Its GPU activities (of ``kernels + memcpys + memsets``) with no launching call recorded: the
    profiler did not record their CPU side, so idle before them is ``unknown``."""
    comm_kernels: tuple[CommKernelStat, ...]
    """The kernel names it counted as communication, most GPU time first (over the whole trace)."""


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
    warmup: bool
    """A warm-up step: left out of the steady state (findings, MFU) unless all steps are asked for."""


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
class OperatorStat:
    """One operator over the whole trace: the GPU work launched from inside it (ns;
    ``docs/analyses.md``, "Operators")."""

    name: str
    """The operator (``aten::mm``), or ``(no operator)`` for work launched outside every op."""
    calls: int
    """Operator ranges that launched work (a CUDA-graph replay's op counts once)."""
    activities: int
    kernels: int
    gpu_ns: int
    """Summed durations of the activities it launched."""
    share: float
    """``gpu_ns`` over the summed durations of every GPU activity in the trace."""


@dataclass(frozen=True)
class PhaseBreakdown:
    """One device's step time inside one phase (ns; ``docs/analyses.md``, "Phases"): a device's
    phases, ``(no phase)`` included, sum to its totals."""

    rank: int | None
    device: int
    pid: int | None
    source: str
    phase: str
    ranges: int
    """The phase's ranges in the device's process."""
    activities: int
    """GPU activities launched in it (innermost phase)."""
    dur_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    idle_by_cause_ns: Mapping[str, int]


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
    operators: tuple[OperatorStat, ...] = ()
    """The operators with the most GPU time (as many as ``kernels`` lists), from ``operator_table``."""
    phases: tuple[PhaseBreakdown, ...] = ()
    """Every device's phases, from ``phase_table``."""
    gaps_total: int | None = field(default=None, repr=False, compare=False)
    """Gaps in all, where ``gap_table`` does not hold them all; None: ``gap_table.height``."""
    kernel_totals: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """Every kernel name's count, total and longest duration (:func:`traceq.analyses.top_lists.kernel_totals`);
    ``kernels`` lists the top ones."""
    idle_causes: Mapping[int, Mapping[str, Intervals]] = field(default_factory=dict, repr=False, compare=False)
    """Per dev and cause, the idle ns (:class:`traceq.analyses.attribution.Attribution`); empty in an
    analysis merged from a job's parts."""
    windows: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """The step windows (:func:`traceq.analyses.steps.step_windows`: dev, window, step, name, start_ns,
    end_ns); no rows in an analysis merged from a job's parts."""
    options: Options = field(default_factory=Options, repr=False, compare=False)
    """What the analysis was asked (the step pattern, the input pattern, whether warm-up counts)."""
    operator_table: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """Per device and operator, the GPU work it launched (:func:`traceq.analyses.operator_table.operator_table`;
    ``docs/analyses.md``, "Operators")."""
    phase_table: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    """Per device and phase, its step time (:func:`traceq.analyses.phases.phase_table`;
    ``docs/analyses.md``, "Phases")."""

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
class DeviceRef:
    """One device of a job: the source (file) it came from, its process, rank and GPU."""

    source: str
    pid: int | None
    rank: int | None
    device: int


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
    measured_on: DeviceRef | None = None
    """The device whose share is :attr:`share`: the worst one (the straggler's: the slow one)."""
    caveats: tuple[str, ...] = ()
    """What the trace lacks of the work this finding was measured on (:class:`DataCaveat` texts):
    the numbers stand, but may overstate idle (``docs/findings.md``, "Incomplete data")."""


@dataclass(frozen=True)
class DataCaveat:
    """GPU work missing from a trace: rows skipped on import, or launched work never recorded.

    The devices it names have their compute, communication and idle measured without it; a
    finding measured on them carries ``text``, and is withheld where ``withholds``
    (``docs/findings.md``, "Incomplete data")."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"id": ("gpu_rows_skipped", "launched_work_unrecorded")}

    id: str
    source: str
    pid: int | None
    """The process whose launches went unrecorded; None for rows skipped in the whole source."""
    rank: int | None
    devices: tuple[int, ...]
    """The GPUs whose numbers lack the work (none where the trace holds no GPU work of the process)."""
    missing: int
    """GPU activities skipped, or launches whose work is not in the trace."""
    expected: int
    """The GPU activities there should be: those read plus the missing ones."""
    reasons: Mapping[str, int]
    """Skip reasons and counts (empty for unrecorded launches)."""
    withholds: bool
    """``missing`` is at least ``WITHHOLD_SHARE`` of ``expected``: findings on these devices are withheld."""
    text: str


@dataclass(frozen=True)
class WithheldFinding:
    """A finding that fired on a device missing too much of its GPU work to be trusted."""

    id: str
    title: str
    """What the finding would have said."""
    reason: str
    """The caveat that withholds it."""


@dataclass(frozen=True)
class MfuStep:
    """Model FLOPs utilisation of one step window of one device."""

    rank: int | None
    device: int
    step: int | None
    dur_ns: int
    mfu: float
    hfu: float | None
    warmup: bool
    """A warm-up step: listed, but left out of the mean."""


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
    """Over the steady steps (warm-up left out): total model FLOPs over total step time."""
    mean_hfu: float | None
    steps: tuple[MfuStep, ...]
