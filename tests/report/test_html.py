"""The HTML report: sections, determinism, self-containment and escaping of hostile trace strings."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Final

import plotly.offline
import pytest

import traceq
from traceq.analyses import Options, analyze
from traceq.analyses.model import Evidence, Finding, Mfu, MfuStep
from traceq.analyses.timeline import timeline_excerpt
from traceq.meta import GpuInfo, SourceMeta
from traceq.report.html.chart_style import plot_text
from traceq.report.html.page import cdn_url, render_html, script_json
from traceq.report.model import Report
from traceq.stats import CategoryCount, ImportStats
from traceq.trace import Trace, TraceMeta

from ..builders import api, kernel, launch, memcpy, step, table, trace

HOSTILE: Final = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "\"'><svg onload=alert(1)>",
    "</script><script>alert(2)</script>",
    "<!--",
)
FILE_NAME: Final = "runs/\"'><svg onload=alert(1)>/<script>alert(1)</script>.pt.trace.json"
STEP_PATTERN: Final = r"^step\d+ .*$"


def hostile_trace() -> Trace:
    """Two steps of kernels, launches and ranges named with :data:`HOSTILE` strings."""
    rows = [
        step(0, 5_000, name=f"step1 {HOSTILE[0]}"),
        step(5_000, 10_000, name=f"step2 {HOSTILE[3]}"),
        step(0, 10_000, name=HOSTILE[4]),
    ]
    t = 100
    for i in range(8):
        evil = HOSTILE[i % len(HOSTILE)]
        rows.append(api(evil, t - 50, t - 20, corr=i + 1))
        rows.append(kernel(t, t + 400 + 50 * i, f"k{i} {evil}", corr=i + 1))
        t += 1_100
    rows.append(api("cudaStreamSynchronize", t - 500, t - 400))
    rows.append(api(HOSTILE[1], t - 300, t - 200, corr=99))
    rows.append(memcpy(t, t + 300, corr=99))
    events = table(*rows, source=FILE_NAME)
    meta = SourceMeta(
        path=FILE_NAME,
        format="kineto-json",
        format_version=HOSTILE[4],
        producer=HOSTILE[2],
        rank=None,
        gpus=(GpuInfo(device=0, name=HOSTILE[1], sm_count=132),),
        properties={HOSTILE[0]: HOSTILE[1], "host": HOSTILE[3]},
        warnings=(HOSTILE[3],),
    )
    stats = ImportStats.of(
        [
            CategoryCount(
                source=FILE_NAME, category=HOSTILE[2], events=len(rows) + 2, rows=len(rows), skipped={HOSTILE[0]: 2}
            ),
        ]
    )
    return Trace(events=events, import_stats=stats, meta=TraceMeta((meta,)))


def hostile_findings() -> tuple[Finding, ...]:
    return (
        Finding(
            id=HOSTILE[2],
            severity="high",
            title=f"Launch-bound {HOSTILE[0]}",
            share=0.5,
            metrics={f"{HOSTILE[1]}_ns": 1200.0, "idle_launch_share": 0.5},
            evidence=tuple(Evidence(text=f"{h} evidence", start_ns=200, end_ns=300, name=h) for h in HOSTILE),
            fix=f"Do not name kernels {HOSTILE[3]}",
        ),
        Finding(
            id="odd",
            severity=HOSTILE[0],
            title=HOSTILE[4],
            share=0.1,
            metrics={},
            evidence=(),
            fix=HOSTILE[1],
        ),
    )


def hostile_report() -> Report:
    trace = hostile_trace()
    analysis = analyze(trace.events, Options(step_pattern=STEP_PATTERN))
    return dataclasses.replace(
        traceq.report(trace, step_pattern=STEP_PATTERN),
        findings=hostile_findings(),
        timeline=timeline_excerpt(trace.events, analysis),
    )


def sample_report(path: Path, **kw: Any) -> Report:
    """The report ``traceq.report`` builds, with the timeline excerpt made here (so the test does not
    depend on how the API wires it)."""
    trace = traceq.load(path)
    report = traceq.report(trace, **kw)
    return dataclasses.replace(report, timeline=timeline_excerpt(trace.events, traceq.analyze(trace)))


class Tags(HTMLParser):
    """Every start tag (with its attributes) and comment of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.comments: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    return tags


