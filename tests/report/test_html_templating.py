"""The HTML report's Jinja environment: the fold of the fragments' layout whitespace, the escaper
and the strictness about undefined names."""

from __future__ import annotations

from html import escape

import jinja2
import pytest

from traceq.report.html.templating import environment, fold_layout


def test_a_line_break_next_to_markup_or_a_statement_disappears() -> None:
    source = """
<div class="cards">
  {% for x in xs %}
    <p>
      {{ x }}
    </p>
  {% endfor %}
</div>
"""
    assert fold_layout(source) == '<div class="cards">{% for x in xs %}<p>{{ x }}</p>{% endfor %}</div>'


def test_a_line_break_between_words_or_values_is_one_space() -> None:
    source = "<p>\n  The {{ n }}\n  kernels with the most\n  GPU time ({{ share }}\n  {{ unit }}).\n</p>"
    assert fold_layout(source) == "<p>The {{ n }} kernels with the most GPU time ({{ share }} {{ unit }}).</p>"


def test_a_macro_call_counts_as_markup_and_a_break_inside_a_tag_is_a_space() -> None:
    source = '{{ macros.chart("a", true, "") }}\n{{ macros.table(\n  view.table) }}\n{{ "\\n" }}\n<p>'
    assert fold_layout(source) == '{{ macros.chart("a", true, "") }}{{ macros.table( view.table) }}{{ "\\n" }}<p>'


def test_an_inline_element_after_a_line_break_loses_its_space() -> None:
    """The rule the fragments are written to: keep an inline element on the line of the word before it."""
    assert fold_layout("<p>matching\n<code>x</code></p>") == "<p>matching<code>x</code></p>"
    assert fold_layout("<p>matching <code>x</code>\n</p>") == "<p>matching <code>x</code></p>"


def test_only_the_fragments_are_folded() -> None:
    env = environment()
    assert env.loader is not None
    page, _, _ = env.loader.get_source(env, "page.html.j2")
    assert '<html lang="en">\n<head>\n' in page
    assert env.preprocess(page, "page.html.j2") == page
    assert "\n" not in env.preprocess("<p>\n  a\n</p>\n", "sections/x.html.j2")


def test_values_are_escaped_as_html_escape_does() -> None:
    template = environment().from_string('<td title="{{ v }}">{{ v }}</td>')
    value = "\"'<b>&amp;"
    assert template.render(v=value) == f'<td title="{escape(value)}">{escape(value)}</td>'


def test_an_undefined_name_fails_the_render() -> None:
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ view.missing }}").render(view={})


def test_the_environment_is_made_once() -> None:
    assert environment() is environment()
