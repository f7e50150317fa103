"""The terminal summary of a :class:`~traceq.report.model.Report`, readable in 80 columns.

Every text that comes from a trace (file names, kernel and range names, what findings quote of
them) is passed through :func:`~traceq.units.printable` before it is styled, so that its control
characters reach the terminal as escapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from textwrap import wrap

import click

from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import CAUSES, DataCaveat, DeviceBreakdown, Finding, Regime, WithheldFinding
from traceq.analyses.phases import NO_PHASE
from traceq.report.model import Report
from traceq.report.notes import caveat_note, comm_kernels, comm_summary, unknown_idle_note
from traceq.units import device_label, format_ns, pct, printable, shorten

WIDTH = 80
JOB_ROWS = 16
"""Ranks listed in the job block; larger jobs show those that cost the others the most."""
CLOCK_WORDS = {
    "single_clock": "one clock (one file)",
    "anchor": "the traces' clock anchors",
    "collective_end": "the end of the first shared collective",
    "none": "not aligned",
}
SEVERITY_COLOURS = {"high": "red", "medium": "yellow", "low": "cyan"}
"""ANSI colours of the findings; click.echo drops them when the output is not a terminal."""


def _heading(text: str) -> str:
    return click.style(text, bold=True)


def render_text(report: Report) -> str:
    """The summary: per-device breakdown, idle by cause, findings, longest gaps, top kernels.

    Headings and severities carry ANSI styles (``click.unstyle`` removes them).
    """
    lines: list[str] = []
    for src in report.source.files[:4]:
        version = f" {src.format_version}" if src.format_version else ""
        lines.append(_heading(shorten(printable(src.path), WIDTH)))
        lines.append(shorten(printable(f"  {src.format}{version}"), WIDTH))
    if len(report.source.files) > 4:
        lines.append(f"  … and {len(report.source.files) - 4} more files")
    lines.append("")
    if not report.devices:
        lines.append("no GPU activity in this trace: nothing to break down")
        lines.extend(_caveats(report.caveats))
        return "\n".join(lines) + "\n"
    lines.extend(_breakdown(report.devices))
    lines.extend(_caveats(report.caveats))
    comm = _comm_kernels(report.devices)
    if comm:
        lines.append("")
        lines.extend(comm)
    lines.append("")
    lines.extend(_idle_by_cause(report.devices))
    lines.append("")
    if report.job is not None:
        lines.extend(_job(report.job))
        lines.append("")
    lines.extend(_findings(report.findings, withheld=bool(report.withheld_findings)))
    lines.extend(_withheld(report.withheld_findings))
    if report.mfu is not None:
        lines.append("")
        m = report.mfu
        hfu = f", HFU {100 * m.mean_hfu:.1f}%" if m.mean_hfu is not None else ""
        lines.append(_heading("model FLOPs utilisation"))
        gpus = f"{m.gpus} GPU" + ("s" if m.gpus != 1 else "")
        lines.append(f"  MFU {100 * m.mean_mfu:.1f}%{hfu} over {len(m.steps)} step windows, {gpus}")
        if m.mean_mfu > 1:
            lines.append("  above 100%: check --tokens-per-step (global), --gpus and the model shape")
        lines.append(
            shorten(printable(f"  peak {m.peak_flops_per_gpu / 1e12:g} TFLOP/s per GPU ({m.peak_source})"), WIDTH)
        )
    if report.gaps:
        lines.append("")
        lines.extend(_gaps(report))
    if report.kernels:
        lines.append("")
        lines.extend(_kernels(report))
    if report.operators:
        lines.append("")
        lines.extend(_operators(report))
    phases = _phases(report)
    if phases:
        lines.append("")
        lines.extend(phases)
    return "\n".join(lines) + "\n"


def _findings(findings: Sequence[Finding], *, withheld: bool = False) -> list[str]:
    if not findings:
        why = "every one that fired is withheld (below)" if withheld else "no cause of lost time reaches its threshold"
        return [_heading("findings"), f"  none: {why}"]
    out = [_heading(f"findings ({len(findings)})")]
    for f in findings:
        tag = click.style(f"{f.severity:<6}", fg=SEVERITY_COLOURS.get(f.severity), bold=True)
        title = wrap(printable(f.title), WIDTH - 11) or [""]
        out.append(f"  {tag}  {title[0]}")
        out.extend(f"{'':10}{line}" for line in title[1:])
        out.extend(f"{'':10}{line}" for line in wrap(printable(f"fix: {f.fix}"), WIDTH - 10))
        for caveat in f.caveats:
            out.extend(f"{'':10}{line}" for line in wrap(printable(f"caveat: {caveat}"), WIDTH - 10))
    return out


def _caveats(caveats: Sequence[DataCaveat]) -> list[str]:
    """The GPU work the trace lacks, under the numbers it affects (``docs/findings.md``)."""
    out: list[str] = []
    for c in caveats:
        lines = wrap(printable(f"incomplete: {caveat_note(c)}"), WIDTH - 4)
        out.append("  " + click.style("!", fg="yellow", bold=True) + f" {lines[0]}")
        out.extend(f"    {line}" for line in lines[1:])
    return out


def _withheld(withheld: Sequence[WithheldFinding]) -> list[str]:
    if not withheld:
        return []
    out = [_heading(f"withheld findings ({len(withheld)}): the trace lacks too much of the work they measure")]
    for w in withheld:
        lines = wrap(printable(f"{w.id}: {w.title}"), WIDTH - 4)
        out.extend(f"  {'' if i == 0 else '  '}{line}" for i, line in enumerate(lines))
    return out


def _breakdown(devices: Sequence[DeviceBreakdown]) -> list[str]:
    out = [
        _heading("where the step time went (share of step time)"),
        f"  {'device':<12}{'steps':>6}{'step time':>12}{'compute':>10}{'exp. comm':>11}{'idle':>8}{'comm':>8}",
    ]
    for d in devices:
        per_step = d.dur_ns / max(d.steps, 1)
        steps = str(d.steps) if d.window == "steps" else "-"
        label = device_label(d.rank, d.device, style="column")
        out.append(
            f"  {label:<12}{steps:>6}{format_ns(per_step):>12}{pct(d.compute_ns, d.dur_ns):>10}"
            f"{pct(d.exposed_comm_ns, d.dur_ns):>11}{pct(d.idle_ns, d.dur_ns):>8}{pct(d.comm_ns, d.dur_ns):>8}"
        )
    if any(d.window == "activity" for d in devices):
        out.append("  (-: no step ranges matched; the window is the device's first to last activity)")
    for d in devices[:REGIME_LINES]:
        if d.regime is not None:
            label = device_label(d.rank, d.device, style="column")
            warm = (
                f"; {d.warmup_steps} warm-up step{'s' if d.warmup_steps > 1 else ''} left out" if d.warmup_steps else ""
            )
            out.append(shorten(f"  {label}: {d.regime.verdict} ({_regime_evidence(d.regime)}){warm}", WIDTH))
    return out


REGIME_LINES = 4
"""Devices whose regime the summary names."""


def _regime_evidence(r: Regime) -> str:
    """The regime's largest share, and the launch pace where the host sets it."""
    share = {
        "overhead-bound": r.overhead_ns,
        "memory-bound": r.memory_ns,
        "compute-bound": r.compute_ns,
        "communication-bound": r.communication_ns,
        "input-bound": r.input_ns,
    }.get(r.verdict, 0)
    text = f"{pct(share, r.step_ns)} of steady step time"
    if r.verdict == "overhead-bound" and r.t_k_ns is not None and r.t_cpu_ns is not None:
        text += f"; t_k {format_ns(r.t_k_ns)} < t_cpu {format_ns(r.t_cpu_ns)}"
    return text


