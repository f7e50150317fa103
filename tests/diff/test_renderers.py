"""The diff's terminal text and HTML page: what they show of the planned pairs (both formats), that
the page is self-contained and draws the decomposition as a waterfall whose steps are the planned
changes, and that the terminal gets a trace's control characters as escapes."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction

import click
import pytest

import traceq
from tracegen.planned import FORMATS, Format
from tracegen.planned.scenarios import BY_PAIR, PAIRS
from traceq.diff.html import render_diff_html
from traceq.diff.labels import FINDING_LABELS, PART_LABELS, signed_ns
from traceq.diff.model import Diff
from traceq.diff.text import render_diff_text
from traceq.units import format_ns

from ..analyses.planted import PlantedTraces
from ..report.test_html import figures, parse

CASES = [pytest.param(p.name, fmt, id=f"{p.name}-{fmt}") for p in PAIRS for fmt in FORMATS]
SECTIONS = ("step", "kernels", "pace", "findings", "sides")


def diff_of(planted: PlantedTraces, name: str, fmt: Format) -> Diff:
    pair = BY_PAIR[name]
    return traceq.diff(planted.path(pair.before, fmt), planted.path(pair.after, fmt), cache=False)


@pytest.fixture(scope="module")
def diffs(planted_pairs: PlantedTraces) -> dict[tuple[str, Format], Diff]:
    return {(p.name, fmt): diff_of(planted_pairs, p.name, fmt) for p in PAIRS for fmt in FORMATS}


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_text_shows_the_verdict_and_every_planned_change_in_80_columns(
    diffs: dict[tuple[str, Format], Diff], name: str, fmt: Format
) -> None:
    pair, diff = BY_PAIR[name], diffs[(name, fmt)]
    text = click.unstyle(render_diff_text(diff))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert " ".join(diff.verdict.split()) in " ".join(text.split())
    assert re.search(rf"^  step +\S+ \S+ +\S+ \S+ +{re.escape(signed_ns(pair.delta_ns['step']))}", text, re.M)
    for key, delta in pair.delta_ns.items():
        if key != "step":
            label = PART_LABELS[key]
            assert re.search(rf"^    {re.escape(label)} .*{re.escape(signed_ns(delta))}$", text, re.M), key
    for fid in pair.resolved:
        assert re.search(rf"^  resolved  {re.escape(FINDING_LABELS[fid])} ", text, re.M), fid


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_waterfall_steps_from_the_step_before_through_the_planned_changes(
    diffs: dict[tuple[str, Format], Diff], name: str, fmt: Format
) -> None:
    pair, diff = BY_PAIR[name], diffs[(name, fmt)]
    page = render_diff_html(diff, cdn=True)
    [trace] = figures(page)["figures"]["chart-waterfall"]["data"]
    d = diff.decomposition
    changed = {k: v for k, v in pair.delta_ns.items() if k != "step" and v}
    assert trace["x"] == ["step before", *(PART_LABELS[k] for k in changed), "step after"]
    assert trace["measure"] == ["absolute", *["relative"] * len(changed), "total"]
    assert trace["y"] == [d.step_before_ns / 1e6, *(v / 1e6 for v in changed.values()), d.step_after_ns / 1e6]
    steps = Fraction(d.step_before_ns) + sum(Fraction(v) for v in changed.values())
    assert steps == Fraction(d.step_after_ns), "the bars end where the step after is"
    assert trace["text"][0] == format_ns(d.step_before_ns)


def test_the_page_is_self_contained_with_the_verdict_first(diffs: dict[tuple[str, Format], Diff]) -> None:
    diff = diffs[("kernels_fused", "kineto")]
    page = render_diff_html(diff)
    tags = parse(page)
    ids = [attrs["id"] for tag, attrs in tags.tags if tag == "section"]
    assert ids == [s for s in ("step", "devices", "kernels", "pace", "findings", "sides") if s in ids]
    assert set(SECTIONS) <= set(ids)
    assert not [a for _, attrs in tags.tags for a in ("src", "href") if a in attrs and "//" in attrs[a]]
    assert page.index('class="verdict"') < page.index('<section id="step">')
    assert diff.verdict in "".join(tags.text)
    assert set(figures(page)["figures"]) == {"chart-waterfall", "chart-classes"}


def test_the_kernels_table_shows_fusion(diffs: dict[tuple[str, Format], Diff]) -> None:
    diff = diffs[("kernels_fused", "nsys")]
    text = click.unstyle(render_diff_text(diff))
    removed = [c for c in diff.kernels.changes if c.status == "removed"]
    added = [c for c in diff.kernels.changes if c.status == "added"]
    assert removed and added
    [elementwise] = [c for c in diff.kernels.classes if c.kernel_class == "elementwise"]
    assert re.search(rf"^  elementwise .*{elementwise.removed} removed, {elementwise.added} added$", text, re.M)
    page = render_diff_html(diff, cdn=True)
    rows = parse(page).text
    assert "removed" in rows and "added" in rows


def test_the_terminal_gets_control_characters_as_escapes(diffs: dict[tuple[str, Format], Diff]) -> None:
    diff = diffs[("kernels_fused", "kineto")]
    evil = "run\x1b[2J\x07\r.json"
    kernels = dataclasses.replace(
        diff.kernels,
        changes=tuple(dataclasses.replace(c, name=f"k\x1b]0;owned\x07{i}") for i, c in enumerate(diff.kernels.changes)),
    )
    hostile = dataclasses.replace(
        diff,
        before=dataclasses.replace(diff.before, name=evil),
        verdict=diff.verdict + " \x1b[31m",
        warnings=(f"the before side ({evil}) is odd",),
        kernels=kernels,
    )
    text = render_diff_text(hostile)
    plain = click.unstyle(text)
    assert "\x07" not in text and "\r" not in text and "\x1b[2J" not in text and "\x1b]0" not in text
    assert "run\\x1b[2J\\x07\\r.json" in plain and "k\\x1b]0;owned\\x07" in plain
