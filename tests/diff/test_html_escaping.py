"""Every string of the diff reaches its HTML page escaped, as the report's do
(tests/report/test_html_escaping.py, whose hostile copier and parser this reuses): a diff whose every
free string is hostile (trace names, kernel names, finding ids and titles, the verdict and warnings
that quote them) renders with no element, attribute, comment or script of its own, and each string
reads back as written wherever the page shows it."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Final

import plotly.offline
import pytest

import traceq
from tracegen.planned.scenarios import BY_PAIR
from traceq.diff.html import render_diff_html
from traceq.diff.model import Diff, FindingChange, MfuChange
from traceq.units import shorten

from ..analyses.planted import PlantedTraces
from ..report.test_html import figures, parse
from ..report.test_html_escaping import (
    ATTRIBUTES,
    CDN_ATTRIBUTES,
    ELEMENTS,
    Hostile,
    _strings,
    _unplotted,
    string_fields,
)

NOT_SHOWN: Final = {
    ("StepParts", "idle_by_cause_ns"),  # the page shows the decomposition's terms, keyed by traceq's own causes
    ("KernelChange", "names_before"),  # the row names the kernel (or its normalised name)
    ("KernelChange", "names_after"),
    ("FindingChange", "title_before"),  # the title after is shown where the finding has one
}


def rich_diff(planted: PlantedTraces) -> Diff:
    """The fusion pair's diff (kernels added, removed, matched by normalised name), with a warning,
    MFU and findings of every status."""
    pair = BY_PAIR["kernels_fused"]
    diff = traceq.diff(planted.path(pair.before, "kineto"), planted.path(pair.after, "kineto"), cache=False)
    findings = tuple(
        FindingChange(f"id{i}", status, "high", "low", 0.3, 0.1, "before", "after")
        for i, status in enumerate(("resolved", "new", "changed", "withheld"))
    )
    return dataclasses.replace(diff, warnings=("a warning",), findings=findings, mfu=MfuChange(0.3, 0.4, 0.35, 0.45))


@pytest.fixture(scope="module")
def hostile(planted_pairs: PlantedTraces) -> tuple[Hostile, Diff]:
    made = Hostile()
    diff = rich_diff(planted_pairs)
    return made, made.copy(diff)


def test_the_hostile_diff_covers_every_string_of_the_model(hostile: tuple[Hostile, Diff]) -> None:
    made, _ = hostile
    assert set(made.fields.values()) == string_fields(Diff)


@pytest.mark.parametrize("cdn", [False, True])
def test_no_string_of_the_diff_reaches_the_page_unescaped(hostile: tuple[Hostile, Diff], cdn: bool) -> None:
    _, diff = hostile
    page = render_diff_html(diff, cdn=cdn)
    rest = page.replace(plotly.offline.get_plotlyjs(), "")
    tags = parse(rest)
    assert {tag for tag, _ in tags.tags} <= ELEMENTS
    assert {name for _, attrs in tags.tags for name in attrs} <= ATTRIBUTES | (CDN_ATTRIBUTES if cdn else set())
    assert not tags.comments
    payload = re.search(r'<script type="application/json" id="traceq-figures">(.*?)</script>', rest, re.S)
    assert payload is not None
    data = payload.group(1)
    assert data.isascii() and not set(data) & {"<", ">", "&"}
    assert json.loads(data)["figures"]
    markup = rest.replace(data, "").lower()
    assert markup.count("<script") == markup.count("</script") == 3
    for piece in ("<script>alert", "<img", "</script><", '" onmouseover="', "' onfocus='"):
        assert piece not in markup


def test_every_string_reads_back_as_written_where_the_page_shows_it(hostile: tuple[Hostile, Diff]) -> None:
    made, diff = hostile
    page = render_diff_html(diff, cdn=True)
    tags = parse(page)
    shown = list(tags.text)
    shown += [v for _, attrs in tags.tags for name, v in attrs.items() if name in ("title", "id") and v]
    shown += [_unplotted(s) for s in _strings(figures(page))]
    seen = set()
    for value, field in made.fields.items():
        cuts = [value] + [shorten(value, width) for width in (24, 40, 60, 80, 120, 200, 400)]
        if any(cut in text for cut in cuts for text in shown):
            seen.add(field)
    assert set(made.fields.values()) - seen == NOT_SHOWN


def test_the_page_names_the_sides_in_its_title_escaped(hostile: tuple[Hostile, Diff]) -> None:
    _, diff = hostile
    page = render_diff_html(diff, cdn=True)
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None and "<" not in title.group(1) and "&lt;script&gt;" in title.group(1)
