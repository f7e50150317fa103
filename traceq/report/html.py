"""The HTML report: one self-contained, deterministic page drawn from a :class:`Report`.

:func:`render_html` returns the page; sections, in order: findings, step breakdown per device,
idle time by cause (with the longest gaps), the timeline excerpt, top kernels, ranks side by side
with the job's clock alignment, collective skew heatmap and straggler verdict (several ranks or
devices only), MFU (when computed), import statistics, and the source files' metadata.

* **Self-contained**: plotly.js is inlined (about 4.8 MB); ``cdn=True`` links the plotly CDN
  build instead (with its integrity hash).  No other script, stylesheet or font is loaded.
* **Deterministic**: the same report gives the same bytes: fixed element ids, JSON with sorted
  keys, floats from ``repr``, no clock time anywhere.
* **Escaping**: every string from a trace is attacker-controlled.  In HTML it goes through
  :func:`html.escape` (text and attributes); inside chart labels through
  :func:`~traceq.report.html_charts.plot_text`; the chart JSON sits in a
  ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` written as ``\\u``
  escapes (and every non-ASCII character, U+2028/U+2029 included), so no trace string can close
  the element or open markup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from html import escape
from importlib import metadata
from typing import Any, Final

import plotly.offline

from traceq.analyses.model import CAUSES, SEVERITIES, DeviceBreakdown, Finding, Gap, JobAnalysis
from traceq.analyses.timeline import gap_label
from traceq.meta import GpuInfo, SourceMeta
from traceq.report import html_charts as charts
from traceq.report.html_charts import PALETTE, device_label, pct, shorten
from traceq.report.html_template import BOOT_SCRIPT, PAGE, STYLE
from traceq.report.model import Report
from traceq.stats import CategoryCount
from traceq.units import format_ns

PLOTLY_CONFIG: Final[dict[str, Any]] = {
    "displaylogo": False,
    "responsive": True,
    "typesetMath": False,
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    "toImageButtonOptions": {"format": "svg", "filename": "traceq-chart"},
}
"""plotly.js settings: no logo link, no MathJax typesetting of ``$...$`` in trace names."""

LONGEST_GAPS: Final = 10
WINDOW_GAPS: Final = 6
KERNEL_NAME_CHARS: Final = 200
MFU_STEP_ROWS: Final = 100
IMPORT_ROWS: Final = 16
"""Above this many (source, category) rows, the import table shows one row per file and folds the rest."""
OUTLIER_SPREAD: Final = 0.05
"""Ranks whose per-step numbers differ by more than this fraction are highlighted."""
_SEVERITY_RANK: Final = {s: i for i, s in enumerate(SEVERITIES)}


def render_html(report: Report, *, cdn: bool = False) -> str:
    """The report as one HTML page (a ``str``; write it as UTF-8)."""
    name = trace_name(report.source.files)
    figures = {
        "chart-steps": charts.step_breakdown_figure(report),
        "chart-idle": charts.idle_by_cause_figure(report),
        "chart-timeline": charts.timeline_figure(report),
        "chart-ranks": charts.rank_comparison_figure(report),
        "chart-skew": charts.skew_heatmap_figure(report),
        "chart-arrivals": charts.arrivals_figure(report),
    }
    drawn = {k: v for k, v in figures.items() if v is not None}
    sections = [
        ("findings", "Findings", _findings(report)),
        ("breakdown", "Step breakdown", _breakdown(report, "chart-steps" in drawn)),
        ("idle", "Idle by cause", _idle(report, "chart-idle" in drawn)),
        ("timeline", "Timeline", _timeline(report, "chart-timeline" in drawn)),
        ("kernels", "Top kernels", _kernels(report)),
    ]
    if "chart-ranks" in drawn or report.job is not None:
        sections.append(("ranks", "Ranks", _ranks(report, drawn)))
    if report.mfu is not None:
        sections.append(("mfu", "MFU", _mfu(report)))
    sections.append(("import", "Import statistics", _import_stats(report)))
    sections.append(("sources", "Sources", _sources(report.source.files)))
    nav = "".join(f'<a href="#{sid}">{escape(title)}</a>' for sid, title, _ in sections)
    body = "\n".join(
        [
            _header(report, name),
            f'<nav class="toc">{nav}</nav>',
            "<main>",
            *(f'<section id="{sid}">\n<h2>{escape(title)}</h2>\n{html}\n</section>' for sid, title, html in sections),
            "</main>",
            _footer(report),
        ]
    )
    version = _version()
    return PAGE.format(
        generator=escape(f"traceq {version}", quote=True),
        title=escape(f"traceq report: {name}"),
        style=STYLE,
        plotly=_plotly_element(cdn),
        body=body,
        figures=script_json({"config": PLOTLY_CONFIG, "figures": drawn}),
        boot=BOOT_SCRIPT,
    )


def script_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: sorted keys, ASCII only, and no ``<``,
    ``>`` or ``&`` (written as ``\\u003c``, ``\\u003e``, ``\\u0026``)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_json_default
    )
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def cdn_url() -> str:
    """Where the CDN build of the bundled plotly.js version lives."""
    return f"https://cdn.plot.ly/plotly-{plotly.offline.get_plotlyjs_version()}.min.js"


@lru_cache(maxsize=2)
def _plotly_element(cdn: bool) -> str:
    source = plotly.offline.get_plotlyjs()
    if cdn:
        digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
        return (
            f'<script src="{escape(cdn_url(), quote=True)}" integrity="sha256-{digest}" '
            'crossorigin="anonymous" charset="utf-8"></script>'
        )
    # The bundle holds no "</script" today; never let a future one end the element early.
    safe = re.sub(r"</(script)", r"<\\/\1", source, flags=re.IGNORECASE)
    return f"<script>{safe}</script>"


def _version() -> str:
    try:
        return metadata.version("traceq")
    except metadata.PackageNotFoundError:
        return "unknown"


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


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _table(head: Sequence[tuple[str, bool]], rows: Iterable[str], *, cls: str = "") -> str:
    """A table; ``head`` gives each column's (escaped HTML) title and whether it is numeric."""
    cells = "".join(f'<th class="n">{h}</th>' if num else f"<th>{h}</th>" for h, num in head)
    klass = f' class="{cls}"' if cls else ""
    body = "".join(rows)
    return f'<div class="tablewrap"><table{klass}><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table></div>'


