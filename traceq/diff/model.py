"""The diff of two reports: what ``traceq diff`` prints, draws and writes as JSON (the JSON contract).

``Diff.to_dict()`` is the JSON diff; ``diff_json_schema()`` (written to ``schemas/diff.schema.json``
by ``scripts/generate_docs.py``) is generated from these dataclasses' type hints, as the report's is.
Every number is defined in ``docs/diff.md``; per-step values are ns per steady step window, and a
decomposition's parts add up to its step change exactly (in the rationals its floats round:
:mod:`traceq.diff.decompose`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from traceq.analyses.model import CAUSES, REGIME_VERDICTS
from traceq.report.jsonschema import dataclass_schema, to_jsonable

DIFF_SCHEMA_VERSION: Final = 1

PART_KEYS: Final = ("compute", "exposed_comm", *CAUSES, "unaccounted")
"""The parts of a step, in order: compute, exposed communication, idle by cause, and (only where a
side's numbers do not add up, as a hand-edited saved report's might) what they leave unaccounted."""

BASES: Final = ("rank and GPU", "process order and GPU", "device order", "per-rank mean")
"""How the devices of the two sides were paired (``docs/diff.md``, "Devices")."""

KERNEL_STATUSES: Final = ("slower", "faster", "unchanged", "added", "removed", "unlisted")
FINDING_STATUSES: Final = ("resolved", "new", "changed", "unchanged", "withheld")
MATCHED_BY: Final = ("name", "normalised name")


@dataclass(frozen=True)
class StepParts:
    """One device's steady state as the report gives it: totals over its steady windows (ns)."""

    windows: int
    dur_ns: int
    compute_ns: int
    exposed_comm_ns: int
    idle_by_cause_ns: Mapping[str, int]


@dataclass(frozen=True)
class Term:
    """One part of the step, per steady step: before, after and the change (ns)."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"key": PART_KEYS}

    key: str
    before_ns: float
    after_ns: float
    delta_ns: float


@dataclass(frozen=True)
class Decomposition:
    """The change of the mean steady step and its parts; ``terms`` sum to ``delta_ns`` (exactly in
    the rationals these floats round)."""

    step_before_ns: float
    step_after_ns: float
    delta_ns: float
    delta_share: float | None
    """``delta_ns / step_before_ns``; None when the step before is 0."""
    terms: tuple[Term, ...]


@dataclass(frozen=True)
class StepStats:
    """The steady step windows of one side (or device): their spread, and the median's standard
    error (``docs/diff.md``, "Noise")."""

    count: int
    mean_ns: float
    """The mean steady step: of the devices, each device's total over its windows (the
    decomposition's step)."""
    median_ns: float | None
    p10_ns: float | None
    p25_ns: float | None
    p75_ns: float | None
    p90_ns: float | None
    median_se_ns: float | None
    """Standard error of the median: 1.2533 × (IQR / 1.349) / √count; None under 2 steps."""


@dataclass(frozen=True)
class SideInfo:
    """One side of the diff: where it came from and its steady steps."""

    name: str
    """The trace, directory or files given; or the saved report."""
    saved_report: bool
    """Read from a saved JSON report (which diffs what it holds) rather than from traces."""
    files: tuple[str, ...]
    """The trace files the report was made of."""
    devices: int
    world_size: int | None
    """The job's world size, as its files state it (the largest); None where none does."""
    steps: StepStats
    kernel_names: int | None
    """Distinct kernel names in the trace; None where the saved report does not say."""
    kernels_listed: int


