"""The public Python API: a few functions that the CLI is a thin layer over.

```python
import traceq
t = traceq.load("step.sqlite")     # .nsys-rep, .json(.gz), a directory, several files, .parquet
a = traceq.analyze(t)              # step breakdown, gaps and their causes, top kernels
r = traceq.report(t)               # what `traceq report` renders (r.to_dict() is the JSON)
```
"""

from __future__ import annotations

from typing import Any

from traceq import schema
from traceq.analyses import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS, Analysis
from traceq.analyses import analyze as _analyze
from traceq.report.model import Report
from traceq.trace import Trace, TraceMeta, load

__all__ = ["Analysis", "Report", "Trace", "TraceMeta", "analyze", "info", "load", "report"]


def info(trace: Trace) -> dict[str, Any]:
    """A JSON-ready summary of a trace: its sources, per-kind row counts and import statistics."""
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "sources": [s.to_dict() for s in trace.meta.sources],
        "rows": trace.events.height,
        "kinds": trace.kind_counts(),
        "import_stats": trace.import_stats.to_list(),
        "warnings": list(trace.meta.warnings),
    }


def analyze(
    trace: Trace,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    max_gaps: int = DEFAULT_MAX_GAPS,
    top_kernels: int = DEFAULT_TOP_KERNELS,
) -> Analysis:
    """Per device and step: compute, communication, exposed communication, idle time by cause.

    Definitions: ``docs/analyses.md``.  ``max_gaps`` bounds ``Analysis.gaps`` (longest first;
    ``Analysis.gap_table`` keeps every gap); ``top_kernels`` bounds ``Analysis.kernels``.
    """
    return _analyze(trace.events, step_pattern=step_pattern, max_gaps=max_gaps, top_kernels=top_kernels)


def report(
    trace: Trace,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    max_gaps: int = DEFAULT_MAX_GAPS,
    top_kernels: int = DEFAULT_TOP_KERNELS,
) -> Report:
    """The report object every renderer draws; ``.to_dict()`` is the JSON report."""
    analysis = analyze(trace, step_pattern=step_pattern, max_gaps=max_gaps, top_kernels=top_kernels)
    return Report.build(trace, analysis)