def _td(text: str, *, num: bool = False, cls: str = "", title: str | None = None) -> str:
    classes = " ".join(c for c in ("n" if num else "", cls) if c)
    attrs = (f' class="{classes}"' if classes else "") + (f' title="{_e(title)}"' if title is not None else "")
    return f"<td{attrs}>{text}</td>"


def _name_td(name: str, width: int = KERNEL_NAME_CHARS) -> str:
    return _td(_e(shorten(name, width)), cls="name", title=name if len(name) > width else None)


def _swatch(colour: str) -> str:
    return f'<span class="swatch" style="background:{colour}"></span>'


def _chart(div_id: str, drawn: bool, missing: str) -> str:
    return f'<div class="chart" id="{div_id}"></div>' if drawn else f'<p class="note">{escape(missing)}</p>'


def _per_step(d: DeviceBreakdown) -> str:
    return format_ns(d.dur_ns / max(d.steps, 1))


def _totals(devices: Sequence[DeviceBreakdown]) -> tuple[int, int, int, int]:
    return (
        sum(d.dur_ns for d in devices),
        sum(d.compute_ns for d in devices),
        sum(d.exposed_comm_ns for d in devices),
        sum(d.idle_ns for d in devices),
    )


def _sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: _SEVERITY_RANK.get(f.severity, len(SEVERITIES)))


def _severity_class(severity: str) -> str:
    return f"sev-{severity}" if severity in _SEVERITY_RANK else "sev-other"


def _header(report: Report, name: str) -> str:
    findings = _sorted_findings(report.findings)
    if findings:
        worst = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        verdict = (
            f'<span class="pill {_severity_class(worst.severity)}">{_e(worst.severity)}</span>'
            f"{_e(worst.title)}{_e(more)}"
        )
    elif report.devices:
        dur, compute, exposed, idle = _totals(report.devices)
        verdict = (
            '<span class="pill clean">no findings</span>'
            f"GPU busy {pct(compute + exposed, dur)} of step time: compute {pct(compute, dur)}, "
            f"exposed comm {pct(exposed, dur)}, idle {pct(idle, dur)}"
        )
    else:
        verdict = '<span class="pill clean">no GPU activity</span>nothing to break down in this trace'
    formats = sorted({f"{s.format} {s.format_version}" if s.format_version else s.format for s in report.source.files})
    ranks = {d.rank for d in report.devices if d.rank is not None}
    stepped = [d for d in report.devices if d.window == "steps"]
    facts = [
        _e(", ".join(formats) or "no sources"),
        f"{len(report.devices)} device(s)" + (f" on {len(ranks)} ranks" if len(ranks) > 1 else ""),
        f"{max(d.steps for d in stepped)} step(s) per device" if stepped else "no step ranges matched",
    ]
    warnings = sum(len(s.warnings) for s in report.source.files)
    if warnings:
        facts.append(f'<a href="#sources" style="color:#fedf89">{warnings} import warning(s)</a>')
    return (
        '<header class="top">\n<div class="brand">traceq report</div>\n'
        f'<h1>{_e(name)}</h1>\n<p class="verdict">{verdict}</p>\n'
        f'<p class="facts">{" · ".join(facts)}</p>\n'
        "</header>"
    )


