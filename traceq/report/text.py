"""The terminal summary of a :class:`~traceq.report.model.Report`, readable in 80 columns."""

from __future__ import annotations

from collections.abc import Sequence
from textwrap import wrap

import click

from traceq.analyses.model import CAUSES, DeviceBreakdown, Finding
from traceq.report.model import Report

WIDTH = 80
SEVERITY_COLOURS = {"high": "red", "medium": "yellow", "low": "cyan"}
"""ANSI colours of the findings; click.echo drops them when the output is not a terminal."""


def _heading(text: str) -> str:
    return click.style(text, bold=True)


def format_ns(ns: float) -> str:
    """A duration for people: ``850 ns``, ``12.3 µs``, ``4.56 ms``, ``1.23 s``."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            value = ns / scale
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:.{digits}f} {unit}"
    return f"{ns:.0f} ns"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def device_label(d: DeviceBreakdown) -> str:
    rank = f"r{d.rank} " if d.rank is not None else ""
    return f"{rank}GPU {d.device}"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(report: Report) -> str:
    """The summary: per-device breakdown, idle by cause, findings, longest gaps, top kernels.

    Headings and severities carry ANSI styles (``click.unstyle`` removes them).
    """
    lines: list[str] = []
    for src in report.source.files[:4]:
        version = f" {src.format_version}" if src.format_version else ""
        lines.append(_heading(_shorten(src.path, WIDTH)))
        lines.append(_shorten(f"  {src.format}{version}", WIDTH))
    if len(report.source.files) > 4:
        lines.append(f"  … and {len(report.source.files) - 4} more files")
    lines.append("")
    if not report.devices:
        lines.append("no GPU activity in this trace: nothing to break down")
        return "\n".join(lines) + "\n"
    lines.extend(_breakdown(report.devices))
    lines.append("")
    lines.extend(_idle_by_cause(report.devices))
    lines.append("")
    lines.extend(_findings(report.findings))
    if report.mfu is not None:
        lines.append("")
        m = report.mfu
        hfu = f", HFU {100 * m.mean_hfu:.1f}%" if m.mean_hfu is not None else ""
        lines.append(_heading("model FLOPs utilisation"))
        gpus = f"{m.gpus} GPU" + ("s" if m.gpus != 1 else "")
        lines.append(f"  MFU {100 * m.mean_mfu:.1f}%{hfu} over {len(m.steps)} step windows, {gpus}")
        if m.mean_mfu > 1:
            lines.append("  above 100%: check --tokens-per-step (global), --gpus and the model shape")
        lines.append(_shorten(f"  peak {m.peak_flops_per_gpu / 1e12:g} TFLOP/s per GPU ({m.peak_source})", WIDTH))
    if report.gaps:
        lines.append("")
        lines.extend(_gaps(report))
    if report.kernels:
        lines.append("")
        lines.extend(_kernels(report))
    return "\n".join(lines) + "\n"


def _findings(findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return [_heading("findings"), "  none: no cause of lost time reaches its threshold"]
    out = [_heading(f"findings ({len(findings)})")]
    for f in findings:
        tag = click.style(f"{f.severity:<6}", fg=SEVERITY_COLOURS.get(f.severity), bold=True)
        title = wrap(f.title, WIDTH - 11) or [""]
        out.append(f"  {tag}  {title[0]}")
        out.extend(f"{'':10}{line}" for line in title[1:])
        out.extend(f"{'':10}{line}" for line in wrap(f"fix: {f.fix}", WIDTH - 10))
    return out


def _breakdown(devices: Sequence[DeviceBreakdown]) -> list[str]:
    out = [
        _heading("where the step time went (share of step time)"),
        f"  {'device':<12}{'steps':>6}{'step time':>12}{'compute':>10}{'exp. comm':>11}{'idle':>8}{'comm':>8}",
    ]
    for d in devices:
        per_step = d.dur_ns / max(d.steps, 1)
        steps = str(d.steps) if d.window == "steps" else "-"
        out.append(
            f"  {device_label(d):<12}{steps:>6}{format_ns(per_step):>12}{_pct(d.compute_ns, d.dur_ns):>10}"
            f"{_pct(d.exposed_comm_ns, d.dur_ns):>11}{_pct(d.idle_ns, d.dur_ns):>8}{_pct(d.comm_ns, d.dur_ns):>8}"
        )
    if any(d.window == "activity" for d in devices):
        out.append("  (-: no step ranges matched; the window is the device's first to last activity)")
    return out


def _idle_by_cause(devices: Sequence[DeviceBreakdown]) -> list[str]:
    header = "".join(f"{c:>9}" for c in CAUSES)
    out = [_heading("idle time by cause (share of step time)"), f"  {'device':<12}{header}"]
    for d in devices:
        cells = "".join(f"{_pct(d.idle_by_cause_ns[c], d.dur_ns):>9}" for c in CAUSES)
        out.append(f"  {device_label(d):<12}{cells}")
    return out


def _gaps(report: Report, limit: int = 5) -> list[str]:
    out = [_heading(f"longest idle gaps (of {len(report.analysis.gap_table):,})")]
    for g in report.gaps[:limit]:
        rank = f"r{g.rank} " if g.rank is not None else ""
        head = f"  {format_ns(g.dur_ns):>9}  {rank}GPU {g.device}  {g.cause:<7}"
        if g.sync is not None:
            why = f"{g.sync.name} ended, then {g.launch.name if g.launch else 'a launch'}"
        elif g.launch is not None:
            why = f"waited for {g.launch.name}"
        else:
            why = "no launch record"
        out.append(_shorten(f"{head} {why} -> {g.next.name}", WIDTH))
    return out


def _kernels(report: Report, limit: int = 8) -> list[str]:
    out = [_heading("top kernels by GPU time"), f"  {'share':>6} {'total':>10} {'count':>7}  name"]
    for k in report.kernels[:limit]:
        row = f"  {100 * k.share:5.1f}% {format_ns(k.total_ns):>10} {k.count:>7,}  "
        out.append(row + _shorten(k.name, WIDTH - len(row)))
    return out
