"""Plotly figures for the HTML report: step breakdown, idle by cause, rank comparison, the job's
collective skew heatmap and arrivals, timeline.

Each builder takes the :class:`~traceq.report.model.Report` and returns a plotly figure as a plain
dict (``{"data": [...], "layout": {...}}``), or ``None`` when there is nothing to draw; the page
(:mod:`traceq.report.html`) serialises it.  All charts share one colour-blind-safe palette
(Okabe–Ito): compute, communication and one colour per idle cause.

Every trace string (kernel, range and API names) reaches plotly through :func:`plot_text`:
plotly.js parses a subset of HTML in labels and hover texts (``<b>``, ``<a href>``, ...), so
``&``, ``<`` and ``>`` are escaped as entities that plotly turns back into the literal
characters.  Durations are shown in ms with the nearest unit in hover texts (``format_ns``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from traceq.analyses.model import CAUSES, DeviceBreakdown, JobAnalysis, StepBreakdown
from traceq.analyses.timeline import TimelineBar, TimelineExcerpt, TimelineGap
from traceq.report.model import Report
from traceq.units import format_ns

FONT_STACK: Final = (
    '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, '
    '"Noto Sans", "Liberation Sans", "DejaVu Sans", sans-serif'
)

PALETTE: Final[dict[str, str]] = {
    "compute": "#0072B2",
    "comm": "#009E73",
    "copy": "#56B4E9",
    "input": "#CC79A7",
    "sync": "#D55E00",
    "launch": "#E69F00",
    "other": "#F0E442",
    "unknown": "#999999",
    "edge": "#D9D9D9",
}
"""Okabe–Ito colours: compute and (exposed) communication, copies on the timeline, one per idle
cause, and light grey for idle time outside any gap (before a window's first activity or after
its last)."""

MAX_STEP_CHART_DEVICES: Final = 8
"""Devices drawn in the step-breakdown small multiples (the tables list every device)."""
MAX_SHADED_GAPS: Final = 300
"""Gaps shaded across their device's stream rows on the timeline (the longest; every gap keeps
its bar on the device's gap row)."""
_SUBPLOT_PX: Final = 230
_SUBPLOT_GAP_PX: Final = 90
_TEXT_FRACTION: Final = 0.02
"""Timeline bars at least this share of the window carry their name inside the bar."""