def _footer(report: Report) -> str:
    return (
        f"<footer>traceq {_e(_version())} · report schema v{report.schema_version} · every number is defined in "
        "traceq's docs/analyses.md; this page is described in docs/report.md.</footer>"
    )


def _metric_value(name: str, value: float) -> str:
    """A finding's metric, formatted by the unit its name carries (``_ns``, ``share``, ``_pct``)."""
    if name.endswith("_ns") or "_ns_" in name:
        return format_ns(value)
    if "share" in name or name.endswith(("_frac", "_fraction")):
        return f"{100 * value:.1f}%"
    if name.endswith(("_pct", "_percent")):
        return f"{value:.1f}%"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def _findings(report: Report) -> str:
    findings = _sorted_findings(report.findings)
    if not findings:
        return (
            '<div class="cards"><article class="finding clean"><div class="head"><span class="badge">clean</span>'
            '<h3>No findings</h3></div><p class="fix">No rule fired on this trace (launch-bound, host sync, '
            "input stall, exposed communication, straggler, memory-bound and small kernels; thresholds in "
            "docs/findings.md). The breakdown below shows where the step time went.</p></article></div>"
        )
    tl = report.timeline
    drawn = set() if tl is None else {(b.rank, b.device) for b in tl.bars} | {(g.rank, g.device) for g in tl.gaps}
    cards = []
    for f in findings:
        metrics = "".join(
            f"<div><dt>{_e(k)}</dt><dd>{_e(_metric_value(k, v))}</dd></div>" for k, v in sorted(f.metrics.items())
        )
        evidence = []
        for ev in f.evidence:
            where = ""
            on_timeline = ev.device is None or (ev.rank, ev.device) in drawn
            if tl is not None and ev.start_ns is not None and tl.start_ns <= ev.start_ns < tl.end_ns and on_timeline:
                where = f' <a href="#timeline">(on the timeline at +{_e(format_ns(ev.start_ns - tl.start_ns))})</a>'
            evidence.append(f"<li>{_e(ev.text)}{where}</li>")
        cards.append(
            f'<article class="finding {_severity_class(f.severity)}" id="finding-{_e(f.id)}">'
            f'<div class="head"><span class="badge">{_e(f.severity)}</span><code>{_e(f.id)}</code>'
            f'<h3>{_e(f.title)}</h3><span class="share">{100 * f.share:.1f}%</span></div>'
            + (f'<dl class="metrics">{metrics}</dl>' if metrics else "")
            + (f"<h4>Evidence</h4><ul>{''.join(evidence)}</ul>" if evidence else "")
            + f'<p class="fix"><strong>Fix:</strong> {_e(f.fix)}</p></article>'
        )
    return (
        f'<p class="lead">{len(findings)} finding(s), most severe first; the percentage is the share of step '
        "(or GPU) time the cause takes on the worst device.</p>\n" + f'<div class="cards">{"".join(cards)}</div>'
    )


