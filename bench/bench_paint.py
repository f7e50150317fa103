"""Measure the HTML report's size and first contentful paint in headless Chromium, before and after
issue 17's change, and print a markdown table.

    python bench/bench_paint.py                       # the multi-rank sample, 5 loads each
    python bench/bench_paint.py sample_traces/training_step.nsys.sqlite --repeats 9

*before* is the page as it was: the same report with plotly.js (4.8 MB) inline in ``<head>``, so
the browser parses and runs it before it can paint a word.  *after* is today's page: the content
first, plotly.js gzip-compressed and base64-encoded at the end of ``<body>``, unpacked
(``DecompressionStream``) and run after the first frame.  Each load is a fresh page in one
headless Chromium (``/usr/bin/chromium``, Playwright); the two pages alternate, so other work on
the machine weighs on both alike, and the median of ``--repeats`` loads is kept.  ``FCP`` is the
browser's ``first-contentful-paint`` entry; ``charts`` is when the last chart has drawn (the page
sets ``data-charts="drawn"``; the *before* page draws synchronously, so its charts are drawn at
``load``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

import plotly.offline

import traceq
from traceq.report.html.page import render_html

CHROMIUM = "/usr/bin/chromium"


def before_page(after: str) -> str:
    """Today's page turned back into the old layout: plotly.js inline in ``<head>``."""
    script = "<script>" + re.sub(r"</(script)", r"<\\/\1", plotly.offline.get_plotlyjs(), flags=re.I) + "</script>"
    packed = re.compile(r'<script type="application/gzip" id="traceq-plotly"[^>]*>[^<]*</script>\n')
    page = packed.sub("", after)
    return page.replace("</head>", script + "\n</head>", 1)


def load(browser: Any, path: Path) -> tuple[float, float]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_function(
        "document.documentElement.dataset.charts === 'drawn' || !document.getElementById('traceq-plotly')",
        timeout=120_000,
    )
    fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
    drawn = page.evaluate("performance.now()")
    page.close()
    return float(fcp), float(drawn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default="sample_traces/ranks")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    after = render_html(traceq.report(traceq.load(args.trace)))
    pages = {"before": before_page(after), "after": after}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        paths = {}
        for name, html in pages.items():
            paths[name] = Path(tmp) / f"{name}.html"
            paths[name].write_text(html, encoding="utf-8")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in pages}
        load(browser, paths["after"])  # untimed: the browser's own first start
        for _ in range(args.repeats):
            for name in pages:
                times[name].append(load(browser, paths[name]))
        browser.close()
    print(f"`python bench/bench_paint.py {args.trace} --repeats {args.repeats}`\n")
    print("| page | size | first contentful paint | charts drawn |")
    print("| --- | ---: | ---: | ---: |")
    for name, html in pages.items():
        fcp = statistics.median(t[0] for t in times[name])
        drawn = statistics.median(t[1] for t in times[name])
        print(f"| {name} | {len(html.encode()) / 1e6:.2f} MB | {fcp:.0f} ms | {drawn:.0f} ms |")


if __name__ == "__main__":
    main()