def plot_text(text: str) -> str:
    """``text`` as plotly shows it literally: no tag or entity of it is interpreted."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def device_label(rank: int | None, device: int) -> str:
    return f"rank {rank} · GPU {device}" if rank is not None else f"GPU {device}"


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _ms(ns: float) -> float:
    return round(ns / 1e6, 6)


@dataclass(frozen=True)
class Segment:
    """One stacked series: its key, legend label, colour and value for a device or step."""

    key: str
    label: str
    colour: str
    value: Callable[[StepBreakdown | DeviceBreakdown], int]


def _outside_gaps(s: StepBreakdown | DeviceBreakdown) -> int:
    return s.idle_ns - sum(s.idle_by_cause_ns.values())


def cause_value(cause: str) -> Callable[[StepBreakdown | DeviceBreakdown], int]:
    return lambda s: int(s.idle_by_cause_ns.get(cause, 0))


SEGMENTS: Final[tuple[Segment, ...]] = (
    Segment("compute", "compute", PALETTE["compute"], lambda s: s.compute_ns),
    Segment("exposed_comm", "exposed comm", PALETTE["comm"], lambda s: s.exposed_comm_ns),
    *(Segment(f"idle_{c}", f"idle: {c}", PALETTE[c], cause_value(c)) for c in CAUSES),
    Segment("idle_edge", "idle: outside gaps", PALETTE["edge"], _outside_gaps),
)
"""The parts of step time, in stacking order; they add up to ``dur_ns``."""

IDLE_SEGMENTS: Final = SEGMENTS[2:]


def _layout(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "font": {"family": FONT_STACK, "size": 12, "color": "#222"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 60, "r": 20, "t": 70, "b": 100},
        "legend": {
            "orientation": "h",
            "traceorder": "normal",
            "x": 0,
            "y": 0,
            "xanchor": "left",
            "yanchor": "bottom",
            "yref": "container",
        },
        "hoverlabel": {"font": {"family": FONT_STACK, "size": 12}, "align": "left"},
        "title": {"x": 0, "xanchor": "left", "font": {"size": 15}},
    }
    base.update(kw)
    return base


def _axis(title: str, **kw: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "gridcolor": "#e6e6e6",
        "linecolor": "#999",
        "zerolinecolor": "#bbb",
        "ticks": "outside",
        **kw,
    }


def _finish(fig: go.Figure) -> dict[str, Any]:
    out: dict[str, Any] = fig.to_plotly_json()
    out["layout"].pop("template", None)
    return out


def _used(segments: Sequence[Segment], items: Sequence[StepBreakdown | DeviceBreakdown]) -> list[Segment]:
    """The segments with any time in ``items`` (an all-zero series only clutters the legend)."""
    return [seg for seg in segments if any(seg.value(i) for i in items)]


def _step_labels(steps: Sequence[StepBreakdown]) -> list[str]:
    labels = [str(s.step) if s.step is not None else shorten(s.name, 24) for s in steps]
    if len(set(labels)) < len(labels):
        labels = [f"{i + 1}: {label}" for i, label in enumerate(labels)]
    return [plot_text(label) for label in labels]


def steps_of(report: Report, d: DeviceBreakdown) -> list[StepBreakdown]:
    """The step windows of device ``d``, in time order."""
    return [s for s in report.steps if (s.rank, s.device, s.pid) == (d.rank, d.device, d.pid)]


def step_breakdown_figure(report: Report) -> dict[str, Any] | None:
    """Per device (small multiples) and step: stacked compute, exposed comm, idle by cause (ms)."""
    devices = report.devices[:MAX_STEP_CHART_DEVICES]
    if not devices or not report.steps:
        return None
    cols = 1 if len(devices) == 1 else 2
    rows = math.ceil(len(devices) / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[device_label(d.rank, d.device) for d in devices],
        vertical_spacing=_SUBPLOT_GAP_PX / (_SUBPLOT_PX * rows + _SUBPLOT_GAP_PX * (rows - 1)),
        horizontal_spacing=0.08,
    )
    used = _used(SEGMENTS, report.steps)
    for n, d in enumerate(devices):
        steps = steps_of(report, d)
        labels = _step_labels(steps)
        row, col = n // cols + 1, n % cols + 1
        for seg in used:
            values = [seg.value(s) for s in steps]
            hover = [
                f"{device_label(d.rank, d.device)} · {plot_text(shorten(s.name, 60))}<br>"
                f"{seg.label}: {format_ns(v)} ({pct(v, s.dur_ns)} of {format_ns(s.dur_ns)})"
                for s, v in zip(steps, values, strict=True)
            ]
            fig.add_trace(
                go.Bar(
                    x=labels,
                    y=[_ms(v) for v in values],
                    name=seg.label,
                    legendgroup=seg.key,
                    showlegend=n == 0,
                    marker={"color": seg.colour, "line": {"width": 0}},
                    hovertext=hover,
                    hoverinfo="text",
                ),
                row=row,
                col=col,
            )
        fig.update_xaxes(_axis("step", type="category"), row=row, col=col)
        fig.update_yaxes(_axis("ms", rangemode="tozero"), row=row, col=col)
    fig.update_layout(
        _layout(
            barmode="stack",
            bargap=0.25,
            height=160 + _SUBPLOT_PX * rows + _SUBPLOT_GAP_PX * (rows - 1),
            title={"text": "Step time by part, per device and step (ms)"},
        )
    )
    return _finish(fig)


def idle_by_cause_figure(report: Report) -> dict[str, Any] | None:
    """Per device: idle time by cause as a share of step time (stacked horizontal bars, %)."""
    devices = report.devices
    if not devices or not any(d.idle_ns for d in devices):
        return None
    labels = [device_label(d.rank, d.device) for d in devices]
    return _stacked_bars(
        labels,
        devices,
        IDLE_SEGMENTS,
        _share_of_step,
        title="Idle time by cause (% of step time)",
        axis="% of step time",
    )


def _share_of_step(seg: Segment, d: DeviceBreakdown) -> tuple[float, str]:
    """A segment's bar in % of ``d``'s step time, and its hover text."""
    v = seg.value(d)
    return round(100 * v / d.dur_ns, 4) if d.dur_ns else 0, f"{format_ns(v)} ({pct(v, d.dur_ns)} of step time)"


def _per_step(seg: Segment, d: DeviceBreakdown) -> tuple[float, str]:
    """A segment's bar in ms per step of ``d``, and its hover text."""
    v = seg.value(d) / max(d.steps, 1)
    return _ms(v), f"{format_ns(v)} per step ({pct(v * max(d.steps, 1), d.dur_ns)})"