def _breakdown(report: Report, drawn: bool) -> str:
    if not report.devices:
        return '<p class="note">No GPU activity in this trace: nothing to break down.</p>'
    lead = (
        '<p class="lead">Every step window of every device splits into compute, exposed communication (no compute '
        "beside it) and idle time, split by the cause of its gaps; the parts add up to the step time.</p>"
    )
    rows = []
    for d in report.devices:
        hidden = pct(d.comm_ns - d.exposed_comm_ns, d.comm_ns) if d.comm_ns else "-"
        rows.append(
            "<tr>"
            + _td(_e(device_label(d.rank, d.device)))
            + _td(str(d.steps) if d.window == "steps" else "-", num=True)
            + _td(_per_step(d), num=True)
            + _td(pct(d.compute_ns, d.dur_ns), num=True)
            + _td(pct(d.exposed_comm_ns, d.dur_ns), num=True)
            + _td(pct(d.idle_ns, d.dur_ns), num=True)
            + _td(pct(d.comm_ns, d.dur_ns), num=True)
            + _td(hidden, num=True)
            + _td(f"{d.kernels:,}", num=True)
            + "</tr>"
        )
    head = [
        ("device", False),
        ("steps", True),
        ("step time", True),
        (_swatch(PALETTE["compute"]) + "compute", True),
        (_swatch(PALETTE["comm"]) + "exposed comm", True),
        ("idle", True),
        ("comm (all)", True),
        ("comm hidden", True),
        ("kernels", True),
    ]
    note = ""
    if any(d.window == "activity" for d in report.devices):
        note = (
            '<p class="note">steps "-": no step range matched the step pattern; the window is the device\'s first '
            "to last activity.</p>"
        )
    if len(report.devices) > charts.MAX_STEP_CHART_DEVICES:
        note += (
            f'<p class="note">The chart shows the first {charts.MAX_STEP_CHART_DEVICES} of '
            f"{len(report.devices)} devices; the table lists them all.</p>"
        )
    table = _table(head, rows)
    share_note = (
        '<p class="note">Step time is the mean per step window; compute, exposed comm, idle and comm (all) are '
        "shares of step time; comm hidden is the share of communication that overlapped compute. Step windows: "
        f"CPU ranges matching <code>{_e(report.step_pattern)}</code>.</p>"
    )
    return lead + _chart("chart-steps", drawn, "No step windows to draw.") + table + share_note + note


def _gap_row(g: Gap) -> dict[str, Any]:
    return {
        "cause": g.cause,
        "start_ns": g.start_ns,
        "next_name": g.next.name,
        "launch_name": g.launch.name if g.launch else None,
        "launch_start_ns": g.launch.start_ns if g.launch else None,
        "launch_end_ns": g.launch.end_ns if g.launch else None,
        "sync_name": g.sync.name if g.sync else None,
        "sync_end_ns": g.sync.end_ns if g.sync else None,
    }


def _idle(report: Report, drawn: bool) -> str:
    if not report.devices:
        return '<p class="note">No GPU activity in this trace.</p>'
    lead = (
        '<p class="lead">A gap is a stretch with no activity on any stream of a device; its cause comes from the '
        "CPU call that launched the work ending it: <b>input</b> (waited for a host-to-device copy), <b>sync</b> "
        "(the CPU blocked on the GPU, then had to refill the queue), <b>launch</b> (the CPU was late), "
        "<b>other</b> (the work was queued; the GPU waited on an event, another stream or rank), "
        "<b>unknown</b> (no launch recorded). Idle time outside any gap lies before a window's first activity "
        "or after its last.</p>"
    )
    head: list[tuple[str, bool]] = [("device", False), ("idle", True)]
    head += [(_swatch(PALETTE[c]) + c, True) for c in CAUSES]
    head += [(_swatch(PALETTE["edge"]) + "outside gaps", True), ("idle per step", True), ("gaps", True)]
    rows = []
    for d in report.devices:
        edge = d.idle_ns - sum(d.idle_by_cause_ns.values())
        rows.append(
            "<tr>"
            + _td(_e(device_label(d.rank, d.device)))
            + _td(pct(d.idle_ns, d.dur_ns), num=True)
            + "".join(_td(pct(d.idle_by_cause_ns.get(c, 0), d.dur_ns), num=True) for c in CAUSES)
            + _td(pct(edge, d.dur_ns), num=True)
            + _td(format_ns(d.idle_ns / max(d.steps, 1)), num=True)
            + _td(f"{sum(d.gaps_by_cause.values()):,}", num=True)
            + "</tr>"
        )
    out = lead + _chart("chart-idle", drawn, "No idle time inside the step windows.") + _table(head, rows)
    out += '<p class="note">Shares of step time; gaps counts the gaps that overlap a step window.</p>'
    if report.gaps:
        total = report.gap_count
        gap_rows = [
            "<tr>"
            + _td(format_ns(g.dur_ns), num=True)
            + _td(_e(device_label(g.rank, g.device)))
            + _td(_swatch(PALETTE.get(g.cause, PALETTE["unknown"])) + _e(g.cause), cls="nowrap")
            + _td(_e(gap_label(_gap_row(g))), cls="name")
            + _name_td(g.next.name, 120)
            + "</tr>"
            for g in report.gaps[:LONGEST_GAPS]
        ]
        out += f"<h4>Longest gaps ({min(LONGEST_GAPS, len(report.gaps))} of {total:,})</h4>"
        out += _table(
            [("length", True), ("device", False), ("cause", False), ("why", False), ("ended by", False)], gap_rows
        )
    return out


