"""Every string of the report model reaches the HTML page escaped: a report whose every free string
is hostile renders with no element, attribute, comment or script of its own, and each string reads
back as written wherever the page shows it (as text, a tooltip or a chart label)."""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import plotly.offline
import pytest

from traceq.analyses.model import CallRef, DataCaveat, DeviceRef, Evidence, Finding, Mfu, MfuStep, WithheldFinding
from traceq.report.html.page import render_html
from traceq.report.model import Report
from traceq.units import shorten

from .test_html import figures, parse, sample_report

PAYLOAD: Final = (
    "\" onmouseover=\"alert(1)' onfocus='alert(1) "
    '<script>alert(1)</script>"><img src=x onerror=alert(1)></script>{{ 7*7 }}&amp;\u2028'
)
"""In every free string of the report: attributes injected without a tag, markup, an attribute
break-out, a script end, template syntax (shown literally, never evaluated), an entity (shown as
written, never decoded) and a JavaScript line separator."""

VOCABULARY: Final = {
    ("TimelineBar", "kind"),
    ("TimelineGap", "cause"),
    ("ActivityRef", "kind"),
    ("DeviceBreakdown", "idle_by_cause_ns"),
    ("DeviceBreakdown", "gaps_by_cause"),
    ("StepBreakdown", "idle_by_cause_ns"),
    ("SteadyState", "idle_by_cause_ns"),
    ("Gap", "causes_ns"),
}
"""String fields (and mappings keyed by gap cause) whose values traceq chooses from a fixed list,
as ``FIELD_ENUMS`` declares for the others: the page picks colours and rows by them, and no trace
string becomes one."""

NOT_SHOWN: Final = {
    ("DeviceBreakdown", "source"),  # devices are labelled by rank and GPU
    ("RankSummary", "source"),
    ("Evidence", "name"),  # the evidence's text names it
    ("DataCaveat", "source"),  # its text names the file
    ("DeviceRef", "source"),  # the finding's title names the device
    ("DataCaveat", "reasons"),  # its text lists them
}
"""String fields the page does not show."""

ELEMENTS: Final = {
    "html", "head", "meta", "title", "style", "script", "body", "header", "div", "h1", "p", "span", "a", "nav",
    "main", "section", "h2", "article", "h3", "code", "dl", "dt", "dd", "h4", "ul", "li", "strong", "table",
    "thead", "tr", "th", "tbody", "td", "b", "details", "summary", "footer",
}  # fmt: skip
ATTRIBUTES: Final = {
    "lang", "charset", "name", "content", "type", "id", "class", "href", "style", "title",
    "data-zoom-ms",  # two numbers traceq formats (where an evidence link zooms the timeline)
    "data-encoding",  # how the packed plotly.js element is encoded
}  # fmt: skip
CDN_ATTRIBUTES: Final = {"src", "integrity", "crossorigin"}


class Hostile:
    """Copies a report with every free string replaced by a numbered copy of :data:`PAYLOAD`,
    remembering which field each copy went to."""

    def __init__(self) -> None:
        self.fields: dict[str, tuple[str, str]] = {}

    def text(self, owner: str, field: str) -> str:
        value = f"#{len(self.fields)}#{PAYLOAD}"
        if owner == "KernelStat":
            value += " " + "x" * 200  # long enough to be cut, with the whole name as the cell's tooltip
        self.fields[value] = (owner, field)
        return value

    def copy(self, value: Any, owner: str = "", field: str = "") -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            enums: Mapping[str, Any] = getattr(value, "FIELD_ENUMS", {})
            changes = {}
            for f in dataclasses.fields(value):
                if (not f.repr and not f.compare) or f.name in enums or (type(value).__name__, f.name) in VOCABULARY:
                    continue  # the analysis rides along unrendered; vocabularies stay as they are
                changes[f.name] = self.copy(getattr(value, f.name), type(value).__name__, f.name)
            return dataclasses.replace(value, **changes)
        if isinstance(value, str):
            return self.text(owner, field)
        if isinstance(value, tuple):
            return tuple(self.copy(v, owner, field) for v in value)
        if isinstance(value, Mapping):
            return {self.copy(k, owner, field): self.copy(v, owner, field) for k, v in value.items()}
        return value


