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

CAUSES: Final = ("input", "sync", "launch", "other", "unknown")
"""Causes of an idle gap, in the order the rules try them (``unknown``: no launching call found)."""


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
    """A maximal interval with no activity on a device, between two activities, and its cause."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"cause": CAUSES}

    rank: int | None
    device: int
    pid: int | None
    start_ns: int
    end_ns: int
    dur_ns: int
    in_steps_ns: int
    """How much of the gap lies inside the device's step windows (what counts toward idle_by_cause)."""
    cause: str
    next: ActivityRef
    launch: CallRef | None
    sync: CallRef | None


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
    :func:`traceq.analyses.gaps.attribute_gaps`).
    """

    step_pattern: str
    devices: tuple[DeviceBreakdown, ...]
    steps: tuple[StepBreakdown, ...]
    gaps: tuple[Gap, ...]
    kernels: tuple[KernelStat, ...]
    gap_table: pl.DataFrame = field(repr=False, compare=False)

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