def _timeline(report: Report, drawn: bool) -> str:
    tl = report.timeline
    if tl is None or not drawn:
        why = "no GPU activity in this trace" if not report.devices else "this report was built without one"
        return f'<p class="note">No timeline: {why}.</p>'
    steps = f"{_e(tl.steps[0])} to {_e(tl.steps[-1])}" if len(tl.steps) > 1 else _e(tl.steps[0])
    lead = (
        f'<p class="lead">{steps} ({format_ns(tl.end_ns - tl.start_ns)}): consecutive steps around the median '
        "step, for the first devices. One row per CUDA stream; above each device's streams, its idle gaps coloured "
        "by cause and labelled with the CPU call behind them (also shaded across the device's streams); dotted "
        "lines mark step starts. Hover for names, drag to zoom, double-click to reset.</p>"
    )
    notes = ""
    if tl.bars_total > len(tl.bars):
        notes += (
            f'<p class="note warn">Downsampled: the {len(tl.bars):,} longest of {tl.bars_total:,} activities in this '
            "window are drawn; shorter ones are left out.</p>"
        )
    if tl.gaps_total > len(tl.gaps):
        notes += (
            f'<p class="note warn">Downsampled: the {len(tl.gaps):,} longest of {tl.gaps_total:,} idle gaps in this '
            "window are drawn.</p>"
        )
    return lead + _chart("chart-timeline", True, "") + notes + _window_gaps(report)


def _window_gaps(report: Report) -> str:
    """The longest gaps of the timeline window, with where they are and why."""
    tl = report.timeline
    if tl is None or not tl.gaps:
        return ""
    longest = sorted(tl.gaps, key=lambda g: (g.start_ns - g.end_ns, g.start_ns))[:WINDOW_GAPS]
    rows = [
        "<tr>"
        + _td("+" + format_ns(g.start_ns - tl.start_ns), num=True)
        + _td(format_ns(g.end_ns - g.start_ns), num=True)
        + _td(_e(device_label(g.rank, g.device)))
        + _td(_swatch(PALETTE.get(g.cause, PALETTE["unknown"])) + _e(g.cause), cls="nowrap")
        + _td(_e(g.label), cls="name")
        + "</tr>"
        for g in sorted(longest, key=lambda g: (g.start_ns, g.device))
    ]
    head = [("at", True), ("length", True), ("device", False), ("cause", False), ("why", False)]
    return f"<h4>Longest gaps in this window ({len(longest)} of {len(tl.gaps):,})</h4>" + _table(head, rows)


def _kernels(report: Report) -> str:
    if not report.kernels:
        return '<p class="note">No kernels in this trace.</p>'
    rows = [
        "<tr>"
        + _td(str(i), num=True)
        + _name_td(k.name)
        + _td(f"{k.count:,}", num=True)
        + _td(format_ns(k.total_ns), num=True)
        + _td(f"{100 * k.share:.1f}%", num=True)
        + _td(format_ns(k.mean_ns), num=True)
        + _td(format_ns(k.max_ns), num=True)
        + "</tr>"
        for i, k in enumerate(report.kernels, 1)
    ]
    head = [
        ("#", True),
        ("kernel", False),
        ("count", True),
        ("total", True),
        ("share of kernel time", True),
        ("mean", True),
        ("max", True),
    ]
    return (
        f'<p class="lead">The {len(report.kernels)} kernels with the most GPU time over the whole trace (all devices), '
        "by name.</p>" + _table(head, rows)
    )


