"""The terminal diff of a :class:`~traceq.diff.model.Diff`, readable in 80 columns (as ``traceq report``'s).

Every string a trace or a saved report put in (names, titles, the verdict and warnings that quote
them) goes through :func:`~traceq.units.printable` before it is styled, as in ``traceq report``.
The sides, the verdict, the warnings, the step decomposed (only the parts either side has), the
devices paired, the kernels with the largest change and the classes that changed, launches and
syncs, the findings compared, MFU.  Headings carry ANSI bold (``click.unstyle`` removes it).
"""

from __future__ import annotations

from textwrap import wrap
from typing import Final

import click

from traceq.diff.labels import FINDING_LABELS, PART_LABELS, pair_label, signed_ns, signed_share
from traceq.diff.model import Decomposition, Diff, HostPace, KernelChange, SideInfo, StepStats
from traceq.units import format_ns, format_share, printable, short_kernel_name, shorten

WIDTH: Final = 80
KERNEL_ROWS: Final = 10
DEVICE_ROWS: Final = 16


def _heading(text: str) -> str:
    return click.style(text, bold=True)


def _wrapped(text: str, indent: str = "  ", first: str | None = None) -> list[str]:
    lines = wrap(text, WIDTH - len(indent))
    head = indent if first is None else first
    return [f"{head if i == 0 else indent}{line}" for i, line in enumerate(lines)]


def render_diff_text(diff: Diff) -> str:
    """The whole terminal diff, ending with a newline."""
    lines = [_heading("traceq diff"), *_side("before", diff.before), *_side("after", diff.after), ""]
    lines += [_heading("verdict"), *_wrapped(printable(diff.verdict))]
    if diff.warnings:
        lines.append("")
        for w in diff.warnings:
            lines += _wrapped(printable(w), "    ", "  " + click.style("!", fg="yellow", bold=True) + " ")
    lines += ["", *_decomposition(diff.decomposition, diff.before.steps, diff.after.steps)]
    if len(diff.devices) > 1 or any(" -> " in pair_label(p) for p in diff.devices):
        lines += ["", *_devices(diff)]
    lines += ["", *_kernels(diff)]
    lines += ["", *_pace(diff.pace_before, diff.pace_after)]
    lines += ["", *_findings(diff)]
    if diff.mfu is not None:
        m = diff.mfu
        lines += ["", _heading("model FLOPs utilisation"), f"  MFU {_share(m.mfu_before)} -> {_share(m.mfu_after)}"]
        if m.hfu_before is not None or m.hfu_after is not None:
            lines.append(f"  HFU {_share(m.hfu_before)} -> {_share(m.hfu_after)}")
    return "\n".join(lines) + "\n"


def _share(value: float | None) -> str:
    return format_share(value) if value is not None else "-"


def _side(role: str, side: SideInfo) -> list[str]:
    world = f", world size {side.world_size}" if side.world_size is not None else ""
    saved = "saved report: " if side.saved_report else ""
    return [
        shorten(printable(f"  {role:<7}{saved}{side.name}"), WIDTH),
        f"         {side.devices} device(s), {side.steps.count} steady step(s){world}",
    ]


def _ns(value: float | None) -> str:
    return format_ns(value) if value is not None else "-"


def _decomposition(d: Decomposition, before: StepStats, after: StepStats) -> list[str]:
    out = [
        _heading("the steady step, decomposed (mean over devices; the parts add up)"),
        f"  {'':<27}{'before':>12}{'after':>12}{'change':>12}",
    ]
    share = signed_share(d.delta_share) if d.delta_share is not None else ""
    out.append(
        f"  {'step':<27}{format_ns(d.step_before_ns):>12}{format_ns(d.step_after_ns):>12}"
        f"{signed_ns(d.delta_ns):>12}{share:>9}"
    )
    for t in d.terms:
        if t.before_ns or t.after_ns:
            label = PART_LABELS[t.key]
            out.append(
                f"    {label:<25}{format_ns(t.before_ns):>12}{format_ns(t.after_ns):>12}{signed_ns(t.delta_ns):>12}"
            )
    rows = (("median step", before.median_ns, after.median_ns), ("p10 step", before.p10_ns, after.p10_ns))
    for label, b, a in (*rows, ("p90 step", before.p90_ns, after.p90_ns)):
        if b is not None and a is not None:
            change = signed_ns(a - b) if label == "median step" else ""
            out.append(f"  {label:<27}{format_ns(b):>12}{format_ns(a):>12}{change:>12}".rstrip())
    out.append(f"  {'steady steps':<27}{before.count:>12}{after.count:>12}")
    return out


