"""A job analysed part by part: what a worker keeps of one part, and how the driver merges the parts.

A *part* is one event table: a file of a job (one rank, usually; a multi-process nsys export holds
several devices), or a whole trace already in memory.  The report pipeline (:mod:`traceq.pipeline`)
computes every report from parts, so that a job's report never holds more than one part's events
in one process.  Three steps, each a function of small data:

1. **summarise** (:func:`summarise_part`, where the part is read): its step breakdown (devices,
   steps, its longest gaps, every kernel name's totals), its device table, its communication
   kernels, and for every ranked findings rule (:data:`~traceq.analyses.findings.RANKED_RULES`)
   each device's share.  Its size grows with devices, steps, kernel names and collectives, not
   with events.
2. **merge** (:func:`merge_parts`, in the driver): the job's device table and analysis, the rules'
   rankings over every device; the pipeline then matches the collectives across parts
   (:func:`job_calls`, :func:`traceq.analyses.collectives.align_and_match`) and
   :func:`detail_requests` says what each part must still compute: the exposed part of its waits
   in the collectives (which needs its compute activity), the finding of each rule whose worst
   device it holds (which needs its events), the timeline's rows in a window.
3. **detail** (:func:`detail_part`, where the part is read again): answers its request.

Every number equals the one the whole-table functions compute (``analyze``, ``find_findings``,
``analyze_job``) on the parts put together (each part's ``is_comm`` recomputed for the options
first, as they do: :func:`~traceq.analyses.comm.with_comm_flags`): each device's breakdown depends only on its own
source's rows; the top lists (gaps, kernels, rankings) are merged by the same functions that order
one table's (:func:`~traceq.analyses.top_lists.longest_gaps`,
:func:`~traceq.analyses.top_lists.top_kernels`); a rule's finding is explained by the rule itself,
on the part holding its worst device, given the merged ranking.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import schema
from traceq.analyses import memo
from traceq.analyses.breakdown import analyze_flagged
from traceq.analyses.collectives import compute_activity, wait_covered_ns
from traceq.analyses.comm import with_comm_flags
from traceq.analyses.completeness import CoverageRow, coverage_rows
from traceq.analyses.deferred import Deferred
from traceq.analyses.findings import JOB_RULES, RANKED_RULES, rank_findings
from traceq.analyses.findings_base import DeviceTotals, Ranking, WorstDevice, build_context, classified_kernels, ranking
from traceq.analyses.host_state import CPU_ROW
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import Analysis, DeviceBreakdown, Finding, Mfu, PhaseBreakdown, StepBreakdown
from traceq.analyses.operator_table import top_operators
from traceq.analyses.options import Options
from traceq.analyses.steps import DEVICE_KEY, devices
from traceq.analyses.timeline import TimelineWindow
from traceq.analyses.top_lists import longest_gap_rows, longest_gaps, top_kernels
from traceq.meta import SourceMeta
from traceq.stats import CategoryCount

COMM_COLUMNS: Final = ("kind", "is_comm", "source", "pid", "device", "stream", "name", "start_ns", "end_ns")
"""The columns of the communication kernels a part hands in (what ``collective_calls`` reads)."""

DeviceKey = tuple[str, int | None, int]
"""(source, pid, device): a device, across parts."""

_RULES_BY_ID: Final = {rule.id: rule for rule in RANKED_RULES}


@dataclass(frozen=True)
class PartSummary:
    """What the driver needs of one part: small, whatever the number of events.

    Device-indexed fields follow the part's own device order (``device_table``, its ``dev`` the
    row position), which is the job's order restricted to the part.
    """

    sources: tuple[SourceMeta, ...]
    import_stats: tuple[CategoryCount, ...]
    device_table: pl.DataFrame
    """:func:`traceq.analyses.steps.devices` of the part, in its dev order."""
    breakdown: tuple[DeviceBreakdown, ...]
    steps: tuple[StepBreakdown, ...]
    longest_gaps: pl.DataFrame
    """The part's longest ``max_gaps`` rows of its gap table (its columns)."""
    gaps_total: int
    kernel_totals: pl.DataFrame
    """Every kernel name of the part (:func:`~traceq.analyses.top_lists.kernel_totals`)."""
    totals: tuple[DeviceTotals, ...]
    """The findings context's devices (step windows and breakdown totals)."""
    rankings: Mapping[str, tuple[tuple[float, int], ...]]
    """Per ranked rule: (share, part dev) of every device with step time, worst first."""
    comm_kernels: pl.DataFrame
    """The communication kernels (:data:`COMM_COLUMNS`), in event order."""
    coverage: tuple[CoverageRow, ...]
    """Per process, its launches and the GPU work the trace holds of them
    (:func:`~traceq.analyses.completeness.work_coverage`)."""
    operator_table: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per device and operator (:func:`~traceq.analyses.operator_table.operator_table`)."""
    phases: tuple[PhaseBreakdown, ...] = ()

    def estimated_size(self) -> int:
        """Bytes held, roughly: the frames, plus a few hundred per listed item."""
        frames = (self.device_table, self.longest_gaps, self.kernel_totals, self.comm_kernels, self.operator_table)
        items = len(self.breakdown) + len(self.steps) + len(self.totals) + len(self.coverage) + len(self.phases)
        items += sum(len(r) for r in self.rankings.values())
        return int(sum(f.estimated_size() for f in frames)) + 300 * items


class _KeptAnalysis:
    """The analysis of the part this process summarised last, kept for round two.

    A part in memory (one trace, the common case) is summarised and detailed in the same process:
    round two takes round one's flagged events and analysis instead of computing them again (half
    of a report's analysis time).  Keyed on the part's event frame itself (a weak reference: the
    kept analysis never outlives the frame) and the options; one slot, emptied when taken or by
    :func:`forget_kept_analysis`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[weakref.ref[pl.DataFrame], Options, pl.DataFrame, Analysis] | None = None

    def keep(self, events: pl.DataFrame, options: Options, flagged: pl.DataFrame, analysis: Analysis) -> None:
        with self._lock:
            self._kept = (weakref.ref(events), options, flagged, analysis)

    def take(self, events: pl.DataFrame, options: Options) -> tuple[pl.DataFrame, Analysis] | None:
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is None or kept[0]() is not events or kept[1] != options:
            return None
        return kept[2], kept[3]

    def clear(self) -> None:
        with self._lock:
            self._kept = None