def _stacked_bars(
    labels: Sequence[str],
    devices: Sequence[DeviceBreakdown],
    segments: Sequence[Segment],
    value: Callable[[Segment, DeviceBreakdown], tuple[float, str]],
    *,
    title: str,
    axis: str,
    **yaxis: Any,
) -> dict[str, Any]:
    """One horizontal bar per device (named by ``labels``), stacked by the ``segments`` with any
    time: ``value(seg, d)`` is a segment's length on the x axis (titled ``axis``) and its hover
    text after the segment's name.  ``yaxis`` adds to the device axis."""
    fig = go.Figure()
    for seg in _used(segments, devices):
        points = [value(seg, d) for d in devices]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[x for x, _ in points],
                orientation="h",
                name=seg.label,
                marker={"color": seg.colour, "line": {"width": 0}},
                hovertext=[f"{label}<br>{seg.label}: {text}" for label, (_, text) in zip(labels, points, strict=True)],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        _layout(
            barmode="stack",
            height=190 + 28 * len(devices),
            margin={"l": 130, "r": 20, "t": 60, "b": 100},
            title={"text": title},
            xaxis=_axis(axis, rangemode="tozero"),
            yaxis=_axis("", autorange="reversed", type="category", **yaxis),
        )
    )
    return _finish(fig)


WAIT_COLOURS: Final = [[0.0, "#ffffff"], [0.15, "#fbe3d1"], [1.0, PALETTE["sync"]]]
"""Heatmap colour scale of waiting in collectives: white (no wait) to vermillion."""
SLOW_COLOUR: Final = PALETTE["sync"]
"""The straggler (or the rank that costs the others most) in the job's charts."""


def job_labels(job: JobAnalysis) -> list[str]:
    """One label per rank of ``job`` (``rank 2 · GPU 2``; ``GPU 1 · pid 145`` where GPUs repeat)."""
    labels = [device_label(r.rank, r.device) for r in job.ranks]
    if len(set(labels)) < len(labels):
        labels = [
            f"{label} · pid {r.pid}" if r.rank is None else label for label, r in zip(labels, job.ranks, strict=True)
        ]
    return labels


def highlighted_rank(job: JobAnalysis | None) -> int | None:
    """The rank the job's charts highlight: the straggler, else the one that costs the others most."""
    if job is None:
        return None
    return job.straggler if job.straggler is not None else job.slowest


def _tick_text(labels: Sequence[str], slow: int | None) -> list[str]:
    """Axis labels with the highlighted rank in bold and marked (plotly renders ``<b>``)."""
    return [f"<b>{plot_text(label)} ◀</b>" if i == slow else plot_text(label) for i, label in enumerate(labels)]


