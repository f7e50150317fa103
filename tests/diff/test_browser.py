"""The diff page end to end in headless Chromium, as the report's (tests/report/test_browser.py, whose
harness this reuses): it draws its waterfall and class charts offline, runs no injected script,
raises no JavaScript error and asks the network for nothing.  ``TRACEQ_UPDATE_SCREENSHOT=1`` also
rewrites ``docs/images/diff.png``, docs/diff.md's picture of the shipped before/after sample's diff."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import pytest

import traceq
from traceq.diff.html import render_diff_html

from ..analyses.planted import PlantedTraces
from ..conftest import REPO
from ..report.test_browser import GUARD_MS, browser, visit
from .test_html_escaping import Hostile, rich_diff

pytestmark = pytest.mark.browser

SCREENSHOT: Final = REPO / "docs" / "images" / "diff.png"
__all__ = ["browser"]  # the fixture, shared


def drawn(page: Any, expected: set[str]) -> None:
    for chart in sorted(expected):
        page.wait_for_selector(f"#{chart} svg.main-svg", timeout=GUARD_MS)
    ids = page.eval_on_selector_all(
        ".js-plotly-plot", "els => els.filter(e => e.querySelector('svg.main-svg')).map(e => e.id)"
    )
    assert set(ids) == expected


def test_the_sample_diff_renders_offline(browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the sides named as docs/diff.md's command names them
    folder = Path("sample_traces/before_after")
    diff = traceq.diff(folder / "input_stall.pt.trace.json.gz", folder / "input_ready.pt.trace.json.gz")
    seen = visit(browser, render_diff_html(diff), tmp_path / "diff.html")
    drawn(seen.page, {"chart-waterfall", "chart-classes"})
    assert seen.page.evaluate("document.querySelector('main section').id") == "step"
    assert "input stall" in seen.page.inner_text("header .verdict")
    seen.check_clean()
    if os.environ.get("TRACEQ_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        seen.page.screenshot(path=str(SCREENSHOT), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 1500})


def test_a_hostile_diff_runs_nothing_and_shows_literally(
    browser: Any, planted_pairs: PlantedTraces, tmp_path: Path
) -> None:
    made = Hostile()
    diff = made.copy(rich_diff(planted_pairs))
    seen = visit(browser, render_diff_html(diff), tmp_path / "hostile.html")
    drawn(seen.page, {"chart-waterfall", "chart-classes"})
    page = seen.page
    assert page.evaluate("document.querySelectorAll('script').length") == 3
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed, [onload], [onerror]').length") == 0
    assert diff.before.name in page.inner_text("h1")
    assert diff.verdict in page.inner_text("header .verdict")
    seen.check_clean()