_KEPT: Final = _KeptAnalysis()


def forget_kept_analysis() -> None:
    """Let go of the analysis kept for round two and of the memos' derived frames (the report is done)."""
    _KEPT.clear()
    memo.forget()


def summarise_part(
    events: pl.DataFrame, sources: tuple[SourceMeta, ...], import_stats: tuple[CategoryCount, ...], options: Options
) -> PartSummary:
    """Summarise one part (its event table, ranks already assigned) for :func:`merge_parts`."""
    raw = events
    events = with_comm_flags(events, options)
    # (what reads only the events is done by whichever analysis thread is free first)
    read = Deferred(_read_of_events, events)
    analysis = analyze_flagged(events, options, spare=(read, Deferred(classified_kernels, events)))
    _KEPT.keep(raw, options, events, analysis)
    totals: tuple[DeviceTotals, ...] = ()
    rankings: dict[str, tuple[tuple[float, int], ...]] = {rule.id: () for rule in RANKED_RULES}
    if analysis.devices:
        ctx = build_context(events, analysis)
        totals = ctx.devices
        rankings = {rule.id: tuple((share, d.dev) for share, d in ranking(ctx, rule.cost_ns)) for rule in RANKED_RULES}
    coverage, comm = read.result()
    gap_table = analysis.gap_table
    return PartSummary(
        sources=sources,
        import_stats=import_stats,
        device_table=devices(events).drop("dev"),
        breakdown=analysis.devices,
        steps=analysis.steps,
        longest_gaps=longest_gap_rows(gap_table, options.max_gaps),
        gaps_total=gap_table.height,
        kernel_totals=analysis.kernel_totals,
        totals=totals,
        rankings=rankings,
        comm_kernels=comm,
        coverage=coverage,
        operator_table=analysis.operator_table,
        phases=analysis.phases,
    )


def _read_of_events(events: pl.DataFrame) -> tuple[tuple[CoverageRow, ...], pl.DataFrame]:
    """What a part's summary reads of its events alone: the work coverage, and the communication
    kernels (:data:`COMM_COLUMNS`)."""
    is_comm = (pl.col("kind") == "kernel") & pl.col("is_comm") & pl.col("device").is_not_null()
    return coverage_rows(events), events.lazy().filter(is_comm).select(COMM_COLUMNS).collect()