def _ranks(report: Report, drawn: dict[str, Any]) -> str:
    devices = report.devices

    def per_step(value: Callable[[DeviceBreakdown], int]) -> list[float]:
        return [value(d) / max(d.steps, 1) for d in devices]

    # (title, values, which end stands out: the straggler has the most compute and the least exposed comm)
    columns: list[tuple[str, list[float], Callable[[Sequence[float]], float]]] = [
        ("step time", per_step(lambda d: d.dur_ns), max),
        (_swatch(PALETTE["compute"]) + "compute", per_step(lambda d: d.compute_ns), max),
        (_swatch(PALETTE["comm"]) + "exposed comm", per_step(lambda d: d.exposed_comm_ns), min),
        ("idle", per_step(lambda d: d.idle_ns), max),
    ]
    for c in CAUSES:
        values = per_step(charts.cause_value(c))
        if any(values):
            columns.append((_swatch(PALETTE[c]) + c, values, max))
    rows = []
    for i, d in enumerate(devices):
        cells = "".join(_td(format_ns(v[i]), num=True, cls=_outlier(v, i, pick)) for _, v, pick in columns)
        rows.append("<tr>" + _td(_e(device_label(d.rank, d.device))) + _td(str(d.steps), num=True) + cells + "</tr>")
    head = [("device", False), ("steps", True), *((title, True) for title, _, _ in columns)]
    side_by_side = (
        '<p class="lead">Mean time per step on each rank. In a synchronous job every rank waits for the slowest, '
        "so step times match: the straggler is the rank with the most compute and the least exposed communication "
        "(the others wait for it inside their collectives).</p>"
        + _chart("chart-ranks", "chart-ranks" in drawn, "No step windows to compare.")
        + _table(head, rows)
        + f'<p class="note">Per step. Highlighted where the ranks differ by more than {OUTLIER_SPREAD:.0%}: the '
        "most step time, compute, idle and idle per cause, and the least exposed communication.</p>"
    )
    if report.job is None:
        return side_by_side
    return _job(report.job, drawn) + "<h3>Step time per rank</h3>" + side_by_side


CLOCK_METHOD_TEXT: Final = {
    "single_clock": "one clock: the ranks come from one file",
    "anchor": "the traces' own clock anchors (Kineto baseTimeNanoseconds, nsys session start)",
    "collective_end": "the end of the first collective every rank shares",
    "none": "not aligned",
}


def _job(job: JobAnalysis, drawn: dict[str, Any]) -> str:
    """The job across ranks: verdict, clock alignment, skew heatmap, arrivals and the per-rank table."""
    labels = charts.job_labels(job)
    slow = charts.highlighted_rank(job)
    note, _, caution = job.note.partition("; caution: ")
    word, sep, rest = note.partition(": ")
    if not sep or word not in ("slow rank", "slow link", "skewed", "balanced"):
        word, rest = job.verdict.replace("_", " "), note
    lead = f'<p class="lead"><b>{_e(word)}</b>: {_e(rest)}</p>'
    if caution:
        lead += f'<p class="note warn">Caution: {_e(caution)}</p>'
    clock = job.clock
    facts = [
        ("clocks aligned by", CLOCK_METHOD_TEXT.get(clock.method, clock.method)),
        ("residual skew", format_ns(clock.residual_skew_ns) if clock.residual_skew_ns is not None else "-"),
        ("collectives matched", f"{job.collectives_total:,}"),
        ("communication kernels", f"{job.comm_calls:,} ({job.unmatched_calls:,} unmatched)"),
        (
            "median arrival skew",
            format_ns(job.median_arrival_skew_ns) if job.median_arrival_skew_ns is not None else "-",
        ),
        ("median transfer", format_ns(job.median_transfer_ns) if job.median_transfer_ns is not None else "-"),
        ("waiting share of collective time", f"{100 * job.wait_share:.1f}%"),
        ("exposed comm (median rank)", f"{100 * job.exposed_comm_share:.1f}%"),
    ]
    out = lead + '<dl class="metrics">' + "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in facts)
    out += "</dl>"
    if clock.method in ("collective_end", "none") and job.verdict != "no_collectives":
        out += f'<p class="note">Clocks: {_e(clock.note)}.</p>'
    if len(clock.offsets_ns) > 1:
        offsets = [
            "<tr>" + _td(_e(src), cls="name") + _td(f"{ns:,}", num=True) + "</tr>"
            for src, ns in sorted(clock.offsets_ns.items())
        ]
        out += (
            f"<details><summary>Clock offsets of {len(offsets)} sources (ns added to put them on the clock of "
            f"<code>{_e(clock.reference or '-')}</code>)</summary>"
            + _table([("source", False), ("offset (ns)", True)], offsets)
            + "</details>"
        )
    if not job.collectives_total:
        return out
    more = (
        f'<p class="note">The first {len(job.collectives):,} of {job.collectives_total:,} collectives, in time '
        "order.</p>"
        if job.collectives_total > len(job.collectives)
        else ""
    )
    out += (
        '<p class="lead">Each cell is how long a rank waited inside a collective for the last rank to arrive '
        "(its kernel start to the last rank's start, on the aligned clock); the rank that arrives last waits "
        "nothing. A rank that is always last shows as a white row among coloured ones.</p>"
        + _chart("chart-skew", "chart-skew" in drawn, "No collectives to draw.")
        + more
        + _chart("chart-arrivals", "chart-arrivals" in drawn, "No collectives to draw.")
    )
    rows = []
    for i, r in enumerate(job.ranks):
        hi = "hi" if i == slow else ""
        steps = max(r.steps, 1)
        sign = "+" if r.compute_excess_ns_per_step >= 0 else "−"
        rows.append(
            "<tr>"
            + _td(_e(labels[i] + (" (straggler)" if i == job.straggler else "")), cls=hi)
            + _td(format_ns(r.compute_ns_per_step), num=True, cls=hi)
            + _td(sign + format_ns(abs(r.compute_excess_ns_per_step)), num=True, cls=hi)
            + _td(format_ns(r.exposed_comm_ns_per_step), num=True)
            + _td(format_ns(r.exposed_wait_ns / steps), num=True)
            + _td(f"{r.last_arrivals:,} of {r.collectives:,}", num=True, cls=hi)
            + _td(f"{r.expected_last_arrivals:.1f}", num=True)
            + _td(f"{r.last_arrival_bound:.2g}", num=True)
            + _td(f"{100 * r.wait_caused_share:.1f}%", num=True, cls=hi)
            + "</tr>"
        )
    head = [
        ("device", False),
        ("compute per step", True),
        ("vs median", True),
        ("exposed comm per step", True),
        ("own wait per step", True),
        ("arrived last", True),
        ("by chance", True),
        ("chance bound", True),
        ("costs the others", True),
    ]
    return (
        out
        + _table(head, rows)
        + '<p class="note">Own wait: the part of its waiting with none of its own compute beside it. By chance: '
        "the last arrivals expected if every rank were equally likely to be last; chance bound: a bound on the "
        "probability of arriving last this often by chance. Costs the others: the median, over the other ranks, "
        "of the wait it causes them with nothing to compute, as a share of their step time. Highlighted: the "
        "straggler, else the rank that costs the others most. Definitions in traceq's docs/multi-rank.md.</p>"
    )


