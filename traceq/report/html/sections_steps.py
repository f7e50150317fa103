"""What the HTML report's sections on step time show: the step breakdown, idle time by cause
with the longest gaps, the timeline's notes and its longest gaps, the top kernels and MFU, as
data for the fragments of the same names under ``templates/sections/``.

Python computes every number and label here (formatted through :mod:`traceq.units`); the
templates only lay them out and escape every string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from traceq.analyses.model import CAUSES, DeviceBreakdown
from traceq.analyses.timeline import gap_fields, gap_label
from traceq.report.html.chart_style import PALETTE
from traceq.report.html.charts_steps import MAX_STEP_CHART_DEVICES
from traceq.report.html.tables import Cell, Column, Table, name_cell, num, row, table
from traceq.report.model import Report
from traceq.report.notes import caveat_note, comm_kernels, comm_summary, unknown_idle_note
from traceq.units import device_label, format_ns, format_share, pct

LONGEST_GAPS: Final = 10
WINDOW_GAPS: Final = 6
MFU_STEP_ROWS: Final = 100
COMM_KERNEL_ROWS: Final = 20


@dataclass(frozen=True)
class Breakdown:
    """The step breakdown: the chart (when drawn) and one row per device; ``charted_devices`` is
    how many devices the chart shows where that is fewer than all."""

    table: Table
    chart: bool
    step_pattern: str
    activity_windows: bool
    charted_devices: int | None
    devices: int
    warmup: bool
    """Whether any device has warm-up steps (left out of the findings and MFU)."""
    regimes: tuple[str, ...]
    """One line per device (the first few): its regime and the numbers behind it."""
    caveats: tuple[str, ...]
    """The GPU work the trace lacks (:func:`~traceq.report.notes.caveat_note`), above the numbers."""


@dataclass(frozen=True)
class Idle:
    """Idle time by cause per device, and the trace's longest gaps (``longest_shown`` of
    ``gaps_total``)."""

    table: Table
    chart: bool
    longest: Table | None
    longest_shown: int
    gaps_total: str
    unknown_notes: tuple[str, ...] = ()
    """Per device with ``unknown`` idle, why (:func:`traceq.report.notes.unknown_idle_note`)."""
    caveats: tuple[str, ...] = ()
    """The GPU work the trace lacks (:func:`~traceq.report.notes.caveat_note`): idle over-counts it."""


@dataclass(frozen=True)
class Timeline:
    """The timeline's text: ``missing`` says why there is none; otherwise the window's steps
    (``first_step`` to ``last_step``), its length, what downsampling left out and its longest gaps."""

    missing: str | None
    first_step: str = ""
    last_step: str | None = None
    length: str = ""
    bars_downsampled: tuple[str, str] | None = None
    gaps_downsampled: tuple[str, str] | None = None
    cpu_downsampled: tuple[str, str] | None = None
    window_gaps: Table | None = None
    window_gaps_total: str = ""


@dataclass(frozen=True)
class Kernels:
    """The top kernels (``count`` of them), and the kernel names counted as communication."""

    table: Table
    count: int
    comm: Table | None = None
    comm_summary: str = ""


@dataclass(frozen=True)
class MfuView:
    """MFU: its summary facts and the first :data:`MFU_STEP_ROWS` step windows (``steps_total``
    is set when there are more)."""

    facts: tuple[tuple[str, str], ...]
    table: Table
    steps_shown: int
    steps_total: str | None


def cell_label(rank: int | None, device: int) -> Cell:
    """A device's table cell: ``rank 2 · GPU 0``, or ``GPU 0``."""
    return Cell(device_label(rank, device, style="cell"))


def _per_step(d: DeviceBreakdown) -> str:
    return format_ns(d.dur_ns / max(d.steps, 1))