@dataclass(frozen=True)
class MergedParts:
    """The parts of a job merged: its device table, analysis and the rules' rankings.

    ``part_devs[i][j]`` is the job dev of part i's dev j; ``owner[dev]`` the part holding a job dev.
    """

    device_table: pl.DataFrame
    analysis: Analysis
    totals: tuple[DeviceTotals, ...]
    """The findings context's devices, by job dev."""
    rankings: Mapping[str, tuple[tuple[float, int], ...]]
    """Per ranked rule: (share, job dev), worst first, ties by dev (as :func:`ranking`)."""
    part_devs: tuple[tuple[int, ...], ...]
    owner: tuple[int, ...]

    def key(self, dev: int) -> DeviceKey:
        row = self.device_table.row(dev, named=True)
        return (row["source"], row["pid"], row["device"])


def merge_parts(parts: Sequence[PartSummary], options: Options) -> MergedParts:
    """The job's device table (as :func:`~traceq.analyses.steps.devices` of the whole table), analysis
    (as :func:`~traceq.analyses.breakdown.analyze`, its ``gap_table`` without rows and
    ``gaps_total`` set) and rankings, from its parts in job order."""
    tables = [
        p.device_table.with_columns(pl.lit(i, dtype=pl.Int64).alias("_part"), _local_dev()) for i, p in enumerate(parts)
    ]
    table = (
        pl.concat(tables, how="vertical_relaxed")
        .sort("rank", "source", "pid", "device", nulls_last=False)
        .with_row_index("dev")
    )
    part_of = table.get_column("_part").to_list()
    local_of = table.get_column("_local").to_list()
    part_devs_lists: list[list[int]] = [[0] * p.device_table.height for p in parts]
    for dev, (part, local) in enumerate(zip(part_of, local_of, strict=True)):
        part_devs_lists[part][local] = dev
    part_devs = tuple(tuple(d) for d in part_devs_lists)
    by_dev: list[DeviceBreakdown | None] = [None] * table.height
    steps_by_dev: list[tuple[StepBreakdown, ...]] = [()] * table.height
    totals_by_dev: list[DeviceTotals | None] = [None] * table.height
    for part, devs in zip(parts, part_devs, strict=True):
        per_device = _steps_per_device(part)
        for local, dev in enumerate(devs):
            by_dev[dev] = part.breakdown[local]
            steps_by_dev[dev] = per_device[local]
            if part.totals:
                totals_by_dev[dev] = replace(part.totals[local], dev=dev)
    gaps = pl.concat([p.longest_gaps for p in parts], how="vertical_relaxed") if parts else pl.DataFrame()
    kernels = pl.concat([p.kernel_totals for p in parts], how="vertical_relaxed") if parts else pl.DataFrame()
    operators = [p.operator_table for p in parts if p.operator_table.height]
    device_order = {(r["source"], r["pid"], r["device"]): i for i, r in enumerate(table.iter_rows(named=True))}
    phases = sorted(
        (ph for p in parts for ph in p.phases), key=lambda ph: device_order.get((ph.source, ph.pid, ph.device), 0)
    )
    analysis = Analysis(
        step_pattern=options.step_pattern,
        devices=tuple(d for d in by_dev if d is not None),
        steps=tuple(s for steps in steps_by_dev for s in steps),
        gaps=longest_gaps(gaps, options.max_gaps) if parts else (),
        kernels=top_kernels(kernels, options.top_kernels) if parts else (),
        gap_table=gaps.head(0),
        gaps_total=sum(p.gaps_total for p in parts),
        kernel_totals=kernels,
        options=options,
        operators=top_operators(pl.concat(operators, how="vertical_relaxed"), options.top_kernels) if operators else (),
        phases=tuple(phases),
    )
    rankings = {
        rule.id: tuple(
            sorted(
                (
                    (share, devs[local])
                    for p, devs in zip(parts, part_devs, strict=True)
                    for share, local in p.rankings[rule.id]
                ),
                key=lambda sd: (-sd[0], sd[1]),
            )
        )
        for rule in RANKED_RULES
    }
    totals = tuple(t for t in totals_by_dev if t is not None)
    if len(totals) != table.height:
        raise RuntimeError(f"{table.height} devices but findings totals for {len(totals)}")
    return MergedParts(
        device_table=table.drop("_part", "_local"),
        analysis=analysis,
        totals=totals,
        rankings=rankings,
        part_devs=part_devs,
        owner=tuple(part_of),
    )


def _local_dev() -> pl.Expr:
    return pl.int_range(pl.len(), dtype=pl.Int64).alias("_local")