def _outlier(values: Sequence[float], i: int, pick: Callable[[Sequence[float]], float]) -> str:
    low, high = min(values), max(values)
    return "hi" if high > low * (1 + OUTLIER_SPREAD) and values[i] == pick(values) else ""


def _mfu(report: Report) -> str:
    m = report.mfu
    if m is None:
        return ""
    facts = [
        ("mean MFU", f"{100 * m.mean_mfu:.1f}%"),
        ("mean HFU", f"{100 * m.mean_hfu:.1f}%" if m.mean_hfu is not None else "-"),
        ("peak per GPU", f"{m.peak_flops_per_gpu / 1e12:,.1f} TFLOP/s"),
        ("peak from", m.peak_source),
        ("GPUs", f"{m.gpus:,}"),
        ("tokens per step", f"{m.tokens_per_step:,.0f}"),
        ("model FLOPs per token", f"{m.model_flops_per_token:.4g}"),
        (
            "hardware FLOPs per token",
            f"{m.hardware_flops_per_token:.4g}" if m.hardware_flops_per_token is not None else "-",
        ),
    ]
    summary = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in facts)
    rows = [
        "<tr>"
        + _td(_e(device_label(s.rank, s.device)))
        + _td(str(s.step) if s.step is not None else "-", num=True)
        + _td(format_ns(s.dur_ns), num=True)
        + _td(f"{100 * s.mfu:.1f}%", num=True)
        + _td(f"{100 * s.hfu:.1f}%" if s.hfu is not None else "-", num=True)
        + "</tr>"
        for s in m.steps[:MFU_STEP_ROWS]
    ]
    more = (
        f'<p class="note">First {MFU_STEP_ROWS} of {len(m.steps):,} step windows.</p>'
        if len(m.steps) > MFU_STEP_ROWS
        else ""
    )
    return (
        '<p class="lead">Model FLOPs utilisation: the model\'s FLOPs per step over the time the step took, as a share '
        "of the GPUs' peak (HFU counts recomputation too).</p>"
        f'<dl class="metrics">{summary}</dl>'
        + _table(
            [("device", False), ("step", True), ("step time", True), ("MFU", True), ("HFU", True)],
            rows,
        )
        + more
    )


