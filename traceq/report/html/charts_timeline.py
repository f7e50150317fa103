"""The HTML report's timeline: a few steps of a few devices; per device its launching CPU threads
(calls, syncs, loader ranges, operators, coloured like the idle causes they explain), a row of idle
gaps, and one row per CUDA stream; the longest gaps shaded across their device's rows, a line from
each gap to the CPU call behind it, dotted lines at step starts.  Hover texts give times both
into the window (``+1.20 ms``) and on the trace's own clock (``t = 1234567890 ns``), to find the
spot in Perfetto or the nsys GUI.

It draws the report's :class:`~traceq.report.model.TimelineExcerpt` as it is (the excerpt is
chosen in :mod:`traceq.analyses.timeline`); trace strings go through
:func:`~traceq.report.html.chart_style.plot_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import plotly.graph_objects as go

from traceq.analyses.model import CAUSES, StepBreakdown
from traceq.analyses.timeline import TimelineBar, TimelineExcerpt, TimelineGap
from traceq.analyses.timeline_cpu import TimelineSpan
from traceq.report.html.chart_style import PALETTE, axis, figure_dict, layout, ms, plot_text
from traceq.report.html.charts_steps import steps_of
from traceq.report.model import Report
from traceq.units import device_label, format_ns, shorten

MAX_SHADED_GAPS: Final = 300
"""Gaps shaded across their device's stream rows on the timeline (the longest; every gap keeps
its bar on the device's gap row)."""
_TEXT_FRACTION: Final = 0.02
"""Timeline bars at least this share of the window carry their name inside the bar."""

_BAR_CLASSES: Final = (
    (("kernel",), "kernel", PALETTE["compute"]),
    (("comm",), "comm kernel", PALETTE["comm"]),
    (("memcpy", "memset"), "memcpy / memset", PALETTE["copy"]),
)


def _stream_row(bar: TimelineBar) -> str:
    stream = f"stream {bar.stream}" if bar.stream is not None else "stream ?"
    return f"{device_label(bar.rank, bar.device, style='cell')} · {stream}"


def _gap_row(rank: int | None, device: int) -> str:
    return f"{device_label(rank, device, style='cell')} · idle gaps"


def _thread_row(rank: int | None, device: int, tid: int) -> str:
    return f"{device_label(rank, device, style='cell')} · CPU thread {tid}"


_SPAN_LABELS: Final = {
    "sync": "CPU: sync call",
    "launch": "CPU: launch / API call",
    "input": "CPU: data loader",
    "compile": "CPU: compile",
    "cpu": "CPU: operator",
}
"""The CPU span kinds (:mod:`traceq.analyses.timeline_cpu`), each drawn in its idle cause's colour."""


def timeline_rows(excerpt: TimelineExcerpt) -> list[str]:
    """The timeline's rows, top to bottom: per device its launching CPU threads, its gap row, then
    one row per stream."""
    order: dict[tuple[int | None, int], tuple[list[str], list[str]]] = {}
    for span in excerpt.cpu:
        threads = order.setdefault((span.rank, span.device), ([], []))[0]
        row = _thread_row(span.rank, span.device, span.tid)
        if row not in threads:
            threads.append(row)
    for bar in excerpt.bars:
        streams = order.setdefault((bar.rank, bar.device), ([], []))[1]
        row = _stream_row(bar)
        if row not in streams:
            streams.append(row)
    for gap in excerpt.gaps:
        order.setdefault((gap.rank, gap.device), ([], []))
    rows: list[str] = []
    for (rank, device), (threads, streams) in order.items():
        rows.extend(threads)
        rows.append(_gap_row(rank, device))
        rows.extend(streams)
    return rows


def trace_time(ns: int) -> str:
    """A time on the trace's own clock, for hover texts."""
    return f"t = {ns} ns"


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
    # Traces as plain dicts, not go.Bar / go.Scatter: plotly's validators walk every value, and
    # thousands of bars and CPU calls made them most of the page's render time.
    traces: list[dict[str, Any]] = []
    for kinds, label, colour in _BAR_CLASSES:
        bars = [b for b in tl.bars if b.kind in kinds]
        if bars:
            traces.append(_bar_trace(bars, label, colour, origin, span))
    for kind, label in _SPAN_LABELS.items():
        spans = [c for c in tl.cpu if c.kind == kind]
        if spans:
            traces.append(_span_trace(spans, label, kind, origin))
    for cause in CAUSES:
        gaps = [g for g in tl.gaps if g.cause == cause]
        if gaps:
            traces.append(_gap_trace(gaps, cause, origin))
    flow = _flow_trace(tl, set(rows), origin)
    if flow is not None:
        traces.append(flow)
    shapes = _gap_shading(tl.gaps, rows, origin)
    annotations = []
    for s in _step_marks(report, tl):
        x = ms(s.start_ns - origin)
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
        layout(
            barmode="overlay",
            height=180 + 30 * len(rows),
            margin={"l": 190, "r": 20, "t": 80, "b": 100},
            title={"text": f"Timeline: {len(tl.steps)} step(s), {format_ns(span)}"},
            xaxis=axis("time since the window start (ms)", range=[0, ms(span)]),
            yaxis=axis("", type="category", categoryorder="array", categoryarray=rows, autorange="reversed"),
            shapes=shapes,
            annotations=annotations,
            uniformtext={"minsize": 9, "mode": "hide"},
            hovermode="closest",
        )
    )
    out = figure_dict(fig)
    out["data"] = traces
    return out


