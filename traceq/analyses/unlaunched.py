"""GPU work with no launching call: activity the profiler recorded without its CPU side.

A GPU activity (kernel, memcpy, memset) is **launched** when a ``cuda_api`` row of the same source
and process carries its correlation id (the launch, copy or graph-launch call that issued it; a
CUDA-graph launch issues every kernel of its graph under one id), and **unlaunched** otherwise,
including every activity without a correlation id.  Idle time before unlaunched work has no host
thread to read, so the idle attribution calls it ``unknown`` (``docs/analyses.md``); the report
says how much of a device's work is unlaunched next to that idle, and ``traceq info`` per source.
Typical causes: the profiler dropped or never recorded the CPU side (CUPTI buffers lost at the
start of a session, a ROCm trace without correlation ids, a process not profiled on the CPU).
"""

from __future__ import annotations

import polars as pl

from traceq import schema
from traceq.analyses.launch_link import KEYED, gathered, launch_link, rows_where


def unlaunched_activity(events: pl.DataFrame) -> pl.DataFrame:
    """The GPU activity rows of ``events`` with no launching call.

    Columns: source (String), pid, device, kind (String), in event order.
    """
    columns = (pl.col("source").cast(pl.String), "pid", "device", pl.col("kind").cast(pl.String))
    is_activity = pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS)
    link = launch_link(events)
    if not (link.has_activity & ~link.has_call).any():
        # Every key of activity has a call (a trace recorded whole): only the activity without a
        # key is unlaunched, found in one pass with nothing copied out but its rows.
        return events.lazy().filter(is_activity & ~KEYED).select(columns).collect()
    rows = rows_where(events, is_activity)
    return gathered(events, rows[~link.launched(rows)], *columns)


def launch_coverage(events: pl.DataFrame) -> pl.DataFrame:
    """Per source: its GPU activities and those with no launching call, by kind.

    Columns: source, activities, unlaunched, and ``unlaunched_kernels``, ``unlaunched_memcpys``,
    ``unlaunched_memsets``; one row per source with GPU activity, sorted by source.
    """
    activity = events.filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS)).select(pl.col("source").cast(pl.String))
    totals = activity.group_by("source").agg(pl.len().cast(pl.Int64).alias("activities"))
    missing = (
        unlaunched_activity(events)
        .group_by("source")
        .agg(
            pl.len().cast(pl.Int64).alias("unlaunched"),
            *(
                (pl.col("kind") == kind).sum().cast(pl.Int64).alias(f"unlaunched_{kind}s")
                for kind in schema.GPU_ACTIVITY_KINDS
            ),
        )
    )
    counts = ["unlaunched", *(f"unlaunched_{kind}s" for kind in schema.GPU_ACTIVITY_KINDS)]
    return totals.join(missing, on="source", how="left").with_columns(pl.col(counts).fill_null(0)).sort("source")


__all__ = ["launch_coverage", "unlaunched_activity"]