def _devices(diff: Diff) -> list[str]:
    out = [
        _heading(f"devices, per steady step (paired by {diff.basis})"),
        f"  {'device':<24}{'before':>11}{'after':>11}{'change':>11}  largest part",
    ]
    for p in diff.devices[:DEVICE_ROWS]:
        d = p.decomposition
        top = max(d.terms, key=lambda t: (abs(t.delta_ns), t.key == "compute"))
        part = f"{PART_LABELS[top.key]} {signed_ns(top.delta_ns)}" if top.delta_ns else "-"
        out.append(
            shorten(
                f"  {shorten(pair_label(p, style='column'), 23):<24}{format_ns(d.step_before_ns):>11}"
                f"{format_ns(d.step_after_ns):>11}{signed_ns(d.delta_ns):>11}  {part}",
                WIDTH,
            )
        )
    if len(diff.devices) > DEVICE_ROWS:
        out.append(f"  … and {len(diff.devices) - DEVICE_ROWS} more (the JSON diff lists every one)")
    return out


def _count(c: KernelChange, windows: tuple[int, int]) -> str:
    return f"{_per(c.count_before, windows[0])}\u2192{_per(c.count_after, windows[1])}"


def _per(count: int, windows: int) -> str:
    value = count / windows
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _kernels(diff: Diff) -> list[str]:
    k = diff.kernels
    moved = [c for c in k.changes if c.delta_per_step_ns or c.status in ("added", "removed")]
    out = [
        _heading("kernels, per step (largest change first)"),
        f"  {'change':>10}{'before':>10}{'after':>10} {'calls':>9} {'':<9} name (calls: per step)",
    ]
    windows = (k.windows_before, k.windows_after)
    for c in moved[:KERNEL_ROWS]:
        row = (
            f"  {signed_ns(c.delta_per_step_ns):>10}{format_ns(c.per_step_before_ns):>10}"
            f"{format_ns(c.per_step_after_ns):>10} {_count(c, windows):>9} {c.status:<9} "
        )
        name = c.name if c.matched_by == "normalised name" else short_kernel_name(c.name, 200)
        out.append(row + shorten(printable(name), WIDTH - len(row)))
    if not moved:
        out.append("  no kernel's time per step changed")
    elif len(moved) > KERNEL_ROWS:
        out.append(f"  … and {len(moved) - KERNEL_ROWS} more that changed (the JSON diff lists every kernel)")
    classes = [c for c in k.classes if c.delta_per_step_ns or c.removed or c.added]
    if classes:
        out.append(f"  {'by class':<14}{'before':>10}{'after':>10}{'change':>11}  names")
        for cc in classes:
            names = f"{cc.removed} removed, {cc.added} added" if cc.removed or cc.added else ""
            out.append(
                f"  {cc.kernel_class:<14}{format_ns(cc.per_step_before_ns):>10}{format_ns(cc.per_step_after_ns):>10}"
                f"{signed_ns(cc.delta_per_step_ns):>11}  {names}"
            )
    return out


def _pace(before: HostPace, after: HostPace) -> list[str]:
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}" if v != int(v) else f"{int(v):,}"

    rows = (
        ("launches per step", num(before.launches_per_step), num(after.launches_per_step)),
        ("syncs per step", num(before.syncs_per_step), num(after.syncs_per_step)),
        ("t_cpu (median launch interval)", _ns(before.t_cpu_ns), _ns(after.t_cpu_ns)),
        ("t_k (median kernel)", _ns(before.t_k_ns), _ns(after.t_k_ns)),
        ("regime", before.regime or "-", after.regime or "-"),
    )
    out = [_heading("launches and syncs (steady steps, mean over devices)"), f"  {'':<32}{'before':>20}{'after':>20}"]
    out += [f"  {label:<32}{b:>20}{a:>20}" for label, b, a in rows]
    return out


def _findings(diff: Diff) -> list[str]:
    if not diff.findings:
        return [_heading("findings"), "  none on either side"]
    out = [_heading("findings (share of step time on the worst device)")]
    for f in diff.findings:
        before = f"{f.severity_before} {format_share(f.share_before)}" if f.share_before is not None else "-"
        after = f"{f.severity_after} {format_share(f.share_after)}" if f.share_after is not None else "-"
        label = FINDING_LABELS.get(f.id, f.id)
        out.append(shorten(printable(f"  {f.status:<10}{label:<24}{before:>14} -> {after}"), WIDTH))
    return out