def _bar_trace(bars: Sequence[TimelineBar], label: str, colour: str, origin: int, span: int) -> dict[str, Any]:
    return dict(
        type="bar",
        y=[_stream_row(b) for b in bars],
        base=[ms(b.start_ns - origin) for b in bars],
        x=[ms(b.end_ns - b.start_ns) for b in bars],
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
            f"+{format_ns(b.start_ns - origin)} ({trace_time(b.start_ns)})"
            for b in bars
        ],
        hoverinfo="text",
    )


def _gap_trace(gaps: Sequence[TimelineGap], cause: str, origin: int) -> dict[str, Any]:
    return dict(
        type="bar",
        y=[_gap_row(g.rank, g.device) for g in gaps],
        base=[ms(g.start_ns - origin) for g in gaps],
        x=[ms(g.end_ns - g.start_ns) for g in gaps],
        orientation="h",
        name=f"idle: {cause}",
        width=0.8,
        marker={"color": PALETTE[cause], "line": {"width": 0}},
        text=[plot_text(g.label) for g in gaps],
        textposition="inside",
        insidetextanchor="start",
        textfont={"color": "#000000" if cause in ("other", "launch", "unknown") else "#ffffff"},
        hovertext=[
            f"idle gap · {format_ns(g.end_ns - g.start_ns)} · +{format_ns(g.start_ns - origin)} "
            f"({trace_time(g.start_ns)})<br>{plot_text(g.label)}"
            for g in gaps
        ],
        hoverinfo="text",
    )


def _span_trace(spans: Sequence[TimelineSpan], label: str, kind: str, origin: int) -> dict[str, Any]:
    # Operators are wide bars, the calls inside them narrower on top: nesting stays visible.
    return dict(
        type="bar",
        y=[_thread_row(c.rank, c.device, c.tid) for c in spans],
        base=[ms(c.start_ns - origin) for c in spans],
        x=[ms(c.end_ns - c.start_ns) for c in spans],
        orientation="h",
        name=label,
        width=0.8 if kind == "cpu" else 0.5,
        marker={"color": PALETTE[kind], "line": {"width": 0}},
        hovertext=[
            f"{plot_text(shorten(c.name, 160))}<br>{label} · {format_ns(c.end_ns - c.start_ns)} · "
            f"+{format_ns(c.start_ns - origin)} ({trace_time(c.start_ns)})"
            for c in spans
        ],
        hoverinfo="text",
    )


def _flow_trace(tl: TimelineExcerpt, rows: set[str], origin: int) -> dict[str, Any] | None:
    """One line per gap from the CPU call behind it (its end, on its thread's row) to the gap's start
    (on the device's gap row), where that thread is drawn."""
    xs: list[float | None] = []
    ys: list[str | None] = []
    for g in tl.gaps:
        if g.call_tid is None or g.call_end_ns is None:
            continue
        thread = _thread_row(g.rank, g.device, g.call_tid)
        if thread not in rows:
            continue
        at = min(max(g.call_end_ns, tl.start_ns), tl.end_ns)
        xs += [ms(at - origin), ms(g.start_ns - origin), None]
        ys += [thread, _gap_row(g.rank, g.device), None]
    if not xs:
        return None
    return dict(
        type="scatter",
        x=xs,
        y=ys,
        mode="lines",
        name="gap ← its CPU call",
        line={"color": "#555555", "width": 1, "dash": "dot"},
        hoverinfo="skip",
    )


def _gap_shading(gaps: Sequence[TimelineGap], rows: Sequence[str], origin: int) -> list[dict[str, Any]]:
    """Translucent rectangles over each of the longest gaps' device rows (gap row and streams)."""
    span_of: dict[tuple[int | None, int], tuple[int, int]] = {}
    for rank, device in {(g.rank, g.device) for g in gaps}:
        first = last = rows.index(_gap_row(rank, device))
        prefix = device_label(rank, device, style="cell") + " · "
        while last + 1 < len(rows) and rows[last + 1].startswith(prefix):
            last += 1
        span_of[(rank, device)] = (first, last)
    longest = sorted(gaps, key=lambda g: (-(g.end_ns - g.start_ns), g.start_ns))[:MAX_SHADED_GAPS]
    shapes = []
    for g in sorted(longest, key=lambda g: (g.start_ns, g.rank if g.rank is not None else -1, g.device)):
        first, last = span_of[(g.rank, g.device)]
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "y",
                "x0": ms(g.start_ns - origin),
                "x1": ms(g.end_ns - origin),
                "y0": first - 0.5,
                "y1": last + 0.5,
                "fillcolor": PALETTE[g.cause],
                "opacity": 0.18,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return shapes