def breakdown(report: Report, chart: bool) -> Breakdown:
    rows = []
    for d in report.devices:
        hidden = pct(d.comm_ns - d.exposed_comm_ns, d.comm_ns) if d.comm_ns else "-"
        rows.append(
            row(
                cell_label(d.rank, d.device),
                num(str(d.steps) if d.window == "steps" else "-"),
                num(_per_step(d)),
                num(pct(d.compute_ns, d.dur_ns)),
                num(pct(d.exposed_comm_ns, d.dur_ns)),
                num(pct(d.idle_ns, d.dur_ns)),
                num(pct(d.comm_ns, d.dur_ns)),
                num(hidden),
                num(f"{d.kernels:,}"),
                Cell(d.regime.verdict if d.regime else "-", cls="nowrap"),
                num(str(d.warmup_steps) if d.warmup_steps else "-"),
            )
        )
    columns = (
        Column("device"),
        Column("steps", num=True),
        Column("step time", num=True),
        Column("compute", num=True, swatch=PALETTE["compute"]),
        Column("exposed comm", num=True, swatch=PALETTE["comm"]),
        Column("idle", num=True),
        Column("comm (all)", num=True),
        Column("comm hidden", num=True),
        Column("kernels", num=True),
        Column("regime"),
        Column("warm-up", num=True),
    )
    return Breakdown(
        table=table(columns, rows),
        chart=chart,
        step_pattern=report.step_pattern,
        activity_windows=any(d.window == "activity" for d in report.devices),
        warmup=any(d.warmup_steps for d in report.devices),
        regimes=tuple(_regime_line(d) for d in report.devices if d.regime is not None)[:MAX_STEP_CHART_DEVICES],
        caveats=tuple(caveat_note(c) for c in report.caveats),
        charted_devices=MAX_STEP_CHART_DEVICES if len(report.devices) > MAX_STEP_CHART_DEVICES else None,
        devices=len(report.devices),
    )


def _regime_line(d: DeviceBreakdown) -> str:
    """One device's regime and its evidence, for the note under the breakdown."""
    r = d.regime
    assert r is not None
    parts = (
        ("overhead", r.overhead_ns),
        ("memory-bound kernels", r.memory_ns),
        ("math kernels", r.compute_ns),
        ("exposed comm", r.communication_ns),
        ("input", r.input_ns),
    )
    shares = ", ".join(f"{name} {pct(ns, r.step_ns)}" for name, ns in parts)
    pace = ""
    if r.t_k_ns is not None and r.t_cpu_ns is not None:
        pace = f"; kernels run a median {format_ns(r.t_k_ns)}, launched every {format_ns(r.t_cpu_ns)}"
    graphs = f"; {r.graph_share:.0%} of kernels replay as CUDA graphs" if r.graph_share else ""
    return f"{device_label(d.rank, d.device, style='cell')}: {r.verdict} ({shares}{pace}{graphs})"


def cause_cell(cause: str) -> Cell:
    """A gap's cause with its colour."""
    return Cell(cause, cls="nowrap", swatch=PALETTE.get(cause, PALETTE["unknown"]))


def idle(report: Report, chart: bool) -> Idle:
    columns = [Column("device"), Column("idle", num=True)]
    columns += [Column(c, num=True, swatch=PALETTE[c]) for c in CAUSES]
    columns += [
        Column("idle per step", num=True),
        Column("gaps", num=True),
    ]
    rows = []
    for d in report.devices:
        rows.append(
            row(
                cell_label(d.rank, d.device),
                num(pct(d.idle_ns, d.dur_ns)),
                *(num(pct(d.idle_by_cause_ns.get(c, 0), d.dur_ns)) for c in CAUSES),
                num(format_ns(d.idle_ns / max(d.steps, 1))),
                num(f"{sum(d.gaps_by_cause.values()):,}"),
            )
        )
    longest = None
    if report.gaps:
        gap_rows = [
            row(
                num(format_ns(g.dur_ns)),
                cell_label(g.rank, g.device),
                cause_cell(g.cause),
                Cell(gap_label(gap_fields(g)), cls="name"),
                name_cell(g.next.name if g.next else "(end of trace)", 120),
            )
            for g in report.gaps[:LONGEST_GAPS]
        ]
        gap_columns = (Column("length", num=True), Column("device"), Column("cause"), Column("why"), Column("ended by"))
        longest = table(gap_columns, gap_rows)
    total = report.gap_count
    return Idle(
        table=table(columns, rows),
        chart=chart,
        longest=longest,
        longest_shown=min(LONGEST_GAPS, len(report.gaps)),
        gaps_total=f"{total:,}",
        unknown_notes=tuple(
            f"{device_label(d.rank, d.device)}: {note}"
            for d in report.devices
            if (note := unknown_idle_note(d)) is not None
        ),
        caveats=tuple(caveat_note(c) for c in report.caveats),
    )