def rank_comparison_figure(report: Report) -> dict[str, Any] | None:
    """Several ranks side by side: mean time per step, stacked by part (ms); the job's slowest rank
    (:func:`highlighted_rank`) in bold."""
    devices = report.devices
    if len({d.rank for d in devices if d.rank is not None}) < 2 and (report.job is None or len(devices) < 2):
        return None
    labels = [device_label(d.rank, d.device) for d in devices]
    if report.job is not None and len(report.job.ranks) == len(devices):
        labels = job_labels(report.job)
    return _stacked_bars(
        labels,
        devices,
        SEGMENTS,
        _per_step,
        title="Ranks side by side: mean time per step by part (ms)",
        axis="ms per step",
        tickvals=labels,
        ticktext=_tick_text(labels, highlighted_rank(report.job)),
    )


def skew_heatmap_figure(report: Report) -> dict[str, Any] | None:
    """Collective × rank: how long each rank waited in each collective for the last one (ms)."""
    job = report.job
    if job is None or not job.collectives:
        return None
    labels = job_labels(job)
    columns = [f"#{c.index} {c.kind}" for c in job.collectives]
    z: list[list[float | None]] = []
    hover: list[list[str]] = []
    for i, label in enumerate(labels):
        row: list[float | None] = []
        texts: list[str] = []
        for c in job.collectives:
            wait = c.waits_ns[i]
            row.append(None if wait is None else _ms(wait))
            last = "everyone together" if c.last is None else labels[c.last]
            texts.append(
                f"{plot_text(label)}<br>{plot_text(c.kind)} #{c.seq} on {plot_text(c.channel)}<br>"
                + ("not in this collective" if wait is None else f"waited {format_ns(wait)}")
                + f"<br>arrival skew {format_ns(c.arrival_skew_ns)}, last: {plot_text(last)}"
            )
        z.append(row)
        hover.append(texts)
    fig = go.Figure(
        go.Heatmap(
            x=[plot_text(c) for c in columns],
            y=[plot_text(label) for label in labels],
            z=z,
            colorscale=WAIT_COLOURS,
            zmin=0,
            colorbar={"title": {"text": "wait (ms)"}},
            hovertext=hover,
            hoverinfo="text",
            xgap=1,
            ygap=1,
        )
    )
    slow = highlighted_rank(job)
    fig.update_layout(
        _layout(
            height=260 + 28 * len(labels),
            margin={"l": 160, "r": 20, "t": 60, "b": 110},
            title={"text": "Waiting in each collective for the last rank to arrive (ms)"},
            xaxis=_axis("collective (time order)", type="category", tickangle=-45),
            yaxis=_axis(
                "",
                autorange="reversed",
                type="category",
                tickvals=[plot_text(label) for label in labels],
                ticktext=_tick_text(labels, slow),
            ),
        )
    )
    return _finish(fig)


