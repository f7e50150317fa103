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
from traceq.diff.model import Diff, SideInfo
from traceq.report.html.page import PLOTLY_CONFIG, plotly_element, script_json, traceq_version
from traceq.report.html.sections_overview import Verdict
from traceq.report.html.tables import Cell, Column, Row, Table, name_cell, num, row, table
from traceq.report.html.templating import build_environment, report_templates
from traceq.units import format_ns, format_share

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
    """One ``<section>``: its anchor, heading and view."""

    id: str
    title: str
    view: Block
    template: str = "sections/diff_section.html.j2"


@dataclass(frozen=True)
class Header:
    """The page's header, as the report page's macros read it (``warnings``: import warnings, none here)."""

    name: str
    verdict: Verdict
    facts: tuple[str, ...]
    warnings: int = 0


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
            version=traceq_version(),
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


def _step(diff: Diff, drawn: bool) -> Block:
    d, b, a = diff.decomposition, diff.before.steps, diff.after.steps
    share = signed_share(d.delta_share) if d.delta_share is not None else ""
    steps = format_ns(d.step_before_ns), format_ns(d.step_after_ns)
    rows = [row(Cell("step"), num(steps[0]), num(steps[1]), _delta(d.delta_ns, step=True), num(share), cls="total")]
    for t in d.terms:
        if t.before_ns or t.after_ns:
            rows.append(
                row(
                    Cell(PART_LABELS[t.key]),
                    num(format_ns(t.before_ns)),
                    num(format_ns(t.after_ns)),
                    _delta(t.delta_ns),
                    num(""),
                )
            )
    columns = (
        Column("per steady step"),
        Column("before", num=True),
        Column("after", num=True),
        Column("change", num=True),
        Column("", num=True),
    )
    spread = [row(Cell("steady steps"), num(f"{b.count:,}"), num(f"{a.count:,}"))]
    for label, x, y in (
        ("median", b.median_ns, a.median_ns),
        ("p10", b.p10_ns, a.p10_ns),
        ("p25", b.p25_ns, a.p25_ns),
        ("p75", b.p75_ns, a.p75_ns),
        ("p90", b.p90_ns, a.p90_ns),
        ("standard error of the median", b.median_se_ns, a.median_se_ns),
    ):
        spread.append(row(Cell(label), num(_ns(x)), num(_ns(y))))
    return Block(
        lead=(
            "The mean steady step (warm-up left out) of each side, as the mean over its devices, and its parts: "
            "compute, exposed communication and idle by cause. The parts' changes add up to the step's change."
        ),
        charts=(Chart("chart-waterfall", drawn, "No change to draw."),),
        parts=(
            Part("", table(columns, rows)),
            Part(
                "The steady steps' spread",
                table((Column(""), Column("before", num=True), Column("after", num=True)), spread),
            ),
        ),
        notes=(
            "The median's standard error is 1.2533 × (IQR / 1.349) / √steps; a change of the median smaller than "
            "twice the standard error of the difference may be noise (docs/diff.md, Noise).",
        ),
    )


def _devices(diff: Diff) -> Block:
    columns = (
        Column("device"),
        Column("before", num=True),
        Column("after", num=True),
        Column("change", num=True),
        Column("median before", num=True),
        Column("median after", num=True),
        Column("largest part"),
    )
    rows = []
    for p in diff.devices[:DEVICE_ROWS]:
        d = p.decomposition
        top = max(d.terms, key=lambda t: (abs(t.delta_ns), t.key == "compute"))
        part = f"{PART_LABELS[top.key]} {signed_ns(top.delta_ns)}" if top.delta_ns else "-"
        rows.append(
            row(
                Cell(pair_label(p)),
                num(format_ns(d.step_before_ns)),
                num(format_ns(d.step_after_ns)),
                _delta(d.delta_ns, step=True),
                num(_ns(p.median_before_ns)),
                num(_ns(p.median_after_ns)),
                Cell(part),
            )
        )
    more = len(diff.devices) - DEVICE_ROWS
    return Block(
        lead=f"Each device's mean steady step, before and after (paired by {diff.basis}).",
        parts=(Part("", table(columns, rows)),),
        notes=(f"… and {more} more devices: the JSON diff lists every one.",) if more > 0 else (),
    )


