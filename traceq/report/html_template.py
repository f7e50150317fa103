"""The HTML report's fixed parts: the page skeleton, its stylesheet and the script that draws the charts.

Nothing here depends on the trace: :mod:`traceq.report.html` fills the skeleton with escaped
text and a safely encoded JSON payload.  The page loads no fonts, stylesheets or scripts from
anywhere (plotly.js is inlined) unless the CDN option links plotly.js instead.
"""

from __future__ import annotations

from typing import Final

STYLE: Final = """
:root {
  --ink: #1f2328; --muted: #59636e; --line: #d8dee4; --soft: #f6f8fa; --accent: #0072B2;
  --high: #b42318; --high-bg: #fef3f2; --medium: #b54708; --medium-bg: #fffaeb;
  --low: #175cd3; --low-bg: #eff8ff; --ok: #067647; --ok-bg: #ecfdf3;
  --sans: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans",
    "Liberation Sans", "DejaVu Sans", sans-serif;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; font: 14px/1.5 var(--sans); color: var(--ink); background: #fff; }
header.top { background: #0b1f33; color: #fff; padding: 22px 32px 18px; }
header.top .brand { font-size: 12px; letter-spacing: .08em; text-transform: uppercase; color: #9fb3c8; }
header.top h1 { margin: 2px 0 6px; font-size: 22px; font-weight: 600; overflow-wrap: anywhere; }
header.top .verdict { margin: 0 0 6px; font-size: 16px; }
header.top .verdict .pill { display: inline-block; padding: 0 8px; margin-right: 8px; border-radius: 10px;
  font-size: 12px; font-weight: 600; text-transform: uppercase; vertical-align: 1px; }
header.top .facts { margin: 0; color: #c9d6e3; font-size: 13px; }
header.top code { color: #fff; }
nav.toc { position: sticky; top: 0; z-index: 10; background: #fff; border-bottom: 1px solid var(--line);
  padding: 8px 32px; font-size: 13px; }
nav.toc a { color: var(--accent); text-decoration: none; margin-right: 16px; white-space: nowrap; }
nav.toc a:hover { text-decoration: underline; }
main { max-width: 1280px; margin: 0 auto; padding: 8px 32px 32px; }
section { margin: 28px 0 8px; }
h2 { font-size: 18px; font-weight: 600; margin: 0 0 4px; padding-bottom: 4px; border-bottom: 2px solid var(--ink); }
h3 { font-size: 15px; margin: 0; }
h4 { font-size: 13px; margin: 12px 0 4px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
p.lead { color: var(--muted); margin: 6px 0 12px; max-width: 920px; }
p.note { color: var(--muted); font-size: 13px; margin: 6px 0; }
p.note.warn, ul.warnings li { color: var(--medium); }
code, .mono { font-family: var(--mono); font-size: 12.5px; }
.chart { box-sizing: content-box; min-height: 120px; margin: 10px 0;
  border: 1px solid var(--line); border-radius: 6px; }
.chart .fallback { padding: 16px; color: var(--muted); }
.cards { display: grid; gap: 12px; }
article.finding { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 6px;
  padding: 12px 16px; background: #fff; break-inside: avoid; }
article.finding.sev-high { border-left-color: var(--high); background: var(--high-bg); }
article.finding.sev-medium { border-left-color: var(--medium); background: var(--medium-bg); }
article.finding.sev-low { border-left-color: var(--low); background: var(--low-bg); }
article.finding.clean { border-left-color: var(--ok); background: var(--ok-bg); }
article.finding .head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 8px 12px; }
article.finding .share { margin-left: auto; font-weight: 600; white-space: nowrap; }
article.finding p.fix { margin: 10px 0 0; }
article.finding ul { margin: 4px 0 0; padding-left: 20px; }
article.finding li { overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 11px; font-weight: 700;
  text-transform: uppercase; letter-spacing: .04em; color: #fff; background: var(--muted); }
.sev-high .badge, .pill.sev-high { background: var(--high); color: #fff; }
.sev-medium .badge, .pill.sev-medium { background: var(--medium); color: #fff; }
.sev-low .badge, .pill.sev-low { background: var(--low); color: #fff; }
.clean .badge, .pill.clean { background: var(--ok); color: #fff; }
dl.metrics { display: flex; flex-wrap: wrap; gap: 4px 20px; margin: 8px 0 0; font-size: 13px; }
dl.metrics div { display: flex; gap: 6px; }
dl.metrics dt { color: var(--muted); font-family: var(--mono); font-size: 12px; }
dl.metrics dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
.tablewrap { overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: 13px; min-width: 40%; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { font-family: var(--mono); font-size: 12px; overflow-wrap: anywhere; max-width: 640px; }
td.hi { font-weight: 700; color: var(--high); }
td.nowrap { white-space: nowrap; }
tr.total td { font-weight: 600; border-top: 2px solid var(--line); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: 0; }
details { margin: 6px 0; }
details summary { cursor: pointer; color: var(--accent); }
footer { max-width: 1280px; margin: 0 auto; padding: 16px 32px 32px; color: var(--muted); font-size: 12px;
  border-top: 1px solid var(--line); }
@media print {
  nav.toc { display: none; }
  header.top { background: #fff; color: #000; border-bottom: 2px solid #000; padding: 0 0 8px; }
  header.top .brand, header.top .facts, header.top code { color: #333; }
  main, footer { max-width: none; padding: 0; }
  section, .chart, table, article.finding { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""

BOOT_SCRIPT: Final = """
(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("traceq-figures").textContent);
  var ids = Object.keys(payload.figures).sort();
  ids.forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    if (typeof window.Plotly === "undefined") {
      el.textContent = "This chart needs plotly.js, which did not load; the tables hold the same numbers.";
      el.className += " fallback";
      return;
    }
    var fig = payload.figures[id];
    // A responsive plot takes its height from its element when the window resizes: pin it.
    el.style.height = fig.layout.height + "px";
    window.Plotly.newPlot(el, fig.data, fig.layout, payload.config);
  });
})();
"""

PAGE: Final = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="{generator}">
<title>{title}</title>
<style>{style}</style>
{plotly}
</head>
<body>
{body}
<script type="application/json" id="traceq-figures">{figures}</script>
<script>{boot}</script>
</body>
</html>
"""
"""The skeleton: every ``{field}`` is filled by :func:`traceq.report.html.render_html` with
escaped HTML (``title``, ``generator``, ``body``), the plotly.js element (``plotly``) or
script-safe JSON (``figures``)."""
