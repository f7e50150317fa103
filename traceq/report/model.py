"""The report object: what every renderer (text, JSON, HTML) draws, and the JSON contract.

``Report.to_dict()`` is the JSON report; ``report_json_schema()`` (written to
``schemas/report.schema.json``) is generated from the dataclasses' type hints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import (
    DataCaveat,
    DeviceBreakdown,
    Finding,
    Gap,
    KernelStat,
    Mfu,
    OperatorStat,
    PhaseBreakdown,
    StepBreakdown,
    WithheldFinding,
)
from traceq.analyses.timeline import TimelineExcerpt
from traceq.meta import SourceMeta
from traceq.report import display
from traceq.report.jsonschema import PayloadError, dataclass_schema, from_jsonable, to_jsonable
from traceq.stats import CategoryCount

REPORT_SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class ReportSource:
    """The inputs: one entry per file, and the import statistics of every source category."""

    files: tuple[SourceMeta, ...]
    import_stats: tuple[CategoryCount, ...]


@dataclass(frozen=True, kw_only=True)
class Report:
    """A trace's analysis, ready to render: what :func:`traceq.report` returns and every renderer
    draws; ``job`` is the cross-rank analysis of a trace with two or more devices
    (``docs/multi-rank.md``), null otherwise.  Built by :mod:`traceq.pipeline`."""

    schema_version: int = REPORT_SCHEMA_VERSION
    source: ReportSource
    step_pattern: str
    devices: tuple[DeviceBreakdown, ...]
    steps: tuple[StepBreakdown, ...]
    gaps: tuple[Gap, ...]
    kernels: tuple[KernelStat, ...]
    findings: tuple[Finding, ...]
    kernel_names: int | None = None
    """How many distinct kernel names the trace holds (``kernels`` lists the ``--top-kernels`` with the
    most time); None in a report saved by a traceq that did not count them."""
    operators: tuple[OperatorStat, ...] = ()
    """The operators with the most GPU time (``docs/analyses.md``, "Operators")."""
    phases: tuple[PhaseBreakdown, ...] = ()
    """Every device's step time by phase (``docs/analyses.md``, "Phases")."""
    caveats: tuple[DataCaveat, ...] = ()
    """GPU work the trace lacks (rows skipped on import, launches never recorded), beside the numbers
    it affects (``docs/findings.md``, "Incomplete data")."""
    withheld_findings: tuple[WithheldFinding, ...] = ()
    """Findings that fired on a device missing too much of its GPU work to be trusted."""
    mfu: Mfu | None
    timeline: TimelineExcerpt | None
    job: JobAnalysis | None
    gap_count: int = field(default=0, repr=False, compare=False)
    """How many gaps the devices have in all (``gaps`` lists the longest of them)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (validates against ``schemas/report.schema.json``)."""
        out: dict[str, Any] = to_jsonable(self)
        return out

    @classmethod
    def from_dict(cls, payload: Any) -> Report:
        """The report a JSON report holds (what :meth:`to_dict` wrote, here or by a traceq of the same
        ``schema_version``), every value checked; raises :class:`~traceq.report.jsonschema.PayloadError`."""
        if not isinstance(payload, dict):
            raise PayloadError("", "a JSON report is an object")
        version = payload.get("schema_version")
        if version != REPORT_SCHEMA_VERSION:
            raise PayloadError("schema_version", f"is {version!r}; this traceq reads version {REPORT_SCHEMA_VERSION}")
        return from_jsonable(cls, payload)

    def _repr_html_(self) -> str | None:
        """In a Jupyter cell: the HTML report in an iframe (:mod:`traceq.report.notebook`)."""
        return display.html(self)


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