def _kernels(diff: Diff, drawn: bool) -> Block:
    k = diff.kernels
    moved = [c for c in k.changes if c.delta_per_step_ns or c.status in ("added", "removed")]
    columns = (
        Column("kernel"),
        Column("status"),
        Column("class"),
        Column("before", num=True),
        Column("after", num=True),
        Column("change", num=True),
        Column("calls before", num=True),
        Column("calls after", num=True),
    )
    rows = [
        row(
            name_cell(c.name),
            Cell(c.status),
            Cell(c.kernel_class),
            num(format_ns(c.per_step_before_ns)),
            num(format_ns(c.per_step_after_ns)),
            _delta(c.delta_per_step_ns, step=True),
            num(f"{c.count_before:,}"),
            num(f"{c.count_after:,}"),
        )
        for c in moved[:KERNEL_ROWS]
    ]
    class_columns = (
        Column("class"),
        Column("before", num=True),
        Column("after", num=True),
        Column("change", num=True),
        Column("names removed", num=True),
        Column("names added", num=True),
    )
    class_rows = [
        row(
            Cell(c.kernel_class),
            num(format_ns(c.per_step_before_ns)),
            num(format_ns(c.per_step_after_ns)),
            _delta(c.delta_per_step_ns, step=True),
            num(f"{c.removed:,}"),
            num(f"{c.added:,}"),
        )
        for c in k.classes
    ]
    incomplete = [role for role, done in (("before", k.complete_before), ("after", k.complete_after)) if not done]
    more = len(moved) - KERNEL_ROWS
    return Block(
        lead=(
            f"Kernel time per step window ({k.windows_before:,} before, {k.windows_after:,} after: "
            "every window of every "
            "device), matched by name, then by normalised name; largest change first."
        ),
        warnings=tuple(f"The {role} side's kernel list is incomplete (see Sides)." for role in incomplete),
        charts=(Chart("chart-classes", drawn, "No kernel time to draw."),),
        parts=(
            Part("Kernels that changed", table(columns, rows), "No kernel's time per step changed."),
            Part("By class", table(class_columns, class_rows), "No kernels."),
        ),
        notes=(f"… and {more} more that changed: the JSON diff lists every kernel.",) if more > 0 else (),
    )


def _pace_value(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}" if v != int(v) else f"{int(v):,}"


def _pace(diff: Diff) -> Block:
    b, a = diff.pace_before, diff.pace_after
    rows = [
        row(Cell(label), num(x), num(y))
        for label, x, y in (
            ("launches per step", _pace_value(b.launches_per_step), _pace_value(a.launches_per_step)),
            ("syncs per step", _pace_value(b.syncs_per_step), _pace_value(a.syncs_per_step)),
            ("t_cpu (median launch interval)", _ns(b.t_cpu_ns), _ns(a.t_cpu_ns)),
            ("t_k (median kernel)", _ns(b.t_k_ns), _ns(a.t_k_ns)),
            ("regime", b.regime or "-", a.regime or "-"),
        )
    ]
    return Block(
        lead="How the host launched and synchronised, per steady step (mean over devices; t_cpu and t_k: the median).",
        parts=(Part("", table((Column(""), Column("before", num=True), Column("after", num=True)), rows)),),
    )


def _finding_value(severity: str | None, share: float | None) -> str:
    return f"{severity} {format_share(share)}" if share is not None else "-"


def _findings(diff: Diff) -> Block:
    rows = [
        row(
            Cell(f.status, cls="hi" if f.status == "new" else ""),
            Cell(FINDING_LABELS.get(f.id, f.id)),
            num(_finding_value(f.severity_before, f.share_before)),
            num(_finding_value(f.severity_after, f.share_after)),
            Cell(f.title_after or f.title_before or ""),
        )
        for f in diff.findings
    ]
    columns = (Column("status"), Column("finding"), Column("before", num=True), Column("after", num=True), Column(""))
    return Block(
        lead="The findings of both sides by id, with their severity and share of step time on the worst device.",
        parts=(Part("", table(columns, rows), "No finding on either side."),),
    )


def _mfu(diff: Diff) -> Block:
    m = diff.mfu
    assert m is not None
    rows = [row(Cell("MFU"), num(_share(m.mfu_before)), num(_share(m.mfu_after)))]
    if m.hfu_before is not None or m.hfu_after is not None:
        rows.append(row(Cell("HFU"), num(_share(m.hfu_before)), num(_share(m.hfu_after))))
    columns = (Column(""), Column("before", num=True), Column("after", num=True))
    return Block(
        lead="Model FLOPs utilisation over each side's steady steps (docs/mfu.md).",
        parts=(Part("", table(columns, rows)),),
    )


def _share(value: float | None) -> str:
    return format_share(value) if value is not None else "-"


def _side_rows(role: str, side: SideInfo) -> list[Row]:
    kernels = f"{side.kernels_listed:,} listed" + (
        f" of {side.kernel_names:,}" if side.kernel_names is not None else " (of an unknown number)"
    )
    world = str(side.world_size) if side.world_size is not None else "-"
    return [
        row(
            Cell(role),
            Cell(("saved report: " if side.saved_report else "") + side.name, cls="name"),
            num(f"{side.devices:,}"),
            num(f"{side.steps.count:,}"),
            num(world),
            num(kernels),
        ),
        *(row(Cell(""), Cell(f, cls="name"), num(""), num(""), num(""), num("")) for f in side.files),
    ]


def _sides(diff: Diff) -> Block:
    columns = (
        Column("side"),
        Column("input / files"),
        Column("devices", num=True),
        Column("steady steps", num=True),
        Column("world size", num=True),
        Column("kernel names", num=True),
    )
    rows = [*_side_rows("before", diff.before), *_side_rows("after", diff.after)]
    return Block(
        lead=f"What was compared; devices paired by {diff.basis}.",
        warnings=diff.warnings,
        parts=(Part("", table(columns, rows)),),
    )


__all__ = ["render_diff_html"]
