"""What every chart of the HTML report shares: the palette, the font, layout and axis defaults,
the escaping of trace strings for plotly, and the conversion of a figure to the dict the page embeds.

All charts use one colour-blind-safe palette (Okabe–Ito): compute, communication and one colour
per idle cause; the page's table swatches use the same colours.

Every trace string (kernel, range and API names) reaches plotly through :func:`plot_text`:
plotly.js parses a subset of HTML in labels and hover texts (``<b>``, ``<a href>``, ...), so
``&``, ``<`` and ``>`` are escaped as entities that plotly turns back into the literal
characters.  Times are drawn in ms (:func:`ms`), with the nearest unit in hover texts
(:func:`traceq.units.format_ns`).
"""

from __future__ import annotations

from typing import Any, Final

import plotly.graph_objects as go

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
    "compile": "#332288",
    "launch": "#E69F00",
    "cpu": "#F0E442",
    "dependency": "#666666",
    "unknown": "#BBBBBB",
}
"""Okabe–Ito colours (and Tol's indigo for compile): compute and (exposed) communication, copies on
the timeline, and one per idle cause; the two causes that are not the host's doing, dependency and
unknown, in greys."""


def plot_text(text: str) -> str:
    """``text`` as plotly shows it literally: no tag or entity of it is interpreted."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def ms(ns: float) -> float:
    """A time in ns as ms on a chart axis, rounded to the ns."""
    return round(ns / 1e6, 6)


def layout(**kw: Any) -> dict[str, Any]:
    """The layout every chart starts from (font, white background, legend below, title left);
    ``kw`` adds to it or replaces its keys."""
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


def axis(title: str, **kw: Any) -> dict[str, Any]:
    """An axis titled ``title`` with light grid lines and outside ticks; ``kw`` adds to it."""
    return {
        "title": {"text": title},
        "gridcolor": "#e6e6e6",
        "linecolor": "#999",
        "zerolinecolor": "#bbb",
        "ticks": "outside",
        **kw,
    }


def figure_dict(fig: go.Figure) -> dict[str, Any]:
    """The figure as the plain dict the page embeds, without plotly's default template (the
    layout above sets everything it needs, and the template is most of the JSON's size)."""
    out: dict[str, Any] = fig.to_plotly_json()
    out["layout"].pop("template", None)
    return out