def _import_stats(report: Report) -> str:
    counts = report.source.import_stats
    if not counts:
        return '<p class="note">No import statistics recorded.</p>'
    head = [
        ("source", False),
        ("category", False),
        ("events", True),
        ("rows", True),
        ("skipped", True),
        ("skipped by reason", False),
    ]
    lead = (
        '<p class="lead">What each importer read, per source category: every event became a row or was skipped '
        "for the reason given (events = rows + skipped).</p>"
    )
    rows = [_count_row(c.source, c.category, [c]) for c in counts]
    by_source: dict[str, list[CategoryCount]] = {}
    for c in counts:
        by_source.setdefault(c.source, []).append(c)
    total = _count_row("total", "", counts, cls="total")
    if len(rows) <= IMPORT_ROWS or len(by_source) < 2:
        return lead + _table(head, [*rows, total])
    summary = [_count_row(src, f"{len(cs)} categories", cs) for src, cs in by_source.items()]
    return (
        lead
        + _table(head, [*summary, total])
        + f"<details><summary>Per category ({len(rows)} rows)</summary>"
        + _table(head, rows)
        + "</details>"
    )


def _count_row(source: str, category: str, counts: Sequence[CategoryCount], *, cls: str = "") -> str:
    skipped: dict[str, int] = {}
    for c in counts:
        for reason, n in c.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
    klass = f' class="{cls}"' if cls else ""
    return (
        f"<tr{klass}>"
        + _td(_e(source), cls="" if cls else "name")
        + _td(_e(category), cls="" if cls else "name")
        + _td(f"{sum(c.events for c in counts):,}", num=True)
        + _td(f"{sum(c.rows for c in counts):,}", num=True)
        + _td(f"{sum(skipped.values()):,}", num=True)
        + _td(_e(", ".join(f"{k}: {v:,}" for k, v in sorted(skipped.items()))))
        + "</tr>"
    )


def _gpu_summary(gpus: Sequence[GpuInfo]) -> str:
    groups: dict[str, int] = {}
    for g in gpus:
        details = [
            f"{g.sm_count} SMs" if g.sm_count is not None else "",
            f"{g.memory_bytes / 2**30:.1f} GiB" if g.memory_bytes is not None else "",
            f"sm {g.compute_capability}" if g.compute_capability else "",
        ]
        extra = ", ".join(x for x in details if x)
        key = (g.name or "unnamed GPU") + (f" ({extra})" if extra else "")
        groups[key] = groups.get(key, 0) + 1
    return "; ".join(f"{n} × {key}" for key, n in groups.items()) or "-"


def _sources(files: Sequence[SourceMeta]) -> str:
    if not files:
        return '<p class="note">No source files.</p>'
    rows = [
        "<tr>"
        + _td(_e(s.path), cls="name")
        + _td(_e(s.format))
        + _td(_e(s.format_version or "-"))
        + _td(_e(s.producer or "-"))
        + _td(str(s.rank) if s.rank is not None else "-", num=True)
        + _td(str(s.world_size) if s.world_size is not None else "-", num=True)
        + _td(_e(_gpu_summary(s.gpus)))
        + _td(str(len(s.warnings)), num=True, cls="hi" if s.warnings else "")
        + "</tr>"
        for s in files
    ]
    head = [
        ("file", False),
        ("format", False),
        ("version", False),
        ("producer", False),
        ("rank", True),
        ("world size", True),
        ("GPUs", False),
        ("warnings", True),
    ]
    out = '<p class="lead">What each file says about itself.</p>' + _table(head, rows)
    warnings = [f"<li><code>{_e(s.path)}</code>: {_e(w)}</li>" for s in files for w in s.warnings]
    if warnings:
        out += f'<h4>Warnings</h4><ul class="warnings">{"".join(warnings)}</ul>'
    for s in files:
        props = [
            "<tr>" + _td(_e(k), cls="name") + _td(_e(v), cls="name") + "</tr>" for k, v in sorted(s.properties.items())
        ]
        if s.clock_offset_ns is not None:
            props.insert(0, "<tr>" + _td("clock offset (ns to Unix epoch)") + _td(f"{s.clock_offset_ns:,}") + "</tr>")
        if props:
            out += (
                f"<details><summary>Properties of <code>{_e(s.path)}</code> ({len(props)})</summary>"
                + _table([("key", False), ("value", False)], props)
                + "</details>"
            )
    return out