def model_classes(cls: type[Any], seen: set[type[Any]] | None = None) -> set[type[Any]]:
    """``cls`` and every dataclass its fields hold, however deep (not the analysis that rides
    along unrendered)."""
    seen = set() if seen is None else seen
    if cls not in seen:
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            for leaf in _leaves(hints[f.name]) if f.repr or f.compare else ():
                if dataclasses.is_dataclass(leaf) and isinstance(leaf, type):
                    model_classes(leaf, seen)
    return seen


def string_fields(cls: type[Any]) -> set[tuple[str, str]]:
    """Every (class, field) of the report model whose type holds ``str``, less the fields
    ``FIELD_ENUMS`` limits to a fixed list."""
    out = set()
    for model in model_classes(cls):
        hints = typing.get_type_hints(model)
        enums: Mapping[str, Any] = getattr(model, "FIELD_ENUMS", {})
        for f in dataclasses.fields(model):
            if (f.repr or f.compare) and f.name not in enums and str in _leaves(hints[f.name]):
                out.add((model.__name__, f.name))
    return out


def _leaves(hint: Any) -> list[Any]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType, tuple, list, dict, Mapping) or args:
        return [leaf for arg in args if arg is not Ellipsis for leaf in _leaves(arg)]
    return [hint]


def rich_report(samples: Path) -> Report:
    """The multi-rank sample's report with every optional part filled: findings with evidence on the
    timeline, MFU, a sync gap, a file's warnings and a clock note the page shows."""
    report = sample_report(samples / "ranks")
    assert report.job is not None and report.timeline is not None
    tl = report.timeline
    gap = report.gaps[0]
    sync_gap = dataclasses.replace(
        gap, cause="sync", sync=CallRef("cudaStreamSynchronize", gap.start_ns - 9, gap.start_ns - 5, 1, None)
    )
    evidence = Evidence("a step", rank=0, device=0, start_ns=tl.start_ns + 10, end_ns=tl.start_ns + 20, name="step")
    finding = Finding(
        "input_stall", "high", "Input stall", 0.2, {"idle_ns": 1e6, "idle_share": 0.2}, (evidence,), "Fix it."
    )
    steps = tuple(MfuStep(s.rank, s.device, s.step, s.dur_ns, 0.4, 0.5, False) for s in report.steps)
    files = (dataclasses.replace(report.source.files[0], warnings=("a warning",)), *report.source.files[1:])
    job = dataclasses.replace(report.job, clock=dataclasses.replace(report.job.clock, method="collective_end"))
    caveat = DataCaveat(
        id="gpu_rows_skipped",
        source=files[0].path,
        pid=None,
        rank=0,
        devices=(0,),
        missing=3,
        expected=9,
        reasons={"invalid interval": 3},
        withholds=False,
        text="3 of 9 GPU activities were skipped",
    )
    withheld = WithheldFinding(id="launch_bound", title="GPU idle waiting for launches", reason="a third is missing")
    return dataclasses.replace(
        report,
        gaps=(sync_gap, *report.gaps[1:]),
        findings=(
            dataclasses.replace(
                finding, caveats=("measured without 3 kernels",), measured_on=DeviceRef(files[0].path, None, 0, 0)
            ),
            dataclasses.replace(finding, id="odd", severity="low"),
        ),
        caveats=(caveat,),
        withheld_findings=(withheld,),
        mfu=Mfu(6e9, 8e9, 4096.0, 4, 989e12, "NVIDIA H100 80GB HBM3", 0.4, 0.5, steps),
        source=dataclasses.replace(report.source, files=files),
        job=job,
    )


@pytest.fixture(scope="module")
def hostile(samples: Path) -> tuple[Hostile, Report]:
    made = Hostile()
    return made, made.copy(rich_report(samples))


def test_the_hostile_report_covers_every_string_of_the_model(hostile: tuple[Hostile, Report]) -> None:
    made, _ = hostile
    assert set(made.fields.values()) == string_fields(Report) - VOCABULARY


