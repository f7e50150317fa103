"""What the top of the HTML report shows: the header (the trace's name, a one-line verdict and the
facts of the trace) and the finding cards, as data for ``templates/page.html.j2`` and
``templates/sections/findings.html.j2``.

Every string here is plain text: the templates escape it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from traceq.analyses.model import SEVERITIES, DeviceBreakdown, Finding, WithheldFinding
from traceq.meta import SourceMeta
from traceq.report.model import Report
from traceq.units import format_ns, format_share, pct

_SEVERITY_RANK: Final = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Verdict:
    """The header's verdict: a pill (its CSS class and word) and the sentence after it."""

    pill_class: str
    pill: str
    text: str


@dataclass(frozen=True)
class Header:
    """The header: the trace's name, the verdict, the facts (joined by `` · ``) and the count of
    import warnings (a link to the sources section when there are any)."""

    name: str
    verdict: Verdict
    facts: tuple[str, ...]
    warnings: int


@dataclass(frozen=True)
class EvidenceItem:
    """One piece of a finding's evidence; ``timeline_offset`` is how far into the timeline
    window it lies (``1.20 ms``), ``None`` when the timeline does not show it; ``trace_time`` its
    absolute time on the trace's own clock (ns, and the µs ``ts`` a Chrome trace shows), so that
    Perfetto, chrome://tracing or the nsys GUI can be taken to the same spot."""

    text: str
    timeline_offset: str | None
    trace_time: str | None = None
    zoom_ms: str | None = None
    """Where the link zooms the timeline: ``"START END"``, ms into its window (the chart's x axis)."""


@dataclass(frozen=True)
class FindingCard:
    """One finding as its card shows it; ``severity_class`` is a CSS class that no trace string
    can choose (``sev-other`` for an unknown severity)."""

    id: str
    severity: str
    severity_class: str
    title: str
    share: str
    metrics: tuple[tuple[str, str], ...]
    evidence: tuple[EvidenceItem, ...]
    fix: str
    caveats: tuple[str, ...]


@dataclass(frozen=True)
class Findings:
    """The findings section: the cards, most severe first (none: the clean card), and the findings
    withheld for want of GPU work in the trace."""

    cards: tuple[FindingCard, ...]
    withheld: tuple[WithheldFinding, ...]
    annotated: str | None = None
    """The command that writes the annotated Chrome trace these times can be found in."""


def trace_name(files: Sequence[SourceMeta]) -> str:
    """The file's path, or the folder the files share and their count."""
    paths = [f.path for f in files]
    if not paths:
        return "(no source files)"
    if len(paths) == 1:
        return paths[0]
    try:
        common = os.path.commonpath(paths)
    except ValueError:
        common = ""
    return f"{common or '.'} ({len(paths)} files)"


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    """The findings, most severe first (an unknown severity last)."""
    return sorted(findings, key=lambda f: _SEVERITY_RANK.get(f.severity, len(SEVERITIES)))


def severity_class(severity: str) -> str:
    return f"sev-{severity}" if severity in _SEVERITY_RANK else "sev-other"


def _totals(devices: Sequence[DeviceBreakdown]) -> tuple[int, int, int, int]:
    return (
        sum(d.dur_ns for d in devices),
        sum(d.compute_ns for d in devices),
        sum(d.exposed_comm_ns for d in devices),
        sum(d.idle_ns for d in devices),
    )


