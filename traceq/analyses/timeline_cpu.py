"""The timeline excerpt's CPU side: the threads that launched the drawn devices' work in the window,
and what each was doing there.

A thread is a *launching thread* of a device when one of its CUDA/HIP API calls has the
correlation id of a GPU activity of that device overlapping the window (same source and process).
A thread that launched on several drawn devices is drawn once, under the first of them.  Its spans
in the window, clipped to it, each with a ``kind`` that names the idle cause it would explain
(the same colours on the page):

* ``sync``: a synchronising call (:data:`~traceq.analyses.host_state.SYNC_CALL_PATTERN`);
* ``launch``: any other CUDA/HIP API call (the launches, allocations, event records);
* ``input``: a data-loader range (the default pattern and ``--input-pattern``);
* ``compile``: compile work (:func:`~traceq.analyses.host_state.labelled`'s ``_compile``);
* ``cpu``: an operator (``cpu_op``).

Other ranges (the step ranges, NVTX) and Python frames are left out: they cover the whole window
and would hide the calls.  More than ``max_spans`` spans keep the longest (ties: earliest start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

import polars as pl

from traceq import schema
from traceq.analyses.host_state import cpu_rows, labelled
from traceq.analyses.longest import at_least_nth_longest

SPAN_KINDS: Final = ("sync", "launch", "input", "compile", "cpu")
"""Values of :attr:`TimelineSpan.kind`: the idle cause whose colour the span is drawn in."""


@dataclass(frozen=True)
class TimelineSpan:
    """One CPU span of a launching thread on the timeline excerpt (ns, clipped to the window);
    ``device`` is the drawn device the thread launched on (the first, if several)."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"kind": SPAN_KINDS}

    rank: int | None
    device: int
    pid: int | None
    tid: int
    kind: str
    name: str
    start_ns: int
    end_ns: int


def cpu_spans(
    events: pl.DataFrame,
    keys: pl.DataFrame,
    start_ns: int,
    end_ns: int,
    max_spans: int,
    *,
    input_pattern: str | None = None,
) -> tuple[tuple[TimelineSpan, ...], int]:
    """The spans of the launching threads of ``keys``' devices (source, pid, device, _rank,
    _order) in ``[start_ns, end_ns)``, and how many there were before downsampling."""
    near = (pl.col("start_ns") < end_ns) & (pl.col("end_ns") > start_ns)
    # (lazy: an eager filter copies every column of the table's rows before the select)
    activity = (
        events.lazy()
        .filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS) & near & pl.col("correlation").is_not_null())
        .select(pl.col("source").cast(pl.String), "pid", "device", "correlation")
        .join(keys.lazy(), on=["source", "pid", "device"], how="inner", nulls_equal=True)
        .unique()
        .collect()
    )
    if activity.is_empty():
        return (), 0
    cpu = cpu_rows(events)
    ids = activity.get_column("correlation").unique().implode()
    threads = (
        # (the calls with one of the window's ids first: a few rows of millions to join)
        cpu.lazy()
        .filter((pl.col("kind") == "cuda_api") & pl.col("correlation").is_in(ids))
        .select("source", "pid", "tid", "correlation")
        .collect()
        .join(activity, on=["source", "pid", "correlation"], how="inner", nulls_equal=False)
        .group_by("source", "pid", "tid")
        .agg(pl.col("_order").min(), pl.col("device").sort_by("_order").first(), pl.col("_rank").first())
    )
    if threads.is_empty():
        return (), 0
    rows = labelled(
        cpu.lazy()
        .filter(near)
        .join(threads.lazy(), on=["source", "pid", "tid"], how="inner", nulls_equal=True)
        .collect(),
        step_pattern="^$",
        input_pattern=input_pattern,
    )
    kind = (
        pl.when(pl.col("_sync"))
        .then(pl.lit("sync"))
        .when(pl.col("_loader"))
        .then(pl.lit("input"))
        .when(pl.col("_compile"))
        .then(pl.lit("compile"))
        .when(pl.col("kind") == "cuda_api")
        .then(pl.lit("launch"))
        .when(pl.col("kind") == "cpu_op")
        .then(pl.lit("cpu"))
        .otherwise(pl.lit(None, pl.String))
    )
    rows = (
        rows.with_columns(kind.alias("_kind"))
        .filter(pl.col("_kind").is_not_null())
        .select(
            "_order",
            "_rank",
            "device",
            "pid",
            "tid",
            "_kind",
            pl.col("name").cast(pl.String),
            pl.max_horizontal("start_ns", pl.lit(start_ns)).alias("start_ns"),
            pl.min_horizontal("end_ns", pl.lit(end_ns)).alias("end_ns"),
        )
    )
    total = rows.height
    if total > max_spans:
        rows = (
            at_least_nth_longest(rows, max_spans, pl.col("end_ns") - pl.col("start_ns"))
            .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("_dur"))
            .sort(["_dur", "start_ns", "_order", "tid", "name"], descending=[True, False, False, False, False])
            .head(max_spans)
            .drop("_dur")
        )
    rows = rows.sort(
        ["_order", "tid", "start_ns", "end_ns", "_kind", "name"], descending=[False, False, False, True, False, False]
    )
    spans = tuple(
        TimelineSpan(
            rank=r["_rank"],
            device=int(r["device"]),
            pid=r["pid"],
            tid=int(r["tid"]),
            kind=r["_kind"],
            name=r["name"] or "?",
            start_ns=int(r["start_ns"]),
            end_ns=int(r["end_ns"]),
        )
        for r in rows.iter_rows(named=True)
    )
    return spans, total
