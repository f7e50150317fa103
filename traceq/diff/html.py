"""The diff as one self-contained, deterministic HTML page, like the report's (``docs/report.md``).

The verdict first, then: the step change (a waterfall of its parts, the decomposition and the steps'
spread), the devices paired, the kernels (largest change first, by class), launches and syncs, the
findings, MFU, and the sides (their files and the comparison's warnings).

The page is the report page's machinery, reused: its Jinja environment's rules (autoescaping, the
escaper, the folded layout: :func:`traceq.report.html.templating.build_environment`) over this
package's templates (``templates/diff.html.j2``, ``templates/sections/diff_section.html.j2``) in front
of the report's (its stylesheet, script and macros), its tables (:mod:`traceq.report.html.tables`),
its chart style, its plotly element and its JSON-in-script escaping (:mod:`traceq.report.html.page`,
which says why exactly those two values are marked safe).  Every string of the diff, trace names
above all, is escaped by the templates; chart labels go through ``plot_text``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

import jinja2
from markupsafe import Markup

from traceq.diff.charts import classes_figure, waterfall_figure
from traceq.diff.labels import FINDING_LABELS, PART_LABELS, pair_label, signed_ns, signed_share
from traceq.diff.model import Diff, HostPace, SideInfo
from traceq.report.html.page import PLOTLY_CONFIG, _version, plotly_element, script_json
from traceq.report.html.sections_overview import Verdict
from traceq.report.html.tables import Cell, Column, Row, Table, name_cell, num, row, table
from traceq.report.html.templating import build_environment, report_templates
from traceq.units import format_ns, format_share, short_kernel_name

KERNEL_ROWS: Final = 50
DEVICE_ROWS: Final = 64


@dataclass(frozen=True)
class Chart:
    """A chart's box: its element id, whether it is drawn, and what to say when it is not."""

    id: str
    drawn: bool
    missing: str


@dataclass(frozen=True)
class Part:
    """A table of a section, with a heading and what to say when it has no rows."""

    title: str
    table: Table
    empty: str = "Nothing to show."


@dataclass(frozen=True)
class Block:
    """One section's view: a lead, warnings, charts, tables and notes, in that order."""

    lead: str = ""
    warnings: tuple[str, ...] = ()
    charts: tuple[Chart, ...] = ()
    parts: tuple[Part, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    view: Block
    template: str = "sections/diff_section.html.j2"


@dataclass(frozen=True)
class Header:
    name: str
    verdict: Verdict
    facts: tuple[str, ...]


@cache
def _environment() -> jinja2.Environment:
    own = jinja2.PackageLoader("traceq.diff", "templates")
    return build_environment(jinja2.ChoiceLoader([own, report_templates()]))


def render_diff_html(diff: Diff, *, cdn: bool = False) -> str:
    """The diff as one HTML page (a ``str``; write it as UTF-8)."""
    figures = {"chart-waterfall": waterfall_figure(diff), "chart-classes": classes_figure(diff)}
    drawn = {k: v for k, v in figures.items() if v is not None}
    sections = [
        Section("step", "Step time", _step(diff, "chart-waterfall" in drawn)),
        *([Section("devices", "Devices", _devices(diff))] if diff.devices else []),
        Section("kernels", "Kernels", _kernels(diff, "chart-classes" in drawn)),
        Section("pace", "Launches and syncs", _pace(diff)),
        Section("findings", "Findings", _findings(diff)),
        *([Section("mfu", "MFU", _mfu(diff))] if diff.mfu is not None else []),
        Section("sides", "Sides", _sides(diff)),
    ]
    return (
        _environment()
        .get_template("diff.html.j2")
        .render(
            version=_version(),
            schema_version=diff.schema_version,
            header=_header(diff),
            sections=sections,
            plotly=plotly_element(cdn),
            figures=Markup(script_json({"config": PLOTLY_CONFIG, "figures": drawn})),
        )
    )


def _header(diff: Diff) -> Header:
    d = diff.decomposition
    if d.delta_ns < 0:
        pill = Verdict("clean", "faster", diff.verdict)
    elif d.delta_ns > 0:
        pill = Verdict("sev-high", "slower", diff.verdict)
    else:
        pill = Verdict("sev-low", "unchanged", diff.verdict)
    facts = (
        f"before: {diff.before.name}",
        f"after: {diff.after.name}",
        f"devices paired by {diff.basis}",
        *((f"{len(diff.warnings)} warning(s), under Sides",) if diff.warnings else ()),
    )
    return Header(f"{diff.before.name} \u2192 {diff.after.name}", pill, facts)


def _ns(value: float | None) -> str:
    return format_ns(value) if value is not None else "-"


def _delta(value: float, *, step: bool = False) -> Cell:
    """A change, highlighted where it makes the step longer."""
    return num(signed_ns(value), cls="hi" if step and value > 0 else "")


def _step(diff: Diff) -> Block:
    d, b, a = diff.decomposition, diff.before.steps, diff.after.steps
    share = signed_share(d.delta_share) if d.delta_share is not None else ""
    rows = [row(Cell("step"), num(format_ns(d.step_before_ns)), num(format_ns(d.step_after_ns)), _delta(d.delta_ns, step=True), num(share), cls="total")]
    for t in d.terms:
        if t.before_ns or t.after_ns:
            label = PART_LABELS[t.key] if t.key in ("compute", "exposed_comm", "unaccounted") else f"idle: {t.key}"
            rows.append(row(Cell(label), num(format_ns(t.before_ns)), num(format_ns(t.after_ns)), _delta(t.delta_ns), num("")))
    columns = (Column("per steady step"), Column("before", num=True), Column("after", num=True), Column("change", num=True), Column("", num=True))
    spread_rows = [
        row(Cell(label), num(_ns(x)), num(_ns(y)))
        for label, x, y in (
            ("steady steps", float(b.count), float(a.count)),
            ("median", b.median_ns, a.median_ns),
            ("p10", b.p10_ns, a.p10_ns),
            ("p25", b.p25_ns, a.p25_ns),
            ("p75", b.p75_ns, a.p75_ns),
            ("p90", b.p90_ns, a.p90_ns),
            ("standard error of the median", b.median_se_ns, a.median_se_ns),
        )
    ]
    spread_rows[0] = row(Cell("steady steps"), num(f"{b.count:,}"), num(f"{a.count:,}"))
    return Block(
        lead=(
            "The mean steady step (warm-up left out) of each side, as the mean over its devices, and its parts: "
            "compute, exposed communication and idle by cause. The parts' changes add up to the step's change."
        ),
        charts=(Chart("chart-waterfall", drawn, "No change to draw."),),
        parts=(
            Part("", table(columns, rows)),
            Part("The steady steps' spread", table((Column(""), Column("before", num=True), Column("after", num=True)), spread_rows)),
        ),
        notes=(
            "The median's standard error is 1.2533 × (IQR / 1.349) / √steps; a change of the median smaller than "
            "twice the standard error of the difference may be noise (docs/diff.md, Noise).",
        ),
    )