@dataclass(frozen=True)
class HostPace:
    """How one device (or a side's mean device) launched and synchronised, per steady step."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"regime": REGIME_VERDICTS}

    launches_per_step: float | None
    syncs_per_step: float | None
    t_cpu_ns: float | None
    """Median interval between launches on the main launching thread (the regime's evidence)."""
    t_k_ns: float | None
    """Median kernel duration, communication aside."""
    regime: str | None


@dataclass(frozen=True)
class DevicePair:
    """One device before and after, paired as ``Diff.basis`` says."""

    rank_before: int | None
    device_before: int
    pid_before: int | None
    rank_after: int | None
    device_after: int
    pid_after: int | None
    before: StepParts
    after: StepParts
    decomposition: Decomposition
    median_before_ns: float | None
    median_after_ns: float | None
    pace_before: HostPace
    pace_after: HostPace


@dataclass(frozen=True)
class KernelChange:
    """One kernel before and after (a name, or the names that fold to one normalised name), per step."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"status": KERNEL_STATUSES, "matched_by": MATCHED_BY}

    name: str
    """The kernel's name; its normalised name where several names matched as one."""
    status: str
    matched_by: str | None
    kernel_class: str
    names_before: tuple[str, ...]
    names_after: tuple[str, ...]
    count_before: int
    count_after: int
    per_step_before_ns: float
    per_step_after_ns: float
    delta_per_step_ns: float


@dataclass(frozen=True)
class KernelClassChange:
    """One kernel class (``docs/findings.md``, "Kernel classes") before and after, per step."""

    kernel_class: str
    per_step_before_ns: float
    per_step_after_ns: float
    delta_per_step_ns: float
    removed: int
    """Kernel names of the class gone after the change."""
    added: int


@dataclass(frozen=True)
class KernelDiff:
    """Every kernel matched across the sides, and the kernel classes; per step is per step window
    (``windows_*``: every window of every device: the kernels are counted over the whole trace)."""

    windows_before: int
    windows_after: int
    complete_before: bool
    """The side's report lists every kernel name (a saved report may list only its top ones)."""
    complete_after: bool
    changes: tuple[KernelChange, ...]
    """By the size of the change per step, largest first."""
    classes: tuple[KernelClassChange, ...]


@dataclass(frozen=True)
class FindingChange:
    """A finding before and after: resolved, new, changed in share, unchanged, or withheld on one side."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"status": FINDING_STATUSES}

    id: str
    status: str
    severity_before: str | None
    severity_after: str | None
    share_before: float | None
    share_after: float | None
    title_before: str | None
    title_after: str | None


@dataclass(frozen=True)
class MfuChange:
    """Model FLOPs utilisation before and after (each side's steady mean); None where a side has none."""

    mfu_before: float | None
    mfu_after: float | None
    hfu_before: float | None
    hfu_after: float | None


@dataclass(frozen=True, kw_only=True)
class Diff:
    """Two reports compared: the step change decomposed, per device, kernels, launches and syncs,
    findings and MFU, with a one-paragraph verdict.  Built by :func:`traceq.diff.compare.diff_sides`."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"basis": BASES}

    schema_version: int = DIFF_SCHEMA_VERSION
    verdict: str
    before: SideInfo
    after: SideInfo
    basis: str
    warnings: tuple[str, ...]
    decomposition: Decomposition
    """The mean over devices of each side's steady step, and its parts."""
    devices: tuple[DevicePair, ...]
    """The devices paired (none when the sides have different numbers of devices)."""
    pace_before: HostPace
    """The side's devices' mean launches and syncs per step, the medians of their t_cpu and t_k."""
    pace_after: HostPace
    kernels: KernelDiff
    findings: tuple[FindingChange, ...]
    mfu: MfuChange | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON diff (validates against ``schemas/diff.schema.json``)."""
        out: dict[str, Any] = to_jsonable(self)
        return out


def diff_json_schema() -> dict[str, Any]:
    """The JSON Schema of :meth:`Diff.to_dict`."""
    definitions: dict[str, Any] = {}
    dataclass_schema(Diff, definitions)
    root = definitions.pop("Diff")
    root["properties"]["schema_version"] = {"const": DIFF_SCHEMA_VERSION}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://traceq.dev/schemas/diff.schema.json",
        "title": "traceq diff",
        **root,
        "$defs": dict(sorted(definitions.items())),
    }