def _steps_per_device(part: PartSummary) -> list[tuple[StepBreakdown, ...]]:
    """The part's steps (sorted by its dev, then time) cut into one run per device: each device has
    as many as its step windows (the activity window counts as one)."""
    counts = [d.steps if d.window == "steps" else 1 for d in part.breakdown]
    if sum(counts) != len(part.steps):
        raise RuntimeError(f"{sum(counts)} step windows but {len(part.steps)} steps in {part.sources}")
    out, start = [], 0
    for n in counts:
        out.append(part.steps[start : start + n])
        start += n
    return out


def job_calls(parts: Sequence[PartSummary]) -> pl.DataFrame:
    """Every part's communication kernels, in job order: the rows of the whole event table that
    :func:`traceq.analyses.collectives.collective_calls` reads."""
    frames = [p.comm_kernels for p in parts]
    return pl.concat(frames, how="vertical") if frames else schema.empty_frame().select(COMM_COLUMNS)


@dataclass(frozen=True)
class DetailRequest:
    """What one part still has to compute, on its own events.

    * ``waits``: rows (source, pid, device, start_ns, wait_ns) of its calls in the collective table;
      the answer is, per row, the ns of ``[start_ns, start_ns + wait_ns)`` its compute covers.
    * ``rules``: per rule whose worst device it holds, the job's ranking (the worst device first).
    * ``window``: the timeline's window and the keys of the part's devices drawn in it: its GPU
      activity and gap rows of those devices that may overlap the window (the excerpt's input).
    """

    waits: pl.DataFrame | None = None
    rules: Mapping[str, Ranking] = field(default_factory=dict)
    mfu: Mfu | None = None
    window: tuple[TimelineWindow, tuple[DeviceKey, ...]] | None = None

    @property
    def needs_analysis(self) -> bool:
        return bool(self.rules) or self.window is not None


@dataclass(frozen=True)
class PartDetail:
    """A part's answer to its :class:`DetailRequest`."""

    covered_ns: np.ndarray[Any, np.dtype[np.int64]]
    findings: tuple[Finding, ...] = ()
    activity: pl.DataFrame | None = None
    """Event rows (every column) of GPU activity that may overlap the window, and the CPU rows of
    the same processes there (the timeline's launching threads)."""
    gaps: pl.DataFrame | None = None
    """Gap-table rows that may overlap the window."""

    def estimated_size(self) -> int:
        frames = [f for f in (self.activity, self.gaps) if f is not None]
        return int(self.covered_ns.nbytes + sum(f.estimated_size() for f in frames)) + 2000 * len(self.findings)


def detail_requests(
    merged: MergedParts,
    table: pl.DataFrame,
    *,
    fire_share: float,
    mfu: Mfu | None,
    window: TimelineWindow | None,
) -> tuple[dict[int, DetailRequest], dict[int, np.ndarray[Any, np.dtype[np.int64]]]]:
    """Per part (by position), what it must compute, and the rows of ``table`` (the collective
    table) that its ``waits`` stand for, in order.

    A rule is asked of the part holding its worst device, when that device's share reaches
    ``fire_share`` (below it the rule does not fire); the timeline of the parts holding the
    window's devices (the job's first devices), when there is a ``window``.
    """
    waits: dict[int, pl.DataFrame] = {}
    rows_of: dict[int, np.ndarray[Any, np.dtype[np.int64]]] = {}
    if table.height:
        owners = pl.Series("_part", [merged.owner[d] for d in table.get_column("dev").to_list()], dtype=pl.Int64)
        keyed = (
            table.select("dev", "start_ns", "wait_ns")
            .with_row_index("_row")
            .with_columns(owners)
            .join(merged.device_table.select("dev", *DEVICE_KEY), on="dev", how="left", maintain_order="left")
        )
        for (part,), rows in keyed.partition_by("_part", as_dict=True, maintain_order=True).items():
            waits[int(part)] = rows.select(*DEVICE_KEY, "start_ns", "wait_ns")
            rows_of[int(part)] = rows.get_column("_row").to_numpy().astype(np.int64)
    rules: dict[int, dict[str, Ranking]] = {}
    for rule_id, ranked in merged.rankings.items():
        if not ranked or ranked[0][0] < fire_share:
            continue
        fixed = tuple((share, merged.totals[dev]) for share, dev in ranked)
        rules.setdefault(merged.owner[ranked[0][1]], {})[rule_id] = fixed
    windows: dict[int, tuple[DeviceKey, ...]] = {}
    if window is not None:
        for dev in range(min(len(window.devices), merged.device_table.height)):
            windows.setdefault(merged.owner[dev], ())
            windows[merged.owner[dev]] += (merged.key(dev),)
    requests = {}
    for part in range(len(merged.part_devs)):
        if part in waits or part in rules or part in windows:
            requests[part] = DetailRequest(
                waits=waits.get(part),
                rules=rules.get(part, {}),
                mfu=mfu if part in rules else None,  # only the rules read it
                window=None if window is None or part not in windows else (window, windows[part]),
            )
    return requests, rows_of