def figures(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="traceq-figures">(.*?)</script>', page, re.S)
    assert match is not None
    payload: dict[str, Any] = json.loads(match.group(1))
    return payload


SECTIONS: Final = ("findings", "breakdown", "idle", "timeline", "kernels", "operators", "phases", "import", "sources")


@pytest.fixture(scope="module")
def nsys_page(samples: Path) -> str:
    return render_html(sample_report(samples / "training_step.nsys.sqlite"))


# --- sections ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ["training_step.nsys.sqlite", "training_step.pt.trace.json.gz", "ranks"])
def test_every_section_is_present_in_order(samples: Path, sample: str) -> None:
    page = render_html(sample_report(samples / sample), cdn=True)
    ids = re.findall(r'<section id="([a-z]+)">', page)
    expected = list(SECTIONS)
    if sample == "ranks":
        expected.insert(7, "ranks")
    assert ids == expected
    charts = set(figures(page)["figures"])
    assert {"chart-steps", "chart-idle", "chart-timeline"} <= charts
    assert ("chart-ranks" in charts) == (sample == "ranks")
    for chart in charts:
        assert page.count(f'<div class="chart" id="{chart}"></div>') == 1
    imports = page[page.index('<section id="import">') : page.index('<section id="sources">')]
    assert '<td class="name">CUPTI_ACTIVITY_KIND_KERNEL</td>' in imports or '<td class="name">kernel</td>' in imports
    assert '<tr class="total"><td>total</td>' in imports
    assert ("<summary>Per category (48 rows)</summary>" in imports) == (sample == "ranks")
    sources = page[page.index('<section id="sources">') :]
    assert "NVIDIA H100 80GB HBM3 (132 SMs, 79.2 GiB, sm 9.0)" in sources


def test_the_ranks_comparison_puts_the_straggler_first_in_compute(samples: Path) -> None:
    page = render_html(sample_report(samples / "ranks"), cdn=True)
    ranks = page[page.index("<h3>Step time per rank</h3>") : page.index('<section id="import">')]
    assert ranks.count("<tr>") == 1 + 4  # header and one row per rank
    rows = re.findall(r"<tr><td>(rank \d · GPU \d)</td>(.*?)</tr>", ranks)
    highlighted = {label: cells.count('class="n hi"') for label, cells in rows}
    assert highlighted["rank 2 · GPU 2"] >= 2  # the most compute and the least exposed comm
    fig = figures(page)["figures"]["chart-ranks"]
    assert [t["name"] for t in fig["data"]][:2] == ["compute", "exposed comm"]
    assert fig["data"][0]["y"] == [f"rank {i} · GPU {i}" for i in range(4)]


def test_findings_come_first_most_severe_first_with_evidence_and_fix(samples: Path) -> None:
    report = sample_report(samples / "training_step.nsys.sqlite")
    gap = report.gaps[0]
    findings = (
        Finding("small_kernels", "low", "Small kernels: 12% of GPU time", 0.12, {"kernels": 40.0}, (), "Fuse them."),
        Finding(
            "input_stall",
            "high",
            "Input stall: 7.7% of step time",
            0.077,
            {"idle_input_ns": 1_023_977.0, "idle_input_share": 0.077},
            (
                Evidence(
                    text="GPU 0 waited 359 µs for a copy",
                    rank=gap.rank,
                    device=0,
                    start_ns=gap.start_ns,
                    end_ns=gap.end_ns,
                ),
                Evidence(text="GPU 5 is not on the timeline", rank=gap.rank, device=5, start_ns=gap.start_ns),
            ),
            "Pin memory and prefetch.",
        ),
    )
    page = render_html(dataclasses.replace(report, findings=findings), cdn=True)
    section = page[page.index('<section id="findings">') : page.index('<section id="breakdown">')]
    assert section.index("input_stall") < section.index("small_kernels")
    assert '<article class="finding sev-high" id="finding-input_stall">' in section
    assert "<dt>idle_input_ns</dt><dd>1.02 ms</dd>" in section
    assert "<dt>idle_input_share</dt><dd>7.7%</dd>" in section
    assert "<li>GPU 0 waited 359 µs for a copy" in section and section.count('href="#timeline"') == 1
    # Every timed piece of evidence gives its absolute trace time, for Perfetto and the nsys GUI.
    absolute = f"(t = {gap.start_ns} ns, ts {gap.start_ns // 1000}.{gap.start_ns % 1000:03d} µs)"
    assert f'<li>GPU 5 is not on the timeline <span class="note">{absolute}</span></li>' in section
    assert section.count(absolute) == 2 and "annotated.json.gz</code>) show them." in section
    assert "<strong>Fix:</strong> Pin memory and prefetch." in section
    header = page[: page.index("</header>")]
    assert 'class="pill sev-high">high</span>Input stall: 7.7% of step time (and 1 more)' in header


def test_a_clean_report_says_no_findings(samples: Path) -> None:
    nsys_page = render_html(sample_report(samples / "clean_step.nsys.sqlite"))
    section = nsys_page[nsys_page.index('<section id="findings">') : nsys_page.index('<section id="breakdown">')]
    assert "<h3>No findings</h3>" in section
    assert 'class="pill clean">no findings</span>GPU busy' in nsys_page


def test_timeline_notes_downsampling(samples: Path) -> None:
    trace = traceq.load(samples / "training_step.nsys.sqlite")
    report = traceq.report(trace)
    excerpt = timeline_excerpt(trace.events, traceq.analyze(trace), max_bars=50)
    assert excerpt is not None
    page = render_html(dataclasses.replace(report, timeline=excerpt), cdn=True)
    assert f"Downsampled: the 50 longest of {excerpt.bars_total:,} activities" in page
    assert excerpt.cpu_total > len(excerpt.cpu) == 50
    assert f"Downsampled: the 50 longest of {excerpt.cpu_total:,} CPU spans" in page
    fig = figures(page)["figures"]["chart-timeline"]
    assert sum(len(t["x"]) for t in fig["data"] if t["name"] in ("kernel", "comm kernel", "memcpy / memset")) == 50
    assert "Downsampled" not in render_html(sample_report(samples / "training_step.nsys.sqlite"), cdn=True)


def test_the_timelines_cpu_rows_show_the_users_own_data_loading_ranges(tmp_path: Path) -> None:
    # A range of the user's own loader (named by --input-pattern) is drawn as data loading on the
    # launching thread's row, as the attribution counts it.
    loader = {**step(0, 400, 0), "name": "fetch_batch"}
    rows = (step(0, 1000, 1), loader, launch(450, 460, corr=1), kernel(500, 900, "gemm", corr=1))
    plain = traceq.report(trace(*rows))
    named = traceq.report(trace(*rows), input_pattern="^fetch_batch$")
    assert plain.timeline is not None and named.timeline is not None
    kinds = {s.name: s.kind for s in named.timeline.cpu}
    assert kinds["fetch_batch"] == "input", kinds
    assert {s.name: s.kind for s in plain.timeline.cpu}.get("fetch_batch") != "input"


def test_a_report_without_a_timeline_says_so(samples: Path) -> None:
    report = dataclasses.replace(sample_report(samples / "training_step.nsys.sqlite"), timeline=None)
    page = render_html(report, cdn=True)
    assert "No timeline: this report was built without one." in page
    assert "chart-timeline" not in figures(page)["figures"]


def test_mfu_section_when_present(samples: Path) -> None:
    report = sample_report(samples / "training_step.nsys.sqlite")
    steps = tuple(MfuStep(None, 0, s.step, s.dur_ns, 0.41, 0.52, False) for s in report.steps)
    mfu = Mfu(6e9, 8e9, 4096.0, 1, 989e12, "NVIDIA H100 80GB HBM3", 0.41, 0.52, steps)
    page = render_html(dataclasses.replace(report, mfu=mfu), cdn=True)
    ids = re.findall(r'<section id="([a-z]+)">', page)
    assert ids.index("mfu") == ids.index("phases") + 1
    section = page[page.index('<section id="mfu">') : page.index('<section id="import">')]
    assert "<dt>mean MFU</dt><dd>41.0%</dd>" in section and "989.0 TFLOP/s" in section
    assert section.count('<td class="n">41.0%</td>') == len(steps)


def test_a_trace_without_gpu_activity_still_renders() -> None:
    trace = Trace(
        events=table(api("cudaMalloc", 0, 10)),
        import_stats=ImportStats.of([CategoryCount("cpu.json", "cuda_runtime", 1, 1)]),
        meta=TraceMeta((SourceMeta(path="cpu.json", format="kineto-json"),)),
    )
    report = traceq.report(trace)
    page = render_html(report, cdn=True)
    assert "nothing to break down" in page and figures(page)["figures"] == {}


# --- determinism and self-containment ----------------------------------------------------------


def test_the_same_report_gives_the_same_bytes(samples: Path, nsys_page: str) -> None:
    report = sample_report(samples / "training_step.nsys.sqlite")
    assert render_html(report) == render_html(report)
    assert render_html(sample_report(samples / "training_step.nsys.sqlite")) == nsys_page
    ranks = [render_html(sample_report(samples / "ranks"), cdn=True) for _ in range(2)]
    assert ranks[0] == ranks[1]
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-", nsys_page.replace(plotly.offline.get_plotlyjs(), ""))


def test_the_page_is_self_contained(nsys_page: str) -> None:
    tags = parse(nsys_page)
    scripts = [attrs for tag, attrs in tags.tags if tag == "script"]
    packed = {"type": "application/gzip", "id": "traceq-plotly", "data-encoding": "gzip base64"}
    assert scripts == [{"type": "application/json", "id": "traceq-figures"}, packed, {}]
    assert not [tag for tag, _ in tags.tags if tag in ("link", "iframe", "img", "object", "embed", "base")]
    # plotly.js rides along packed (after the content, so the text paints first) and unpacks to itself
    blob = re.search(r'id="traceq-plotly"[^>]*>([^<]*)</script>', nsys_page)
    assert blob is not None
    assert gzip.decompress(base64.b64decode(blob.group(1))).decode() == plotly.offline.get_plotlyjs()
    assert nsys_page.index("<main>") < nsys_page.index('id="traceq-plotly"')
    assert len(nsys_page) < 0.45 * len(plotly.offline.get_plotlyjs()) + 400_000
    rest = nsys_page.replace(blob.group(1), "")
    assert "http://" not in rest and "https://" not in rest
    assert "@import" not in rest and "url(" not in rest
    assert len(rest) < 400_000


def test_cdn_links_exactly_the_plotly_build(samples: Path) -> None:
    page = render_html(sample_report(samples / "training_step.nsys.sqlite"), cdn=True)
    scripts = [attrs for tag, attrs in parse(page).tags if tag == "script"]
    assert len(scripts) == 3 and scripts[1]["src"] == cdn_url()
    assert re.fullmatch(r"https://cdn\.plot\.ly/plotly-\d+\.\d+\.\d+\.min\.js", cdn_url())
    assert str(scripts[1]["integrity"]).startswith("sha256-")
    assert re.findall(r"https?://[^\s\"'<>]+", page) == [cdn_url()]
    assert len(page) < 400_000


# --- escaping ----------------------------------------------------------------------------------


def test_script_json_cannot_close_a_script_element() -> None:
    value = {"b": "</script><!-- \u2028\u2029 & <img>", "a": [1.5, "é"]}
    text = script_json(value)
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert text.isascii() and json.loads(text) == value
    assert text.index('"a"') < text.index('"b"')


def test_plot_text_leaves_no_markup_for_plotly() -> None:
    assert plot_text("<b>x</b> & <a href='javascript:1'>") == "&lt;b&gt;x&lt;/b&gt; &amp; &lt;a href='javascript:1'&gt;"


@pytest.fixture(scope="module")
def hostile_page() -> str:
    return render_html(hostile_report())


def test_hostile_names_never_reach_the_page_raw(hostile_page: str) -> None:
    report = hostile_report()
    assert report.timeline is not None and report.timeline.gaps
    for page in (hostile_page, render_html(report, cdn=True)):
        for evil in HOSTILE:
            assert evil not in page
        assert FILE_NAME not in page
        rest = page.replace(plotly.offline.get_plotlyjs(), "")
        lowered = rest.lower()
        assert lowered.count("<script") == 3
        assert "<!--" not in rest
        for opening in ("<img", "<svg", "<iframe"):
            assert opening not in lowered
        tags = parse(page)
        assert [t for t, _ in tags.tags if t == "script"] == ["script"] * 3
        assert not tags.comments
        handlers = [(t, a) for t, a in tags.tags for a in a if a.lower().startswith("on")]
        assert not handlers
        assert {t for t, _ in tags.tags} <= {
            "html", "head", "meta", "title", "style", "script", "body", "header", "div", "h1", "p", "span", "a",
            "nav", "main", "section", "h2", "article", "h3", "code", "dl", "dt", "dd", "h4", "ul", "li", "strong",
            "table", "thead", "tr", "th", "tbody", "td", "b", "details", "summary", "footer",
        }  # fmt: skip


def test_hostile_names_are_shown_literally(hostile_page: str) -> None:
    text = "".join(parse(hostile_page).text)
    for evil in HOSTILE:
        assert evil in text, evil  # the page shows each name as text
    assert escape(f"k0 {HOSTILE[0]}", quote=True) in hostile_page  # kernel table
    assert escape(FILE_NAME, quote=True) in hostile_page  # header, sources, import statistics
    assert 'class="finding sev-other"' in hostile_page  # an unknown severity never becomes a class name
    payload = json.dumps(figures(hostile_page))
    for evil in HOSTILE:
        assert json.dumps(plot_text(evil))[1:-1] in payload  # chart labels carry plotly-escaped names
    assert json.dumps(plot_text(f"step1 {HOSTILE[0]}"))[1:-1] in payload  # step name on the timeline


# --- the job across ranks -------------------------------------------------------------------------


def test_the_ranks_section_shows_the_job_verdict_skew_heatmap_and_straggler(samples: Path) -> None:
    """``sample_traces/ranks`` is the generator's straggler job (rank 2 slow) as Kineto files."""
    report = sample_report(samples / "ranks")
    assert report.job is not None and report.job.straggler == 2
    page = render_html(report, cdn=True)
    ranks = page[page.index('<section id="ranks">') : page.index('<section id="import">')]
    assert "<b>slow rank</b>: rank 2, GPU 2 arrives last at 12 of 12 collectives" in ranks
    assert "the traces&#x27; own clock anchors" in ranks and "residual skew" in ranks
    assert '<td class="hi">rank 2 · GPU 2 (straggler)</td>' in ranks
    assert ranks.count("(straggler)") == 1
    charts = figures(page)["figures"]
    heat = charts["chart-skew"]["data"][0]
    assert heat["type"] == "heatmap"
    assert heat["y"] == [f"rank {i} · GPU {i}" for i in range(4)]
    assert len(heat["x"]) == 12 and all(len(row) == 12 for row in heat["z"])
    assert heat["z"][2] == [0.0] * 12  # the straggler waits for nobody
    assert all(min(heat["z"][r]) > 1.0 for r in (0, 1, 3))  # the others wait ms in every collective
    ticks = charts["chart-skew"]["layout"]["yaxis"]["ticktext"]
    assert ticks[2] == "<b>rank 2 · GPU 2 ◀</b>" and ticks[0] == "rank 0 · GPU 0"
    assert charts["chart-ranks"]["layout"]["yaxis"]["ticktext"][2] == ticks[2]
    arrivals = charts["chart-arrivals"]["data"]
    assert arrivals[0]["x"] == [0, 0, 12, 0] and arrivals[1]["x"] == [3.0] * 4
    assert arrivals[0]["marker"]["color"][2] != arrivals[0]["marker"]["color"][0]


def test_a_multi_process_export_without_ranks_gets_a_job_section(tmp_path: Path) -> None:
    """One nsys export of four processes names no rank: the section labels GPUs and still finds GPU 2."""
    from tracegen import build_timeline, preset, write_nsys_sqlite

    path = write_nsys_sqlite(build_timeline(preset("straggler_job")), tmp_path / "job.nsys.sqlite")
    report = sample_report(path)
    page = render_html(report, cdn=True)
    ids = re.findall(r'<section id="([a-z]+)">', page)
    assert "ranks" in ids
    assert {"chart-ranks", "chart-skew", "chart-arrivals"} <= set(figures(page)["figures"])
    assert '<td class="hi">GPU 2 (straggler)</td>' in page
    assert "one clock: the ranks come from one file" in page


def test_a_job_without_collectives_says_why(tmp_path: Path) -> None:
    events = table(kernel(0, 100, device=0), kernel(0, 100, device=1, pid=200))
    trace = Trace(events=events, import_stats=ImportStats.of([]), meta=TraceMeta((SourceMeta("t", "kineto-json"),)))
    report = traceq.report(trace)
    assert report.job is not None and report.job.verdict == "no_collectives"
    page = render_html(report, cdn=True)
    ranks = page[page.index('<section id="ranks">') : page.index('<section id="import">')]
    assert "<b>no collectives</b>: no communication kernels on any rank: no collectives to compare" in ranks
    assert "chart-skew" not in figures(page)["figures"]


def test_hostile_collective_names_never_reach_the_page_raw() -> None:
    """A communication kernel whose name names no known collective becomes its own kind: that name
    reaches the heatmap's labels and hover text escaped."""
    evil = "<script>alert"  # a kind is the name up to its argument list
    rows = [kernel(0, 10, HOSTILE[0], comm=True, stream=20, **dev) for dev in ({}, {"device": 1, "pid": 200})]
    trace = Trace(
        events=table(*rows, source=FILE_NAME),
        import_stats=ImportStats.of([]),
        meta=TraceMeta((SourceMeta(FILE_NAME, "kineto-json"),)),
    )
    report = traceq.report(trace)
    assert report.job is not None and report.job.collectives[0].kind == evil
    page = render_html(report, cdn=True)
    assert evil not in page
    assert json.dumps(plot_text(f"#0 {evil}"))[1:-1] in json.dumps(figures(page))
