"""The HTML report's charts of step time: the step breakdown per device and step, idle time by
cause per device, and the stacked horizontal bars that the rank comparison shares.

Each ``*_figure`` builder takes the :class:`~traceq.report.model.Report` and returns a plotly
figure as a plain dict (``{"data": [...], "layout": {...}}``), or ``None`` when there is nothing
to draw; the page (:mod:`traceq.report.html.page`) serialises it.  Trace strings go through
:func:`~traceq.report.html.chart_style.plot_text`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from traceq.analyses.model import CAUSES, DeviceBreakdown, StepBreakdown
from traceq.report.html.chart_style import PALETTE, axis, figure_dict, layout, ms, plot_text
from traceq.report.model import Report
from traceq.units import device_label, format_ns, pct, shorten

MAX_STEP_CHART_DEVICES: Final = 8
"""Devices drawn in the step-breakdown small multiples (the tables list every device)."""
_SUBPLOT_PX: Final = 230
_SUBPLOT_GAP_PX: Final = 90


@dataclass(frozen=True)
class Segment:
    """One stacked series: its key, legend label, colour and value for a device or step."""

    key: str
    label: str
    colour: str
    value: Callable[[StepBreakdown | DeviceBreakdown], int]


def cause_value(cause: str) -> Callable[[StepBreakdown | DeviceBreakdown], int]:
    """The idle time (ns) of a step or device of ``cause``."""
    return lambda s: int(s.idle_by_cause_ns.get(cause, 0))


SEGMENTS: Final[tuple[Segment, ...]] = (
    Segment("compute", "compute", PALETTE["compute"], lambda s: s.compute_ns),
    Segment("exposed_comm", "exposed comm", PALETTE["comm"], lambda s: s.exposed_comm_ns),
    *(Segment(f"idle_{c}", f"idle: {c}", PALETTE[c], cause_value(c)) for c in CAUSES),
)
"""The parts of step time, in stacking order; they add up to ``dur_ns``."""

IDLE_SEGMENTS: Final = SEGMENTS[2:]


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
        subplot_titles=[device_label(d.rank, d.device, style="cell") for d in devices],
        vertical_spacing=_SUBPLOT_GAP_PX / (_SUBPLOT_PX * rows + _SUBPLOT_GAP_PX * (rows - 1)),
        horizontal_spacing=0.08,
    )
    used = _used(SEGMENTS, report.steps)
    # The bars go in as plain trace dicts, not go.Bar: plotly's validators walk every value (a
    # trace of thousands of steps took most of the page's render time), and these are plain
    # lists of strings and floats that need no checking.
    traces: list[dict[str, Any]] = []
    # Each distinct duration is written once: thousands of steps repeat values (zero above all, in
    # every idle segment a step does not have).
    duration = functools.cache(format_ns)
    for n, d in enumerate(devices):
        steps = steps_of(report, d)
        labels = _step_labels(steps)
        # Each step's hover head and length are written once, not once per segment.
        device = device_label(d.rank, d.device, style="cell")
        heads = [f"{device} · {plot_text(shorten(s.name, 60))}<br>" for s in steps]
        lengths = [duration(s.dur_ns) for s in steps]
        row, col = n // cols + 1, n % cols + 1
        subplot = fig.get_subplot(row, col)
        refs = {
            "xaxis": subplot.xaxis.plotly_name.replace("axis", ""),
            "yaxis": subplot.yaxis.plotly_name.replace("axis", ""),
        }
        for seg in used:
            values = [seg.value(s) for s in steps]
            hover = [
                f"{head}{seg.label}: {duration(v)} ({pct(v, s.dur_ns)} of {length})"
                for s, v, head, length in zip(steps, values, heads, lengths, strict=True)
            ]
            traces.append(
                {
                    "type": "bar",
                    "x": labels,
                    "y": [ms(v) for v in values],
                    "name": seg.label,
                    "legendgroup": seg.key,
                    "showlegend": n == 0,
                    "marker": {"color": seg.colour, "line": {"width": 0}},
                    "hovertext": hover,
                    "hoverinfo": "text",
                    **refs,
                }
            )
        fig.update_xaxes(axis("step", type="category"), row=row, col=col)
        fig.update_yaxes(axis("ms", rangemode="tozero"), row=row, col=col)
    fig.update_layout(
        layout(
            barmode="stack",
            bargap=0.25,
            height=160 + _SUBPLOT_PX * rows + _SUBPLOT_GAP_PX * (rows - 1),
            title={"text": "Step time by part, per device and step (ms)"},
        )
    )
    out = figure_dict(fig)
    out["data"] = traces
    return out


def idle_by_cause_figure(report: Report) -> dict[str, Any] | None:
    """Per device: idle time by cause as a share of step time (stacked horizontal bars, %)."""
    devices = report.devices
    if not devices or not any(d.idle_ns for d in devices):
        return None
    labels = [device_label(d.rank, d.device, style="cell") for d in devices]
    return stacked_bars(
        labels,
        devices,
        IDLE_SEGMENTS,
        _share_of_step,
        title="Idle time by cause (% of step time)",
        axis_title="% of step time",
    )


def _share_of_step(seg: Segment, d: DeviceBreakdown) -> tuple[float, str]:
    """A segment's bar in % of ``d``'s step time, and its hover text."""
    v = seg.value(d)
    return round(100 * v / d.dur_ns, 4) if d.dur_ns else 0, f"{format_ns(v)} ({pct(v, d.dur_ns)} of step time)"


def per_step_bar(seg: Segment, d: DeviceBreakdown) -> tuple[float, str]:
    """A segment's bar in ms per step of ``d``, and its hover text."""
    v = seg.value(d) / max(d.steps, 1)
    return ms(v), f"{format_ns(v)} per step ({pct(v * max(d.steps, 1), d.dur_ns)})"


def stacked_bars(
    labels: Sequence[str],
    devices: Sequence[DeviceBreakdown],
    segments: Sequence[Segment],
    value: Callable[[Segment, DeviceBreakdown], tuple[float, str]],
    *,
    title: str,
    axis_title: str,
    **yaxis: Any,
) -> dict[str, Any]:
    """One horizontal bar per device (named by ``labels``), stacked by the ``segments`` with any
    time: ``value(seg, d)`` is a segment's length on the x axis (titled ``axis_title``) and its
    hover text after the segment's name.  ``yaxis`` adds to the device axis."""
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
        layout(
            barmode="stack",
            height=190 + 28 * len(devices),
            margin={"l": 130, "r": 20, "t": 60, "b": 100},
            title={"text": title},
            xaxis=axis(axis_title, rangemode="tozero"),
            yaxis=axis("", autorange="reversed", type="category", **yaxis),
        )
    )
    return figure_dict(fig)
