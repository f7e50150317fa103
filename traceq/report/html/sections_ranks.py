"""What the HTML report's Ranks section shows: each rank's time per step side by side, and for a
job across ranks its verdict, clock alignment, the collectives' facts and the per-rank table, as
data for ``templates/sections/ranks.html.j2`` and ``job.html.j2``.

Every string here is plain text: the templates escape it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import CAUSES, DeviceBreakdown
from traceq.report.html.chart_style import PALETTE
from traceq.report.html.charts_job import highlighted_rank, job_labels
from traceq.report.html.charts_steps import cause_value
from traceq.report.html.sections_steps import cell_label
from traceq.report.html.tables import Cell, Column, Table, num, row, table
from traceq.report.model import Report
from traceq.units import format_ns, format_share

OUTLIER_SPREAD: Final = 0.05
"""Ranks whose per-step numbers differ by more than this fraction are highlighted."""

CLOCK_METHOD_TEXT: Final = {
    "single_clock": "one clock: the ranks come from one file",
    "anchor": "the traces' own clock anchors (Kineto baseTimeNanoseconds, nsys session start)",
    "collective_end": "the end of the first collective every rank shares",
    "none": "not aligned",
}


@dataclass(frozen=True)
class Job:
    """The job across ranks: the verdict's word and sentence, a caution, the facts of its clock
    alignment and collectives, the clock offsets per source, and (with collectives) which charts
    are drawn, how many collectives the heatmap shows of how many, and the per-rank table."""

    word: str
    sentence: str
    caution: str | None
    facts: tuple[tuple[str, str], ...]
    clock_note: str | None
    offsets: Table | None
    reference: str
    collectives: bool
    skew_chart: bool
    arrivals_chart: bool
    collectives_shown: tuple[str, str] | None
    table: Table


@dataclass(frozen=True)
class Ranks:
    """The Ranks section: the job (when there is one), the chart and the per-step table."""

    job: Job | None
    chart: bool
    table: Table
    spread: str


def ranks(report: Report, drawn: set[str]) -> Ranks:
    devices = report.devices

    def per_step(value: Callable[[DeviceBreakdown], int]) -> list[float]:
        return [value(d) / max(d.steps, 1) for d in devices]

    # (column, values, which end stands out: the straggler has the most compute and the least exposed comm)
    columns: list[tuple[Column, list[float], Callable[[Sequence[float]], float]]] = [
        (Column("step time", num=True), per_step(lambda d: d.dur_ns), max),
        (Column("compute", num=True, swatch=PALETTE["compute"]), per_step(lambda d: d.compute_ns), max),
        (Column("exposed comm", num=True, swatch=PALETTE["comm"]), per_step(lambda d: d.exposed_comm_ns), min),
        (Column("idle", num=True), per_step(lambda d: d.idle_ns), max),
    ]
    for c in CAUSES:
        values = per_step(cause_value(c))
        if any(values):
            columns.append((Column(c, num=True, swatch=PALETTE[c]), values, max))
    rows = [
        row(
            cell_label(d.rank, d.device),
            num(str(d.steps)),
            *(num(format_ns(v[i]), cls=_outlier(v, i, pick)) for _, v, pick in columns),
        )
        for i, d in enumerate(devices)
    ]
    head = (Column("device"), Column("steps", num=True), *(column for column, _, _ in columns))
    return Ranks(
        job=None if report.job is None else job(report.job, drawn),
        chart="chart-ranks" in drawn,
        table=table(head, rows),
        spread=f"{OUTLIER_SPREAD:.0%}",
    )


def _outlier(values: Sequence[float], i: int, pick: Callable[[Sequence[float]], float]) -> str:
    low, high = min(values), max(values)
    return "hi" if high > low * (1 + OUTLIER_SPREAD) and values[i] == pick(values) else ""


def _optional_ns(ns: float | None) -> str:
    return format_ns(ns) if ns is not None else "-"


def job(job: JobAnalysis, drawn: set[str]) -> Job:
    """The job across ranks: verdict, clock alignment, collectives and the per-rank table."""
    note, _, caution = job.note.partition("; caution: ")
    word, sep, sentence = note.partition(": ")
    if not sep or word not in ("slow rank", "slow link", "skewed", "balanced"):
        word, sentence = job.verdict.replace("_", " "), note
    clock = job.clock
    facts = (
        ("clocks aligned by", CLOCK_METHOD_TEXT.get(clock.method, clock.method)),
        ("residual skew", _optional_ns(clock.residual_skew_ns)),
        ("collectives matched", f"{job.collectives_total:,}"),
        ("communication kernels", f"{job.comm_calls:,} ({job.unmatched_calls:,} unmatched)"),
        ("median arrival skew", _optional_ns(job.median_arrival_skew_ns)),
        ("median transfer", _optional_ns(job.median_transfer_ns)),
        ("waiting share of collective time", format_share(job.wait_share)),
        ("exposed comm (median rank)", format_share(job.exposed_comm_share)),
    )
    offsets = None
    if len(clock.offsets_ns) > 1:
        offset_rows = [row(Cell(src, cls="name"), num(f"{ns:,}")) for src, ns in sorted(clock.offsets_ns.items())]
        offsets = table((Column("source"), Column("offset (ns)", num=True)), offset_rows)
    shown = (
        (f"{len(job.collectives):,}", f"{job.collectives_total:,}")
        if job.collectives_total > len(job.collectives)
        else None
    )
    return Job(
        word=word,
        sentence=sentence,
        caution=caution or None,
        facts=facts,
        clock_note=clock.note
        if clock.method in ("collective_end", "none") and job.verdict != "no_collectives"
        else None,
        offsets=offsets,
        reference=clock.reference or "-",
        collectives=job.collectives_total > 0,
        skew_chart="chart-skew" in drawn,
        arrivals_chart="chart-arrivals" in drawn,
        collectives_shown=shown,
        table=_job_table(job),
    )


def _job_table(job: JobAnalysis) -> Table:
    labels = job_labels(job)
    slow = highlighted_rank(job)
    rows = []
    for i, r in enumerate(job.ranks):
        hi = "hi" if i == slow else ""
        steps = max(r.steps, 1)
        sign = "+" if r.compute_excess_ns_per_step >= 0 else "−"
        rows.append(
            row(
                Cell(labels[i] + (" (straggler)" if i == job.straggler else ""), cls=hi),
                num(format_ns(r.compute_ns_per_step), cls=hi),
                num(sign + format_ns(abs(r.compute_excess_ns_per_step)), cls=hi),
                num(format_ns(r.exposed_comm_ns_per_step)),
                num(format_ns(r.exposed_wait_ns / steps)),
                num(f"{r.last_arrivals:,} of {r.collectives:,}", cls=hi),
                num(f"{r.expected_last_arrivals:.1f}"),
                num(f"{r.last_arrival_bound:.2g}"),
                num(format_share(r.wait_caused_share), cls=hi),
            )
        )
    columns = (
        Column("device"),
        Column("compute per step", num=True),
        Column("vs median", num=True),
        Column("exposed comm per step", num=True),
        Column("own wait per step", num=True),
        Column("arrived last", num=True),
        Column("by chance", num=True),
        Column("chance bound", num=True),
        Column("costs the others", num=True),
    )
    return table(columns, rows)