def header(report: Report) -> Header:
    findings = sorted_findings(report.findings)
    if findings:
        worst = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        verdict = Verdict(severity_class(worst.severity), worst.severity, worst.title + more)
    elif report.withheld_findings:
        n = len(report.withheld_findings)
        verdict = Verdict(
            severity_class("medium"), "withheld", f"{n} finding(s) withheld: the trace lacks too much of its GPU work"
        )
    elif report.devices:
        dur, compute, exposed, idle = _totals(report.devices)
        verdict = Verdict(
            "clean",
            "no findings",
            f"GPU busy {pct(compute + exposed, dur)} of step time: compute {pct(compute, dur)}, "
            f"exposed comm {pct(exposed, dur)}, idle {pct(idle, dur)}",
        )
    else:
        verdict = Verdict("clean", "no GPU activity", "nothing to break down in this trace")
    formats = sorted({f"{s.format} {s.format_version}" if s.format_version else s.format for s in report.source.files})
    ranks = {d.rank for d in report.devices if d.rank is not None}
    stepped = [d for d in report.devices if d.window == "steps"]
    facts = (
        ", ".join(formats) or "no sources",
        f"{len(report.devices)} device(s)" + (f" on {len(ranks)} ranks" if len(ranks) > 1 else ""),
        f"{max(d.steps for d in stepped)} step(s) per device" if stepped else "no step ranges matched",
        *(("incomplete: GPU work is missing (see the step breakdown)",) if report.caveats else ()),
    )
    warnings = sum(len(s.warnings) for s in report.source.files)
    return Header(trace_name(report.source.files), verdict, facts, warnings)


def metric_value(name: str, value: float) -> str:
    """A finding's metric, formatted by the unit its name carries (``_ns``, ``share``, ``_pct``)."""
    if name.endswith("_ns") or "_ns_" in name:
        return format_ns(value)
    if "share" in name or name.endswith(("_frac", "_fraction")):
        return format_share(value)
    if name.endswith(("_pct", "_percent")):
        return f"{value:.1f}%"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def findings(report: Report) -> Findings:
    tl = report.timeline
    drawn = set() if tl is None else {(b.rank, b.device) for b in tl.bars} | {(g.rank, g.device) for g in tl.gaps}
    cards = []
    for f in sorted_findings(report.findings):
        evidence = []
        for ev in f.evidence:
            offset = zoom = None
            on_timeline = ev.device is None or (ev.rank, ev.device) in drawn
            if tl is not None and ev.start_ns is not None and tl.start_ns <= ev.start_ns < tl.end_ns and on_timeline:
                offset = format_ns(ev.start_ns - tl.start_ns)
                end_ns = min(ev.end_ns if ev.end_ns is not None else ev.start_ns, tl.end_ns)
                zoom = f"{(ev.start_ns - tl.start_ns) / 1e6:.6f} {(end_ns - tl.start_ns) / 1e6:.6f}"
            at = None if ev.start_ns is None else trace_time(ev.start_ns)
            evidence.append(EvidenceItem(ev.text, offset, at, zoom))
        cards.append(
            FindingCard(
                id=f.id,
                severity=f.severity,
                severity_class=severity_class(f.severity),
                title=f.title,
                share=format_share(f.share),
                metrics=tuple((k, metric_value(k, v)) for k, v in sorted(f.metrics.items())),
                evidence=tuple(evidence),
                fix=f.fix,
                caveats=f.caveats,
            )
        )
    return Findings(tuple(cards), report.withheld_findings, annotated_command(report.source.files))


def trace_time(ns: int) -> str:
    """An absolute time on the trace's clock, as ns and as a Chrome trace's ``ts`` in µs (exact)."""
    sign, whole = ("-", -ns) if ns < 0 else ("", ns)
    return f"t = {ns} ns, ts {sign}{whole // 1000}.{whole % 1000:03d} µs"


def annotated_command(files: Sequence[SourceMeta]) -> str | None:
    """``traceq convert SOURCE -o NAME.annotated.json.gz`` for a one-file trace; None for a job
    (each rank's file converts on its own)."""
    if len(files) != 1:
        return None
    path = files[0].path
    name = path.rsplit("/", 1)[-1]
    for suffix in (".gz", ".json", ".sqlite", ".nsys-rep", ".parquet", ".db"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return f"traceq convert {path} -o {name or 'trace'}.annotated.json.gz"