def timeline(report: Report, chart: bool) -> Timeline:
    tl = report.timeline
    if tl is None or not chart:
        return Timeline(
            missing="no GPU activity in this trace" if not report.devices else "this report was built without one"
        )
    window_gaps = None
    if tl.gaps:
        longest = sorted(tl.gaps, key=lambda g: (g.start_ns - g.end_ns, g.start_ns))[:WINDOW_GAPS]
        gap_rows = [
            row(
                num("+" + format_ns(g.start_ns - tl.start_ns)),
                num(format_ns(g.end_ns - g.start_ns)),
                cell_label(g.rank, g.device),
                cause_cell(g.cause),
                Cell(g.label, cls="name"),
            )
            for g in sorted(longest, key=lambda g: (g.start_ns, g.device))
        ]
        columns = (Column("at", num=True), Column("length", num=True), Column("device"), Column("cause"), Column("why"))
        window_gaps = table(columns, gap_rows)
    return Timeline(
        missing=None,
        first_step=tl.steps[0],
        last_step=tl.steps[-1] if len(tl.steps) > 1 else None,
        length=format_ns(tl.end_ns - tl.start_ns),
        bars_downsampled=(f"{len(tl.bars):,}", f"{tl.bars_total:,}") if tl.bars_total > len(tl.bars) else None,
        gaps_downsampled=(f"{len(tl.gaps):,}", f"{tl.gaps_total:,}") if tl.gaps_total > len(tl.gaps) else None,
        cpu_downsampled=(f"{len(tl.cpu):,}", f"{tl.cpu_total:,}") if tl.cpu_total > len(tl.cpu) else None,
        window_gaps=window_gaps,
        window_gaps_total=f"{len(tl.gaps):,}",
    )


def kernels(report: Report) -> Kernels:
    rows = [
        row(
            num(str(i)),
            name_cell(k.name),
            num(f"{k.count:,}"),
            num(format_ns(k.total_ns)),
            num(format_share(k.share)),
            num(format_ns(k.mean_ns)),
            num(format_ns(k.max_ns)),
        )
        for i, k in enumerate(report.kernels, 1)
    ]
    columns = (
        Column("#", num=True),
        Column("kernel"),
        Column("count", num=True),
        Column("total", num=True),
        Column("share of kernel time", num=True),
        Column("mean", num=True),
        Column("max", num=True),
    )
    stats = comm_kernels(report.devices)
    comm = None
    if stats:
        comm_rows = [
            row(name_cell(k.name), Cell(k.matched_by), num(f"{k.count:,}"), num(format_ns(k.total_ns)))
            for k in stats[:COMM_KERNEL_ROWS]
        ]
        comm_columns = (Column("kernel"), Column("counted by"), Column("count", num=True), Column("total", num=True))
        comm = table(comm_columns, comm_rows)
    return Kernels(table(columns, rows), len(report.kernels), comm, comm_summary(stats) if stats else "")


def mfu(report: Report) -> MfuView | None:
    m = report.mfu
    if m is None:
        return None
    facts = (
        ("mean MFU", format_share(m.mean_mfu)),
        ("mean HFU", format_share(m.mean_hfu) if m.mean_hfu is not None else "-"),
        ("peak per GPU", f"{m.peak_flops_per_gpu / 1e12:,.1f} TFLOP/s"),
        ("peak from", m.peak_source),
        ("GPUs", f"{m.gpus:,}"),
        ("tokens per step", f"{m.tokens_per_step:,.0f}"),
        ("model FLOPs per token", f"{m.model_flops_per_token:.4g}"),
        (
            "hardware FLOPs per token",
            f"{m.hardware_flops_per_token:.4g}" if m.hardware_flops_per_token is not None else "-",
        ),
    )
    rows = [
        row(
            cell_label(s.rank, s.device),
            num(str(s.step) if s.step is not None else "-"),
            num(format_ns(s.dur_ns)),
            num(format_share(s.mfu)),
            num(format_share(s.hfu) if s.hfu is not None else "-"),
        )
        for s in m.steps[:MFU_STEP_ROWS]
    ]
    columns = (
        Column("device"),
        Column("step", num=True),
        Column("step time", num=True),
        Column("MFU", num=True),
        Column("HFU", num=True),
    )
    return MfuView(
        facts=facts,
        table=table(columns, rows),
        steps_shown=MFU_STEP_ROWS,
        steps_total=f"{len(m.steps):,}" if len(m.steps) > MFU_STEP_ROWS else None,
    )
