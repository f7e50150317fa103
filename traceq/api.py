"""The public Python API: a few functions that the CLI is a thin layer over.

```python
import traceq
t = traceq.load("step.sqlite")     # .nsys-rep, .json(.gz), a directory, several files, .parquet
t.events                           # polars DataFrame: the unified event table
t.to_parquet("events.parquet")
```
"""

from __future__ import annotations

from typing import Any

from traceq import schema
from traceq.trace import Trace, TraceMeta, load

__all__ = ["Trace", "TraceMeta", "info", "load"]


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
