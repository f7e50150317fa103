"""The report object: what every renderer (text, JSON, HTML) draws, and the JSON contract.

``Report.to_dict()`` is the JSON report; ``report_json_schema()`` (written to
``schemas/report.schema.json``) is generated from the dataclasses' type hints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from traceq.analyses.model import (
    Analysis,
    DeviceBreakdown,
    Finding,
    Gap,
    JobAnalysis,
    KernelStat,
    Mfu,
    StepBreakdown,
)
from traceq.meta import SourceMeta
from traceq.report.jsonschema import dataclass_schema, to_jsonable
from traceq.stats import CategoryCount
from traceq.trace import Trace

REPORT_SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class ReportSource:
    """The inputs: one entry per file, and the import statistics of every source category."""

    files: tuple[SourceMeta, ...]
    import_stats: tuple[CategoryCount, ...]


@dataclass(frozen=True)
class TimelineBar:
    """One GPU activity drawn on the timeline excerpt (ns); ``kind`` is ``comm`` for communication
    kernels, otherwise the event kind."""

    rank: int | None
    device: int
    stream: int | None
    kind: str
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class TimelineGap:
    """One idle gap drawn on the timeline excerpt, labelled with its cause and matched CPU call."""

    rank: int | None
    device: int
    start_ns: int
    end_ns: int
    cause: str
    label: str


@dataclass(frozen=True)
class TimelineExcerpt:
    """A few steps of a few devices, for the HTML timeline (streams as rows).

    ``bars_total`` is how many activities the window held; where it exceeds ``len(bars)`` the
    excerpt was downsampled (the longest activities kept).  Likewise ``gaps_total`` for gaps.
    """

    start_ns: int
    end_ns: int
    steps: tuple[str, ...]
    bars: tuple[TimelineBar, ...]
    bars_total: int
    gaps: tuple[TimelineGap, ...]
    gaps_total: int


@dataclass(frozen=True)
class Report:
    """A trace's analysis, ready to render; ``job`` is the cross-rank analysis of a trace with two or
    more devices (``docs/multi-rank.md``), null otherwise."""

    schema_version: int
    source: ReportSource
    step_pattern: str
    devices: tuple[DeviceBreakdown, ...]
    steps: tuple[StepBreakdown, ...]
    gaps: tuple[Gap, ...]
    kernels: tuple[KernelStat, ...]
    findings: tuple[Finding, ...]
    mfu: Mfu | None
    timeline: TimelineExcerpt | None
    job: JobAnalysis | None
    analysis: Analysis = field(repr=False, compare=False)

    @classmethod
    def build(
        cls,
        trace: Trace,
        analysis: Analysis,
        *,
        findings: tuple[Finding, ...] = (),
        mfu: Mfu | None = None,
        timeline: TimelineExcerpt | None = None,
        job: JobAnalysis | None = None,
    ) -> Report:
        return cls.assemble(
            trace.meta.sources,
            trace.import_stats.counts,
            analysis,
            findings=findings,
            mfu=mfu,
            timeline=timeline,
            job=job,
        )

    @classmethod
    def assemble(
        cls,
        files: tuple[SourceMeta, ...],
        import_stats: tuple[CategoryCount, ...],
        analysis: Analysis,
        *,
        findings: tuple[Finding, ...] = (),
        mfu: Mfu | None = None,
        timeline: TimelineExcerpt | None = None,
        job: JobAnalysis | None = None,
    ) -> Report:
        """:meth:`build` from the sources' metadata and import statistics instead of a ``Trace``
        (a report built rank by rank never holds the whole trace)."""
        return cls(
            schema_version=REPORT_SCHEMA_VERSION,
            source=ReportSource(files=files, import_stats=import_stats),
            step_pattern=analysis.step_pattern,
            devices=analysis.devices,
            steps=analysis.steps,
            gaps=analysis.gaps,
            kernels=analysis.kernels,
            findings=findings,
            mfu=mfu,
            timeline=timeline,
            job=job,
            analysis=analysis,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (validates against ``schemas/report.schema.json``)."""
        out: dict[str, Any] = to_jsonable(self)
        return out


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of :meth:`Report.to_dict`."""
    definitions: dict[str, Any] = {}
    dataclass_schema(Report, definitions)
    root = definitions.pop("Report")
    root["properties"]["schema_version"] = {"const": REPORT_SCHEMA_VERSION}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://traceq.dev/schemas/report.schema.json",
        "title": "traceq report",
        **root,
        "$defs": dict(sorted(definitions.items())),
    }
