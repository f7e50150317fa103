"""The results of the cross-rank job analysis: clock alignment, collectives matched across ranks,
per-rank summaries and the verdict (frozen dataclasses, part of the JSON report; definitions in
``docs/multi-rank.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

import polars as pl

CLOCK_METHODS: Final = ("single_clock", "anchor", "collective_end", "none")
"""How the ranks' clocks were put on one clock (``docs/multi-rank.md``)."""

JOB_VERDICTS: Final = ("slow_rank", "slow_link", "slow_rank_and_link", "skewed", "balanced", "no_collectives")
"""What the cross-rank analysis concludes about a job's collectives."""

LATE_CAUSES: Final = ("compute", "cpu", "pause", "input", "sync", "compile", "unknown")
"""Why a rank is later than the others (``docs/multi-rank.md``): its GPU computes longer, or its host
keeps the GPU idle: CPU-bound, a pause (garbage-collection-like), its data loader, a sync, compiling."""


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

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"late_because": LATE_CAUSES}

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
    late_because: str
    """What makes it later than the others: the largest of its excesses over the others' medians per
    step (compute, or a host cause; ``pause``: the cpu excess is mostly one stretch)."""
    straggler: bool
    """Late beyond chance (arrival order, or every wait pointing at it with a material size) and
    slower of its own (more compute per step, or more host-caused idle): ``docs/multi-rank.md``."""
    # The host-state numbers behind late_because.  They read the CPU records each format keeps
    # (Kineto's ops, nsys's NVTX ranges and runtime calls), so unlike the job's other numbers they
    # differ a little between formats of one job: in the finding's metrics and the note, not the JSON.
    host_idle_ns_per_step: float = field(repr=False, compare=False)
    """Idle per steady step while its own host was busy elsewhere, in its data loader, blocked in a
    sync or compiling (the ``cpu``, ``input``, ``sync`` and ``compile`` causes)."""
    host_excess_ns_per_step: float = field(repr=False, compare=False)
    """``host_idle_ns_per_step`` − the median over the other communicating ranks."""
    longest_cpu_idle_ns: int = field(repr=False, compare=False)
    """Its longest single stretch of ``cpu`` idle (steady windows): a pause when long."""
    late_because_ns_per_step: float = field(repr=False, compare=False)
    """The excess that names ``late_because`` (0 with ``unknown``)."""


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