def detail_part(events: pl.DataFrame, request: DetailRequest, options: Options) -> PartDetail:
    """Answer a :class:`DetailRequest` from the part's event table (ranks assigned as in
    :func:`summarise_part`)."""
    kept = _KEPT.take(events, options)
    events = with_comm_flags(events, options) if kept is None else kept[0]
    table = devices(events)
    covered = np.zeros(0, np.int64)
    if request.waits is not None and request.waits.height:
        covered = _covered(events, table, request.waits)
    if not request.needs_analysis:
        return PartDetail(covered_ns=covered)
    # (round one's analysis listed the top kernels too, which nothing here reads)
    analysis = analyze_flagged(events, replace(options, top_kernels=0)) if kept is None else kept[1]
    findings: list[Finding] = []
    if request.rules:
        ctx = build_context(events, analysis, request.mfu)
        own = {(d.source, d.pid, d.device): d for d in ctx.devices}
        for rule_id, ranked in request.rules.items():
            # The part's own devices (its dev numbering, which its frames use) where it holds them.
            fixed = tuple((share, own.get((d.source, d.pid, d.device), d)) for share, d in ranked)
            worst = WorstDevice(share=fixed[0][0], device=fixed[0][1], ranked=fixed)
            findings.append(_RULES_BY_ID[rule_id].explain(ctx, worst))
    activity = gaps = None
    if request.window is not None:
        window, keys = request.window
        near = (pl.col("start_ns") <= window.end_ns) & (pl.col("end_ns") >= window.start_ns)
        on_keys = pl.any_horizontal(
            (pl.col("source") == source) & pl.col("pid").eq_missing(pid) & (pl.col("device") == device)
            for source, pid, device in keys
        )
        on_processes = pl.any_horizontal(
            (pl.col("source") == source) & pl.col("pid").eq_missing(pid) for source, pid, _ in keys
        )
        # The GPU activity, and the CPU rows of the same processes (the excerpt's launching threads).
        activity = events.filter(
            near & ((pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS) & on_keys) | (CPU_ROW & on_processes))
        )
        gaps = analysis.gap_table.filter(on_keys & near)
    return PartDetail(covered_ns=covered, findings=tuple(findings), activity=activity, gaps=gaps)


def _covered(events: pl.DataFrame, table: pl.DataFrame, waits: pl.DataFrame) -> np.ndarray[Any, np.dtype[np.int64]]:
    compute = compute_activity(events, table)
    keyed = waits.with_row_index("_row").join(
        table.select("dev", *DEVICE_KEY), on=list(DEVICE_KEY), how="left", nulls_equal=True, maintain_order="left"
    )
    covered = np.zeros(waits.height, np.int64)
    for (dev,), rows in keyed.partition_by("dev", as_dict=True, maintain_order=True).items():
        at = rows.get_column("_row").to_numpy()
        covered[at] = wait_covered_ns(
            compute.filter(pl.col("dev") == dev),
            rows.get_column("start_ns").to_numpy(),
            rows.get_column("wait_ns").to_numpy(),
        )
    return covered


def merged_findings(merged: MergedParts, details: Sequence[Finding], job: JobAnalysis | None) -> tuple[Finding, ...]:
    """The job's findings: the ranked rules' findings from the parts (``details``) and the job rules
    run here, on the merged devices, ordered as :func:`~traceq.analyses.findings.find_findings`."""
    if not merged.analysis.devices:
        return ()
    return rank_findings([*details, *(rule.find(merged.totals, job) for rule in JOB_RULES)])


__all__ = [
    "DetailRequest",
    "MergedParts",
    "PartDetail",
    "PartSummary",
    "detail_part",
    "detail_requests",
    "job_calls",
    "merge_parts",
    "merged_findings",
    "summarise_part",
]
