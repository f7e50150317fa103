"""The diff page's charts: the step change as a waterfall of its parts, and the kernel classes before
and after.  Each builder returns a plotly figure as a plain dict, or None when there is nothing to
draw; trace strings go through :func:`~traceq.report.html.chart_style.plot_text`.
"""

from __future__ import annotations

from typing import Any, Final

import plotly.graph_objects as go

from traceq.diff.labels import PART_LABELS, signed_ns
from traceq.diff.model import Diff
from traceq.report.html.chart_style import PALETTE, axis, figure_dict, layout, ms, plot_text
from traceq.units import format_ns

SLOWER: Final = "#b42318"
"""A part that made the step longer (the page's ``high`` colour)."""
FASTER: Final = "#067647"
"""A part that made it shorter (the page's ``ok`` colour)."""
CLASS_BARS: Final = 12


def waterfall_figure(diff: Diff) -> dict[str, Any] | None:
    """The step before, each part's change, the step after (ms per steady step)."""
    d = diff.decomposition
    terms = [t for t in d.terms if t.delta_ns]
    labels = ["step before", *(PART_LABELS[t.key] for t in terms), "step after"]
    values = [ms(d.step_before_ns), *(ms(t.delta_ns) for t in terms), ms(d.step_after_ns)]
    texts = [format_ns(d.step_before_ns), *(signed_ns(t.delta_ns) for t in terms), format_ns(d.step_after_ns)]
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=values,
            measure=["absolute", *(["relative"] * len(terms)), "total"],
            text=texts,
            textposition="outside",
            hovertext=texts,
            hoverinfo="x+text",
            increasing={"marker": {"color": SLOWER}},
            decreasing={"marker": {"color": FASTER}},
            totals={"marker": {"color": PALETTE["compute"]}},
            connector={"line": {"color": "#999", "width": 1}},
        )
    )
    fig.update_layout(
        **layout(
            title={"text": "Where the step time went that it no longer goes (mean steady step)"},
            height=440,
            showlegend=False,
            margin={"l": 70, "r": 20, "t": 70, "b": 90},
            yaxis=axis("ms per steady step", rangemode="tozero"),
            xaxis=axis("", tickangle=-20),
        )
    )
    return figure_dict(fig)


def classes_figure(diff: Diff) -> dict[str, Any] | None:
    """Per kernel class, its time per step before and after (the classes that changed most)."""
    classes = [c for c in diff.kernels.classes if c.per_step_before_ns or c.per_step_after_ns][:CLASS_BARS]
    if not classes:
        return None
    names = [plot_text(c.kernel_class) for c in reversed(classes)]
    fig = go.Figure()
    for label, colour, values in (
        ("before", "#999999", [c.per_step_before_ns for c in reversed(classes)]),
        ("after", PALETTE["compute"], [c.per_step_after_ns for c in reversed(classes)]),
    ):
        fig.add_trace(
            go.Bar(
                name=label,
                y=names,
                x=[ms(v) for v in values],
                orientation="h",
                marker={"color": colour},
                text=[format_ns(v) for v in values],
                hoverinfo="y+text+name",
            )
        )
    fig.update_layout(
        **layout(
            title={"text": "Kernel time per step by class"},
            barmode="group",
            height=max(260, 60 + 44 * len(classes)),
            margin={"l": 110, "r": 20, "t": 60, "b": 90},
            xaxis=axis("ms per step"),
        )
    )
    return figure_dict(fig)