def arrivals_figure(report: Report) -> dict[str, Any] | None:
    """Per rank: how often it arrived last against chance, and the wait it costs the others."""
    job = report.job
    if job is None or not job.collectives_total:
        return None
    labels = [plot_text(label) for label in job_labels(job)]
    slow = highlighted_rank(job)
    colours = [SLOW_COLOUR if i == slow else PALETTE["unknown"] for i in range(len(labels))]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.06,
        subplot_titles=["arrived last (bars) vs chance (◆)", "wait it costs the others (% of their step time)"],
    )
    fig.add_trace(
        go.Bar(
            y=labels,
            x=[r.last_arrivals for r in job.ranks],
            orientation="h",
            name="arrived last",
            marker={"color": colours, "line": {"width": 0}},
            hovertext=[
                f"{label}<br>last at {r.last_arrivals} of {r.collectives} collectives<br>"
                f"{r.expected_last_arrivals:.1f} expected by chance (bound {r.last_arrival_bound:.2g})"
                for label, r in zip(labels, job.ranks, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[round(r.expected_last_arrivals, 4) for r in job.ranks],
            mode="markers",
            name="expected by chance",
            marker={"symbol": "diamond", "size": 10, "color": "#222"},
            hoverinfo="skip",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            y=labels,
            x=[round(100 * r.wait_caused_share, 4) for r in job.ranks],
            orientation="h",
            name="wait caused",
            marker={"color": colours, "line": {"width": 0}},
            hovertext=[
                f"{label}<br>the others wait {format_ns(r.exposed_wait_caused_ns)} for it with nothing to compute "
                f"(median {100 * r.wait_caused_share:.1f}% of their step time)"
                for label, r in zip(labels, job.ranks, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(_axis("collectives", rangemode="tozero"), row=1, col=1)
    fig.update_xaxes(_axis("% of step time", rangemode="tozero"), row=1, col=2)
    fig.update_yaxes(
        _axis("", autorange="reversed", type="category", tickvals=labels, ticktext=_tick_text(job_labels(job), slow)),
        row=1,
        col=1,
    )
    fig.update_layout(
        _layout(
            height=190 + 28 * len(labels),
            margin={"l": 160, "r": 20, "t": 70, "b": 60},
            title={"text": "Who arrives last at the collectives, and what it costs the others"},
        )
    )
    return _finish(fig)


_BAR_CLASSES: Final = (
    (("kernel",), "kernel", PALETTE["compute"]),
    (("comm",), "comm kernel", PALETTE["comm"]),
    (("memcpy", "memset"), "memcpy / memset", PALETTE["copy"]),
)


def _stream_row(bar: TimelineBar) -> str:
    stream = f"stream {bar.stream}" if bar.stream is not None else "stream ?"
    return f"{device_label(bar.rank, bar.device)} · {stream}"


def _gap_row(rank: int | None, device: int) -> str:
    return f"{device_label(rank, device)} · idle gaps"


def timeline_rows(excerpt: TimelineExcerpt) -> list[str]:
    """The timeline's rows, top to bottom: per device its gap row, then one row per stream."""
    order: dict[tuple[int | None, int], list[str]] = {}
    for bar in excerpt.bars:
        streams = order.setdefault((bar.rank, bar.device), [])
        row = _stream_row(bar)
        if row not in streams:
            streams.append(row)
    for gap in excerpt.gaps:
        order.setdefault((gap.rank, gap.device), [])
    rows: list[str] = []
    for (rank, device), streams in order.items():
        rows.append(_gap_row(rank, device))
        rows.extend(streams)
    return rows


def _step_marks(report: Report, excerpt: TimelineExcerpt) -> list[StepBreakdown]:
    """The step windows of the excerpt, as the first device that has them recorded them."""
    names = set(excerpt.steps)
    for d in report.devices:
        marks = [
            s
            for s in steps_of(report, d)
            if s.name in names and excerpt.start_ns <= s.start_ns and s.end_ns <= excerpt.end_ns
        ]
        if marks:
            return marks
    return []


def timeline_figure(report: Report) -> dict[str, Any] | None:
    """The excerpt: one row per stream, a gap row per device, gaps shaded over the device's rows."""
    tl = report.timeline
    if tl is None or (not tl.bars and not tl.gaps):
        return None
    origin, span = tl.start_ns, max(tl.end_ns - tl.start_ns, 1)
    rows = timeline_rows(tl)
    fig = go.Figure()
    for kinds, label, colour in _BAR_CLASSES:
        bars = [b for b in tl.bars if b.kind in kinds]
        if bars:
            fig.add_trace(_bar_trace(bars, label, colour, origin, span))
    for cause in CAUSES:
        gaps = [g for g in tl.gaps if g.cause == cause]
        if gaps:
            fig.add_trace(_gap_trace(gaps, cause, origin))
    shapes = _gap_shading(tl.gaps, rows, origin)
    annotations = []
    for s in _step_marks(report, tl):
        x = _ms(s.start_ns - origin)
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": x,
                "x1": x,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#555", "width": 1, "dash": "dot"},
            }
        )
        annotations.append(
            {
                "x": x,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "xanchor": "left",
                "showarrow": False,
                "text": plot_text(shorten(s.name, 40)),
                "font": {"size": 11, "color": "#555"},
            }
        )
    fig.update_layout(
        _layout(
            barmode="overlay",
            height=180 + 30 * len(rows),
            margin={"l": 190, "r": 20, "t": 80, "b": 100},
            title={"text": f"Timeline: {len(tl.steps)} step(s), {format_ns(span)}"},
            xaxis=_axis("time since the window start (ms)", range=[0, _ms(span)]),
            yaxis=_axis("", type="category", categoryorder="array", categoryarray=rows, autorange="reversed"),
            shapes=shapes,
            annotations=annotations,
            uniformtext={"minsize": 9, "mode": "hide"},
            hovermode="closest",
        )
    )
    return _finish(fig)


def _bar_trace(bars: Sequence[TimelineBar], label: str, colour: str, origin: int, span: int) -> go.Bar:
    return go.Bar(
        y=[_stream_row(b) for b in bars],
        base=[_ms(b.start_ns - origin) for b in bars],
        x=[_ms(b.end_ns - b.start_ns) for b in bars],
        orientation="h",
        name=label,
        width=0.8,
        marker={"color": colour, "line": {"width": 0}},
        text=[plot_text(shorten(b.name, 40)) if b.end_ns - b.start_ns >= _TEXT_FRACTION * span else "" for b in bars],
        textposition="inside",
        insidetextanchor="start",
        textfont={"color": "#ffffff"},
        hovertext=[
            f"{plot_text(shorten(b.name, 160))}<br>{label} · {format_ns(b.end_ns - b.start_ns)} · "
            f"+{format_ns(b.start_ns - origin)}"
            for b in bars
        ],
        hoverinfo="text",
    )


def _gap_trace(gaps: Sequence[TimelineGap], cause: str, origin: int) -> go.Bar:
    return go.Bar(
        y=[_gap_row(g.rank, g.device) for g in gaps],
        base=[_ms(g.start_ns - origin) for g in gaps],
        x=[_ms(g.end_ns - g.start_ns) for g in gaps],
        orientation="h",
        name=f"idle: {cause}",
        width=0.8,
        marker={"color": PALETTE[cause], "line": {"width": 0}},
        text=[plot_text(g.label) for g in gaps],
        textposition="inside",
        insidetextanchor="start",
        textfont={"color": "#000000" if cause in ("other", "launch", "unknown") else "#ffffff"},
        hovertext=[
            f"idle gap · {format_ns(g.end_ns - g.start_ns)} · +{format_ns(g.start_ns - origin)}<br>{plot_text(g.label)}"
            for g in gaps
        ],
        hoverinfo="text",
    )


def _gap_shading(gaps: Sequence[TimelineGap], rows: Sequence[str], origin: int) -> list[dict[str, Any]]:
    """Translucent rectangles over each of the longest gaps' device rows (gap row and streams)."""
    span_of: dict[tuple[int | None, int], tuple[int, int]] = {}
    for key in {(g.rank, g.device) for g in gaps}:
        first = last = rows.index(_gap_row(*key))
        prefix = device_label(*key) + " · "
        while last + 1 < len(rows) and rows[last + 1].startswith(prefix):
            last += 1
        span_of[key] = (first, last)
    longest = sorted(gaps, key=lambda g: (-(g.end_ns - g.start_ns), g.start_ns))[:MAX_SHADED_GAPS]
    shapes = []
    for g in sorted(longest, key=lambda g: (g.start_ns, g.rank if g.rank is not None else -1, g.device)):
        first, last = span_of[(g.rank, g.device)]
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "y",
                "x0": _ms(g.start_ns - origin),
                "x1": _ms(g.end_ns - origin),
                "y0": first - 0.5,
                "y1": last + 0.5,
                "fillcolor": PALETTE[g.cause],
                "opacity": 0.18,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return shapes
