"""traceq: where did the GPU step time go, and why?

Reads Nsight Systems exports and PyTorch-profiler (Kineto) traces into one columnar event table
(polars on Arrow) and analyses it.  Start with :func:`traceq.load`.
"""

from __future__ import annotations

from traceq.api import (
    Analysis,
    Budgets,
    CheckResult,
    Diff,
    ModelSpec,
    Report,
    Tables,
    Trace,
    TraceMeta,
    activity_operators,
    analyze,
    annotate,
    check,
    diff,
    events,
    info,
    load,
    mfu,
    operators,
    phases,
    report,
    sql,
    tables,
    to_sqlite,
)
from traceq.errors import TraceqError

__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "Budgets",
    "CheckResult",
    "Diff",
    "ModelSpec",
    "Report",
    "Tables",
    "Trace",
    "TraceMeta",
    "TraceqError",
    "__version__",
    "activity_operators",
    "analyze",
    "annotate",
    "check",
    "diff",
    "events",
    "info",
    "load",
    "mfu",
    "operators",
    "phases",
    "report",
    "sql",
    "tables",
    "to_sqlite",
]
