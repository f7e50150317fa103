"""The HTML report: :func:`traceq.report.html.page.render_html` draws a :class:`~traceq.report.model.Report`
as one self-contained page.

* ``page.py``: the entry point, the chart JSON and the plotly.js element (and which values are
  marked safe, and why);
* ``templating.py``: the Jinja environment (autoescaping, the fold of the fragments' layout
  whitespace); the templates are ``templates/page.html.j2``, its stylesheet and drawing script
  (``page.css``, ``page.js``) and one fragment per section under ``templates/sections/``;
* ``sections_*.py`` and ``tables.py``: what each section shows, as plain data (rows, formatted
  numbers, labels);
* ``chart_style.py`` and ``charts_*.py``: the plotly figures, by family (steps, ranks and the
  job, the timeline).
"""
