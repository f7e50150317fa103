"""What a planted scenario promises: its idle ns by cause per step, and the diagnosis that must follow.

A :class:`PlantedScenario` pairs a job builder with its truth, written by hand beside it (each
number commented with the arithmetic that gives it), never read back from an analysis.  The causes
are those of ``docs/analyses.md`` ("Idle time by cause"), in report order: :data:`CAUSES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tracegen.planned.job import PlannedJob

CAUSES: Final = ("input", "sync", "compile", "launch", "cpu", "dependency", "unknown")
"""The causes of idle ns, in report order."""
FINDINGS: Final = (
    "launch_bound",
    "host_sync",
    "input_stall",
    "exposed_comm",
    "straggler",
    "memory_bound_kernels",
    "small_kernels",
)
REGIMES: Final = ("overhead-bound", "memory-bound", "compute-bound", "communication-bound", "input-bound")


def all_but(*firing: str) -> tuple[str, ...]:
    """Every finding id except ``firing``: a scenario's ``must_not_fire`` when only those may fire."""
    unknown = set(firing) - set(FINDINGS)
    if unknown:
        raise ValueError(f"no such findings: {sorted(unknown)}")
    return tuple(f for f in FINDINGS if f not in firing)


def idle(**ns: int) -> dict[str, int]:
    """Idle ns by cause, every cause present (``idle(sync=8_500)``)."""
    unknown = set(ns) - set(CAUSES)
    if unknown:
        raise ValueError(f"not causes: {sorted(unknown)}")
    return {c: ns.get(c, 0) for c in CAUSES}


def total(steps: tuple[Mapping[str, int], ...]) -> dict[str, int]:
    return {c: sum(s[c] for s in steps) for c in CAUSES}


@dataclass(frozen=True)
class DeviceTruth:
    """One rank's GPU: idle ns by cause in each step window, and what the report must say about it."""

    rank: int
    steps: tuple[Mapping[str, int], ...]
    """Idle ns by cause inside each step window, in time order (every window of the device)."""
    exposed_comm_ns: tuple[int, ...]
    """Exposed communication in each step window (communication kernels: the scenario's ``comm_kernels``)."""
    regime: str | None
    """The verdict over the steady steps (:data:`REGIMES`); None where the spec leaves it open."""
    launch_latency_ns: int = 2_500
    graph_replayed: bool = False
    unlaunched_activities: int = 0
    """GPU activities with no launching call on this device (the report must explain ``unknown`` by them)."""
    step_ns: tuple[int, ...] = ()
    """Each step window's duration, in time order, where the scenario states it (the step time a
    before/after diff decomposes: :mod:`tracegen.planned.scenarios.pairs`)."""

    def all_steps(self) -> dict[str, int]:
        return total(self.steps)

    def steady(self, warmup: int) -> dict[str, int]:
        """Over the steps after the first ``warmup`` (the steady state)."""
        return total(self.steps[warmup:])


@dataclass(frozen=True)
class StragglerTruth:
    """The rank the others wait for, and how the report must name why it is late."""

    rank: int
    host_state: str
    """``gpu`` (its kernels are slow), ``cpu`` (CPU work or a GC-like pause), ``input`` (its loader)."""
    words: tuple[str, ...] = ()
    """Any of these in the straggler finding names the host state (case-insensitive)."""


@dataclass(frozen=True)
class PlantedScenario:
    """A hand-planned job and its planted truth."""

    name: str
    expresses: tuple[str, ...]
    """The seed rows, exercises and issue-13 cases it is a timeline of."""
    build: Callable[[], PlannedJob]
    devices: tuple[DeviceTruth, ...]
    must_fire: tuple[str, ...] = ()
    must_not_fire: tuple[str, ...] = ()
    fix_keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per finding that must fire: words its fix must contain (case-insensitive, each of them)."""
    forbidden_fix_words: tuple[str, ...] = ()
    """Words no finding's fix may contain (``CUDA graph`` where launches are not the limit)."""
    warmup: int = 0
    """Leading steps that are warm-up."""
    straggler: StragglerTruth | None = None
    comm_kernels: tuple[str, ...] = ()
    """Every kernel name that counts as communication (the report lists them)."""
    kernel_ns: Mapping[str, int] = field(default_factory=dict)
    """Total duration of some kernel names over the whole trace (rank 0): what the kernel table must show."""

    def __post_init__(self) -> None:
        for fid in (*self.must_fire, *self.must_not_fire, *self.fix_keywords):
            if fid not in FINDINGS:
                raise ValueError(f"{self.name}: no finding {fid!r}")
        if set(self.must_fire) & set(self.must_not_fire):
            raise ValueError(f"{self.name}: a finding both must and must not fire")
        for d in self.devices:
            if d.regime is not None and d.regime not in REGIMES:
                raise ValueError(f"{self.name}: no regime {d.regime!r}")
            if d.step_ns and len(d.step_ns) != len(d.steps):
                raise ValueError(f"{self.name}: rank {d.rank} has {len(d.steps)} steps, durations for {len(d.step_ns)}")
            if len(d.exposed_comm_ns) != len(d.steps):
                raise ValueError(
                    f"{self.name}: rank {d.rank} has {len(d.steps)} steps, exposed comm for {len(d.exposed_comm_ns)}"
                )