CAUSE_HEADINGS = {"dependency": "depend."}
"""Column headings where a cause's name is wider than its column."""


def _idle_by_cause(devices: Sequence[DeviceBreakdown]) -> list[str]:
    header = "".join(f"{CAUSE_HEADINGS.get(c, c):>9}" for c in CAUSES)
    out = [_heading("idle time by cause (share of step time)"), f"  {'device':<12}{header}"]
    for d in devices:
        cells = "".join(f"{pct(d.idle_by_cause_ns[c], d.dur_ns):>9}" for c in CAUSES)
        out.append(f"  {device_label(d.rank, d.device, style='column'):<12}{cells}")
    for d in devices:
        why = unknown_idle_note(d)
        if why is not None:
            out.extend(f"  {line}" for line in wrap(printable(f"{device_label(d.rank, d.device)}: {why}"), WIDTH - 2))
    return out


def _comm_kernels(devices: Sequence[DeviceBreakdown], limit: int = 3) -> list[str]:
    """The kernel names counted as communication (over every device): how many, by which rule, and
    the ones with the most time; nothing without communication kernels."""
    stats = comm_kernels(devices)
    if not stats:
        return []
    out = [_heading("communication kernels")]
    out.extend(f"  {line}" for line in wrap(printable(comm_summary(stats)), WIDTH - 2))
    for s in stats[:limit]:
        row = f"  {format_ns(s.total_ns):>10} {s.count:>7,}  "
        out.append(row + shorten(printable(s.name), WIDTH - len(row)))
    if len(stats) > limit:
        out.append(f"  … and {len(stats) - limit} more (the JSON report lists every one, per device)")
    return out


