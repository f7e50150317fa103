"""End to end in headless Chromium: the HTML report draws its charts, runs no injected script,
raises no JavaScript error and asks the network for nothing.

Needs Debian's ``/usr/bin/chromium`` and the Python ``playwright`` package (``.ci/run`` installs
both; ``playwright install`` is never needed).  ``TRACEQ_UPDATE_SCREENSHOT=1`` also rewrites
``docs/images/report.png``, the README's picture of the multi-rank sample's report.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

import traceq
from traceq.analyses.timeline import timeline_excerpt
from traceq.report.html.page import render_html
from traceq.report.model import Report

from ..conftest import REPO
from .test_html import FILE_NAME, HOSTILE, hostile_report

pytestmark = pytest.mark.browser

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT: Final = REPO / "docs" / "images" / "report.png"
SCREENSHOT_TOP: Final = REPO / "docs" / "images" / "report-top.png"
FIRST_PAINT_BOUND_MS: Final = 2500
"""First contentful paint of the multi-rank sample's page: about 160 ms measured on this 2-core
machine (``bench/bench_paint.py``), 1.4 s with plotly.js inline in ``<head>`` as it was.  The bound
is 15x the measure, for a loaded machine (1 s failed once beside other test runs); what fails the
old layout is the order the test checks beside it: the text paints before plotly.js runs."""
GUARD_MS: Final = 120_000
"""How long to wait for a chart or a hover label that must appear: a guard against a page that never
draws, far beyond any load (a loaded machine draws late, never differently)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is absent (Debian package chromium; .ci/run installs it)"
        if os.environ.get("TRACEQ_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)  # CI sets this: there the browser test must run, never skip
        pytest.skip(reason)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the Python package playwright is absent (a test extra; .ci/run installs it)"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Visit:
    """One page load and everything the page did."""

    page: Any
    url: str
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        self.page.wait_for_timeout(300)  # let any late script, timer or dialog show itself
        assert self.errors == [], self.errors
        assert self.dialogs == [], self.dialogs
        assert self.requests == [self.url], self.requests


def visit(browser: Any, page_html: str, path: Path, *, width: int = 1280, color_scheme: str = "light") -> Visit:
    """Open ``page_html`` (written to ``path``) with every request but the page itself refused."""
    path.write_text(page_html, encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=color_scheme)
    seen = Visit(page=page, url=path.resolve().as_uri())
    page.on("pageerror", lambda exc: seen.errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: seen.errors.append(f"console: {msg.text}") if msg.type == "error" else None)

    def on_dialog(dialog: Any) -> None:
        seen.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def on_route(route: Any) -> None:
        if route.request.url == seen.url:
            route.continue_()
        else:
            route.abort()

    page.on("dialog", on_dialog)
    page.on("request", lambda request: seen.requests.append(request.url))
    page.route("**/*", on_route)
    page.goto(seen.url, wait_until="load")
    return seen


def check_charts(seen: Visit, expected: set[str]) -> None:
    page = seen.page
    for chart in sorted(expected):
        page.wait_for_selector(f"#{chart} svg.main-svg", timeout=GUARD_MS)
    drawn = page.eval_on_selector_all(
        ".js-plotly-plot", "els => els.filter(e => e.querySelector('svg.main-svg')).map(e => e.id)"
    )
    assert set(drawn) == expected
    assert page.evaluate("document.querySelector('main section').id") == "findings"
    assert page.locator("#findings article.finding").count() >= 1


def report_of(path: Path) -> Report:
    trace = traceq.load(path)
    report = traceq.report(trace)
    return dataclasses.replace(report, timeline=timeline_excerpt(trace.events, traceq.analyze(trace)))


def test_the_sample_report_renders_offline(browser: Any, samples: Path, tmp_path: Path) -> None:
    seen = visit(browser, render_html(report_of(samples / "training_step.nsys.sqlite")), tmp_path / "report.html")
    check_charts(seen, {"chart-steps", "chart-idle", "chart-timeline"})
    rows = seen.page.eval_on_selector_all("#chart-timeline .ytick text", "els => els.map(e => e.textContent)")
    # the export carries RANK=0 in its captured environment, so the rows are labelled by rank;
    # the launching CPU thread is drawn beside the device's gaps and streams
    assert sorted(rows) == [
        "rank 0 · GPU 0 · CPU thread 48213",
        "rank 0 · GPU 0 · idle gaps",
        "rank 0 · GPU 0 · stream 20",
        "rank 0 · GPU 0 · stream 7",
    ]
    seen.check_clean()


def test_the_multi_rank_report_renders_offline(browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the report names its files as given: relative, as in the README
    seen = visit(browser, render_html(report_of(Path("sample_traces") / "ranks")), tmp_path / "ranks.html")
    check_charts(seen, {"chart-steps", "chart-idle", "chart-timeline", "chart-ranks", "chart-skew", "chart-arrivals"})
    bars = seen.page.eval_on_selector_all("#chart-ranks .trace.bars .point", "els => els.length")
    assert bars >= 4 * 2
    heights = seen.page.eval_on_selector_all(".chart", "els => els.map(e => e.scrollHeight - e.clientHeight)")
    assert heights == [0] * len(heights)  # no chart overflows its box (and none overlaps the next)
    if os.environ.get("TRACEQ_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        seen.page.screenshot(path=str(SCREENSHOT), full_page=True)
        # the README shows the top of the page: header, findings, step breakdown
        seen.page.screenshot(path=str(SCREENSHOT_TOP), clip={"x": 0, "y": 0, "width": 1280, "height": 1500})
    seen.check_clean()


def test_the_text_paints_at_once_and_the_cpu_side_is_drawn(browser: Any, tmp_path: Path) -> None:
    seen = visit(browser, render_html(report_of(REPO / "sample_traces" / "ranks")), tmp_path / "ranks.html")
    page = seen.page
    # (the paint entry is recorded once the browser has painted, which a busy machine may delay past load)
    page.wait_for_function("performance.getEntriesByName('first-contentful-paint').length > 0", timeout=GUARD_MS)
    fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
    assert fcp < FIRST_PAINT_BOUND_MS
    # The order, which no load on the machine changes: the text painted before plotly.js ran (with
    # plotly.js inline in <head>, as it was, nothing painted until it had run, and no mark is set).
    page.wait_for_function("performance.getEntriesByName('traceq-plotly-run').length > 0", timeout=GUARD_MS)
    plotly_run = page.evaluate("performance.getEntriesByName('traceq-plotly-run')[0].startTime")
    assert fcp <= plotly_run
    page.wait_for_selector("html[data-charts=drawn]", timeout=GUARD_MS)
    rows = page.eval_on_selector_all("#chart-timeline .ytick text", "els => els.map(e => e.textContent)")
    assert [r for r in rows if "CPU thread" in r] != []
    names = page.evaluate("document.getElementById('chart-timeline').data.map(t => t.name)")
    assert "CPU: launch / API call" in names and "gap ← its CPU call" in names
    # an evidence link zooms the timeline to its interval
    link = page.locator("a[data-zoom-ms]").first
    start_ms, end_ms = (float(v) for v in str(link.get_attribute("data-zoom-ms")).split())
    link.click()
    page.wait_for_function(
        "document.getElementById('chart-timeline').layout.xaxis.autorange === false", timeout=GUARD_MS
    )
    low, high = page.evaluate("document.getElementById('chart-timeline').layout.xaxis.range")
    assert low <= start_ms <= end_ms <= high and high - low < 3 * max(end_ms - start_ms, 0.001) + 1e-9
    seen.check_clean()


def test_the_page_fits_800_px_and_has_a_dark_mode(browser: Any, tmp_path: Path) -> None:
    html = render_html(report_of(REPO / "sample_traces" / "ranks"))
    colours = {}
    for scheme in ("light", "dark"):
        seen = visit(browser, html, tmp_path / f"{scheme}.html", width=800, color_scheme=scheme)
        page = seen.page
        page.wait_for_selector("html[data-charts=drawn]", timeout=GUARD_MS)
        assert page.evaluate("document.documentElement.scrollWidth") <= 800
        colours[scheme] = page.evaluate(
            "[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
        )
        seen.check_clean()
    assert colours["light"] != colours["dark"]


def test_hostile_names_run_nothing_and_show_literally(browser: Any, tmp_path: Path) -> None:
    seen = visit(browser, render_html(hostile_report()), tmp_path / "hostile.html")
    check_charts(seen, {"chart-steps", "chart-idle", "chart-timeline"})
    page = seen.page
    assert page.evaluate("document.querySelectorAll('script').length") == 3
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed, [onload], [onerror]').length") == 0
    assert page.title() == f"traceq report: {FILE_NAME}"
    assert page.inner_text("h1") == FILE_NAME

    def hover(chart: str, curve: int, point: int) -> str:
        # plotly throttles hovers (50 ms) and keeps the last label until unhovered
        page.evaluate("id => window.Plotly.Fx.unhover(id)", chart)
        page.wait_for_selector(f"#{chart} .hovertext", state="detached", timeout=GUARD_MS)
        page.wait_for_timeout(100)
        page.evaluate(
            "([id, c, p]) => window.Plotly.Fx.hover(id, [{curveNumber: c, pointNumber: p}])", [chart, curve, point]
        )
        page.wait_for_selector(f"#{chart} .hovertext", timeout=GUARD_MS)
        text: str = page.eval_on_selector(f"#{chart} .hovertext", "e => e.textContent")
        return text

    assert f"k0 {HOSTILE[0]}" in hover("chart-timeline", 0, 0)
    assert f"k1 {HOSTILE[1]}" in hover("chart-timeline", 0, 1)
    assert f"step1 {HOSTILE[0]}" in hover("chart-steps", 0, 0)
    gap_curve = page.evaluate(
        "document.getElementById('chart-timeline').data.findIndex(t => t.name === 'idle: launch')"
    )
    # the first launch gap is the idle before k0, issued by the call named HOSTILE[0]
    assert HOSTILE[0] in hover("chart-timeline", gap_curve, 0)
    body = page.inner_text("body")
    for evil in HOSTILE:
        assert evil in body
    seen.check_clean()


def test_the_harness_sees_dialogs_errors_and_requests(browser: Any, tmp_path: Path) -> None:
    bad = (
        "<!DOCTYPE html><html><body><img src='https://example.invalid/x.png'>"
        "<script>alert('x'); throw new Error('boom');</script></body></html>"
    )
    seen = visit(browser, bad, tmp_path / "bad.html")
    seen.page.wait_for_timeout(300)
    assert seen.dialogs == ["alert: x"]
    assert any("boom" in e for e in seen.errors)
    assert "https://example.invalid/x.png" in seen.requests
    with pytest.raises(AssertionError):
        seen.check_clean()


def test_printing_keeps_the_colours_and_draws_each_chart_within_the_paper(browser: Any, tmp_path: Path) -> None:
    seen = visit(browser, render_html(report_of(REPO / "sample_traces" / "ranks")), tmp_path / "print.html")
    page = seen.page
    page.wait_for_selector("html[data-charts=drawn]", timeout=GUARD_MS)
    page.emulate_media(media="print")
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")  # what printing fires: charts at paper width
    page.wait_for_function(
        "[...document.querySelectorAll('.js-plotly-plot')].every(el => el._fullLayout && el._fullLayout.width <= 680)",
        timeout=GUARD_MS,
    )
    adjust = page.evaluate("getComputedStyle(document.querySelector('.swatch')).printColorAdjust")
    assert adjust == "exact"
    assert page.evaluate("getComputedStyle(document.querySelector('nav.toc')).display") == "none"
    seen.check_clean()
