"""The Jinja environment that lays out the HTML report, and its two rules on whitespace and escaping.

The templates are files of this package (``templates/``, shipped as package data), loaded once
(:func:`environment` is cached) with autoescaping on and :class:`jinja2.StrictUndefined` (a
misspelt name fails the render instead of printing nothing).

* **Escaping**: autoescaping is on for every template, so every ``{{ value }}`` is escaped, in
  text and in attributes alike, unless it is markup already: a macro's output, or one of the two
  values :mod:`traceq.report.html.page` marks safe (it says why each is).  The escaper of
  ``{{ }}`` values (:func:`escape_value`, Jinja's ``finalize``) is Python's :func:`html.escape`,
  which the page always used (``'`` as ``&#x27;``, ``"`` as ``&quot;``), rather than MarkupSafe's
  ``&#39;`` and ``&#34;``: equally safe, and the page's bytes stay as they were.
* **Layout whitespace**: ``templates/page.html.j2`` is written line for line as the page is (a
  line that holds only a ``{% %}`` statement disappears).  The fragments under
  ``templates/sections/`` are written indented over many lines but give one line of HTML each:
  :func:`fold_layout` drops a line break and the indentation around it where it touches markup
  (a ``>`` before it, a ``<`` after it), a ``{% %}`` or ``{# #}`` tag or a ``{{ macro() }}``
  call, and makes it one space between two pieces of text (or ``{{ }}`` values).  So a sentence
  may wrap anywhere between words, but an inline element that follows a word must start on that
  word's line.  A line break the page needs is written ``{{ "\\n" }}``.
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Final

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

FOLDED: Final = "sections/"
"""Templates whose names start with this have their layout whitespace folded (:func:`fold_layout`)."""

_TAG: Final = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.DOTALL)
_BREAK: Final = re.compile(r"[ \t]*\n\s*")
_CALL: Final = re.compile(r"\{\{-?\s*[\w.]+\(")


def fold_layout(source: str) -> str:
    """``source`` (a template) with its line breaks and indentation folded: dropped next to
    markup (``>`` before, ``<`` after) and next to ``{% %}`` and ``{# #}`` tags and at either end,
    one space between text; inside a tag, a line break is one space."""
    parts = _TAG.split(source)  # text, tag, text, tag, ..., text
    folded: list[str] = []
    for i, part in enumerate(parts):
        if i % 2:
            folded.append(_BREAK.sub(" ", part))
            continue
        before = _tag_kind(parts[i - 1]) if i else "edge"
        after = _tag_kind(parts[i + 1]) if i + 1 < len(parts) else "edge"

        def join(match: re.Match[str], text: str = part, before: str = before, after: str = after) -> str:
            left = text[match.start() - 1] if match.start() else before
            right = text[match.end()] if match.end() < len(text) else after
            return "" if left in (">", "block", "edge") or right in ("<", "block", "edge") else " "

        folded.append(_BREAK.sub(join, part))
    return "".join(folded)


def _tag_kind(tag: str) -> str:
    """``value`` for a ``{{ }}`` that prints text; ``block`` for a statement, a comment or a
    ``{{ }}`` that calls a macro (it prints markup)."""
    return "value" if tag.startswith("{{") and not _CALL.match(tag) else "block"


class FoldLayout(Extension):
    """Applies :func:`fold_layout` to the templates under :data:`FOLDED` before Jinja reads them."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return fold_layout(source) if name is not None and name.startswith(FOLDED) else source


def escape_value(value: object) -> object:
    """Every ``{{ }}`` value as Jinja prints it: what is already markup (traceq's own, or a
    macro's result) as it is, anything else escaped with :func:`html.escape`."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value), quote=True))


@cache
def environment() -> jinja2.Environment:
    """The report's templates, loaded once from the package."""
    return build_environment(report_templates())


def report_templates() -> jinja2.BaseLoader:
    """The loader of the report's templates (the page, its stylesheet and script, the sections and
    their macros), which another page (``traceq diff``'s) may put behind its own."""
    return jinja2.PackageLoader("traceq.report.html", "templates")


def build_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """An environment with the rules above (autoescaping, the escaper, the folded layout, strict
    undefined names) over ``loader``."""
    return jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=escape_value,
        extensions=[FoldLayout],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