@pytest.mark.parametrize("cdn", [False, True])
def test_no_string_of_the_report_reaches_the_page_unescaped(hostile: tuple[Hostile, Report], cdn: bool) -> None:
    _, report = hostile
    page = render_html(report, cdn=cdn)
    rest = page.replace(plotly.offline.get_plotlyjs(), "")
    tags = parse(rest)
    assert {tag for tag, _ in tags.tags} <= ELEMENTS
    assert {name for _, attrs in tags.tags for name in attrs} <= ATTRIBUTES | (CDN_ATTRIBUTES if cdn else set())
    assert not tags.comments
    payload = re.search(r'<script type="application/json" id="traceq-figures">(.*?)</script>', rest, re.S)
    assert payload is not None
    data = payload.group(1)  # JSON: quotes are inert in it, and no <, > or & can end the element
    assert data.isascii() and not set(data) & {"<", ">", "&"}
    assert json.loads(data)["figures"]
    markup = rest.replace(data, "").lower()
    assert markup.count("<script") == markup.count("</script") == 3
    for piece in ("<script>alert", "<img", "</script><", '" onmouseover="', "' onfocus='"):
        assert piece not in markup


def test_every_string_reads_back_as_written_where_the_page_shows_it(hostile: tuple[Hostile, Report]) -> None:
    made, report = hostile
    page = render_html(report, cdn=True)
    tags = parse(page)
    shown = list(tags.text)
    shown += [v for _, attrs in tags.tags for name, v in attrs.items() if name in ("title", "id") and v]
    shown += [_unplotted(s) for s in _strings(figures(page))]
    seen = set()
    for value, field in made.fields.items():
        cuts = [value] + [shorten(value, width) for width in (24, 40, 60, 80, 120, 200)]
        if any(cut in text for cut in cuts for text in shown):
            seen.add(field)  # a field of many values (a tuple, a table) counts as shown where one of them is
    assert set(made.fields.values()) - seen == NOT_SHOWN
    kernel = next(k.name for k in report.kernels)
    assert ("td", {"class": "name", "title": kernel}) in tags.tags  # a tooltip holds the whole name


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _unplotted(text: str) -> str:
    """A chart label as plotly shows it (the inverse of ``plot_text``)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def test_in_a_notebook_the_hostile_report_is_one_sandboxed_frame_holding_exactly_the_page(
    hostile: tuple[Hostile, Report],
) -> None:
    # The cell's HTML is one iframe and nothing else: no trace string ends the srcdoc attribute,
    # and the browser decodes the attribute back to the very page the escaping tests above check.
    _, report = hostile
    cell = report._repr_html_()
    assert cell is not None
    frame = parse(cell)
    assert [tag for tag, _ in frame.tags] == ["iframe"] and not frame.comments and not "".join(frame.text).strip()
    attrs = frame.tags[0][1]
    assert set(attrs) == {"title", "sandbox", "style", "srcdoc"} and attrs["sandbox"] == "allow-scripts"
    assert attrs["srcdoc"] == render_html(report)
    assert cell.count("<") == 2 and cell.count(">") == 2  # the page's own markup is all entities


def test_a_trace_in_a_notebook_escapes_its_sources_and_warnings() -> None:
    from ..builders import kernel, trace

    plain = trace(kernel(0, 10))
    source = dataclasses.replace(plain.meta.sources[0], path=PAYLOAD, producer=PAYLOAD, warnings=(PAYLOAD,))
    hostile_trace = dataclasses.replace(plain, meta=dataclasses.replace(plain.meta, sources=(source,)))
    cell = hostile_trace._repr_html_()
    tags = parse(cell)
    assert {tag for tag, _ in tags.tags} <= {"div", "strong", "ul", "li", "code", "table", "thead", "tr", "th"} | {
        "tbody",
        "td",
        "p",
    }
    assert {name for _, attrs in tags.tags for name in attrs} <= {"style"} and not tags.comments
    text = "".join(tags.text)
    # The path, the producer and the warning ("<path>: <warning>"), each as written.
    assert text.count(PAYLOAD) == 4
    assert "kernel" in text and "<script>alert" not in cell