def _job(job: JobAnalysis) -> list[str]:
    """Clock alignment, collectives and arrival skew, the verdict, and one line per rank."""
    clock = job.clock
    residual = f", residual skew {format_ns(clock.residual_skew_ns)}" if clock.residual_skew_ns is not None else ""
    how = clock.note if clock.method == "none" else CLOCK_WORDS.get(clock.method, clock.method)
    out = [_heading("ranks and collectives")]
    out.extend(f"  {line}" for line in wrap(f"clocks: {how}{residual}", WIDTH - 2))
    if job.collectives_total:
        skew = format_ns(job.median_arrival_skew_ns or 0)
        out.append(
            f"  {job.collectives_total:,} collectives matched ({job.unmatched_calls:,} of {job.comm_calls:,} calls "
            f"unmatched); median arrival skew {skew}"
        )
    out.extend(f"  {line}" for line in wrap(printable(job.note), WIDTH - 2))
    if not job.collectives_total:
        return out
    out.append(f"  {'device':<12}{'compute':>10}{'vs median':>11}{'waits':>10}{'last':>10}{'chance':>8}{'costs':>8}")
    order = list(range(len(job.ranks)))
    if len(order) > JOB_ROWS:
        order = sorted(order, key=lambda i: (-job.ranks[i].wait_caused_share, i))[:JOB_ROWS]
    for i in order:
        r = job.ranks[i]
        label = device_label(r.rank, r.device, style="column") + (" *" if i == job.straggler else "")
        steps = max(r.steps, 1)
        excess = ("+" if r.compute_excess_ns_per_step >= 0 else "-") + format_ns(abs(r.compute_excess_ns_per_step))
        out.append(
            f"  {label:<12}{format_ns(r.compute_ns_per_step):>10}{excess:>11}"
            f"{format_ns(r.exposed_wait_ns / steps):>10}{f'{r.last_arrivals}/{r.collectives}':>10}"
            f"{r.expected_last_arrivals:>8.1f}{100 * r.wait_caused_share:>7.1f}%"
        )
    if len(job.ranks) > JOB_ROWS:
        out.append(f"  ({JOB_ROWS} of {len(job.ranks)} ranks: those that cost the others the most)")
    out.append("  per step: compute, and waits (its own exposed wait in collectives); last: last")
    out.append("  arrivals/collectives; chance: expected last arrivals; costs: the wait it")
    out.append("  causes the others, as a share of their step time (median)")
    if job.straggler is not None:
        out.append("  * the straggler")
    return out


def _gaps(report: Report, limit: int = 5) -> list[str]:
    out = [_heading(f"longest idle gaps (of {report.gap_count:,})")]
    for g in report.gaps[:limit]:
        head = f"  {format_ns(g.dur_ns):>9}  {device_label(g.rank, g.device, style='column')}  {g.cause:<7}"
        if g.sync is not None:
            why = f"{g.sync.name} ended, then {g.launch.name if g.launch else 'a launch'}"
        elif g.launch is not None:
            why = f"waited for {g.launch.name}"
        else:
            why = "no launch record"
        out.append(shorten(printable(f"{head} {why} -> {g.next.name if g.next else '(end of trace)'}"), WIDTH))
    return out


def _kernels(report: Report, limit: int = 8) -> list[str]:
    out = [_heading("top kernels by GPU time"), f"  {'share':>6} {'total':>10} {'count':>7}  name"]
    for k in report.kernels[:limit]:
        row = f"  {100 * k.share:5.1f}% {format_ns(k.total_ns):>10} {k.count:>7,}  "
        out.append(row + shorten(printable(k.name), WIDTH - len(row)))
    return out


def _operators(report: Report, limit: int = 8) -> list[str]:
    out = [_heading("top operators by GPU time"), f"  {'share':>6} {'total':>10} {'kernels':>7}  operator"]
    for op in report.operators[:limit]:
        row = f"  {100 * op.share:5.1f}% {format_ns(op.gpu_ns):>10} {op.kernels:>7,}  "
        out.append(row + shorten(printable(op.name), WIDTH - len(row)))
    return out


def _phases(report: Report, limit: int = 6) -> list[str]:
    """Per device with phases: its longest phases, each as a share of its step time."""
    named = {(p.source, p.pid, p.device) for p in report.phases if p.phase != NO_PHASE}
    if not named:
        return []
    out = [_heading("phases (GPU work by launch, idle by host)")]
    out.append(f"  {'share':>6} {'time':>10} {'compute':>8} {'exp comm':>8} {'idle':>8}  phase")
    for key in sorted(named, key=lambda k: (k[0], k[1] or 0, k[2])):
        rows = [p for p in report.phases if (p.source, p.pid, p.device) == key]
        total = sum(p.dur_ns for p in rows)
        out.append(f"  {device_label(rows[0].rank, rows[0].device, pid=rows[0].pid)}")
        for p in rows[:limit]:
            row = (
                f"  {pct(p.dur_ns, total):>6} {format_ns(p.dur_ns):>10} {pct(p.compute_ns, p.dur_ns):>8} "
                f"{pct(p.exposed_comm_ns, p.dur_ns):>8} {pct(p.idle_ns, p.dur_ns):>8}  "
            )
            out.append(row + shorten(printable(p.phase), WIDTH - len(row)))
        if len(rows) > limit:
            out.append(f"  … and {len(rows) - limit} more phases")
    return out
