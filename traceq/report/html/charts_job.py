"""The HTML report's charts of several ranks: the ranks side by side, the job's collective skew
heatmap and who arrives last at the collectives.

Also the labels these charts and the page's job tables share (:func:`job_labels`) and the rank
they highlight (:func:`highlighted_rank`).  Builders return a plotly figure as a plain dict, or
``None`` when there is nothing to draw; trace strings go through
:func:`~traceq.report.html.chart_style.plot_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from traceq.analyses.job_model import JobAnalysis
from traceq.report.html.chart_style import PALETTE, axis, figure_dict, layout, ms, plot_text
from traceq.report.html.charts_steps import SEGMENTS, per_step_bar, stacked_bars
from traceq.report.model import Report
from traceq.units import device_label, format_ns, format_share

WAIT_COLOURS: Final = [[0.0, "#ffffff"], [0.15, "#fbe3d1"], [1.0, PALETTE["sync"]]]
"""Heatmap colour scale of waiting in collectives: white (no wait) to vermillion."""
SLOW_COLOUR: Final = PALETTE["sync"]
"""The straggler (or the rank that costs the others most) in the job's charts."""


def job_labels(job: JobAnalysis) -> list[str]:
    """One label per rank of ``job`` (``rank 2 · GPU 2``; ``GPU 1 · pid 145`` where GPUs repeat)."""
    labels = [device_label(r.rank, r.device, style="cell") for r in job.ranks]
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
    labels = [device_label(d.rank, d.device, style="cell") for d in devices]
    if report.job is not None and len(report.job.ranks) == len(devices):
        labels = job_labels(report.job)
    return stacked_bars(
        labels,
        devices,
        SEGMENTS,
        per_step_bar,
        title="Ranks side by side: mean time per step by part (ms)",
        axis_title="ms per step",
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
            row.append(None if wait is None else ms(wait))
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
        layout(
            height=260 + 28 * len(labels),
            margin={"l": 160, "r": 20, "t": 60, "b": 110},
            title={"text": "Waiting in each collective for the last rank to arrive (ms)"},
            xaxis=axis("collective (time order)", type="category", tickangle=-45),
            yaxis=axis(
                "",
                autorange="reversed",
                type="category",
                tickvals=[plot_text(label) for label in labels],
                ticktext=_tick_text(labels, slow),
            ),
        )
    )
    return figure_dict(fig)


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
                f"(median {format_share(r.wait_caused_share)} of their step time)"
                for label, r in zip(labels, job.ranks, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(axis("collectives", rangemode="tozero"), row=1, col=1)
    fig.update_xaxes(axis("% of step time", rangemode="tozero"), row=1, col=2)
    fig.update_yaxes(
        axis("", autorange="reversed", type="category", tickvals=labels, ticktext=_tick_text(job_labels(job), slow)),
        row=1,
        col=1,
    )
    fig.update_layout(
        layout(
            height=190 + 28 * len(labels),
            margin={"l": 160, "r": 20, "t": 70, "b": 60},
            title={"text": "Who arrives last at the collectives, and what it costs the others"},
        )
    )
    return figure_dict(fig)
