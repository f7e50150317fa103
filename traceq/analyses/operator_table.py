"""The operator table: per device and operator, the GPU work it launched (``docs/analyses.md``,
"Operators"), and the few activities' operators the findings name.

Both read each launching call's operator range (:func:`~traceq.analyses.operators.call_operators`)
by position, with no row per activity: the table sums the activities per (device, operator range)
and then per name, where a 20 M-row trace's ten million activities would otherwise each get a row
with their call's thread, operator name, start and end only to be grouped.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceq.analyses.chunks import with_columns_like
from traceq.analyses.launch_link import ON_DEVICE, as_index, launching_calls
from traceq.analyses.model import OperatorStat
from traceq.analyses.operators import RANGE, call_operators, ranges_at
from traceq.analyses.options import DEFAULT_STEP_PATTERN
from traceq.analyses.steps import device_activity

OPERATOR_TABLE_COLUMNS: Final = (
    "rank",
    "device",
    "pid",
    "source",
    "op_name",
    "calls",
    "activities",
    "kernels",
    "gpu_ns",
    "mean_ns",
    "max_ns",
    "share",
)
"""The columns of :func:`operator_table`."""


def operator_table(activity: pl.DataFrame, device_table: pl.DataFrame) -> pl.DataFrame:
    """Per device and operator, the GPU work it launched (``activity``:
    :func:`~traceq.analyses.operators.activity_operators` or
    :func:`~traceq.analyses.operators.operator_links`; ``device_table``:
    :func:`traceq.analyses.steps.devices`).

    Columns: rank, device, pid, source, op_name (null: work with no operator), calls (distinct
    operator ranges that launched work), activities (kernels, memcpys, memsets), kernels, gpu_ns
    (sum of the activities' durations), mean_ns (``gpu_ns // activities``), max_ns (longest
    activity), share (``gpu_ns`` over the device's summed activity durations).  Sorted by rank,
    source, pid, device, then gpu_ns descending and op_name."""
    # A lazy query: polars' eager group_by gathered every group's rows of a 10 M-row frame into
    # fresh memory (1.8 GB, 0.8-2.5 s); the query's engine aggregates as it reads (15 MB, 0.2 s).
    grouped = (
        activity.lazy()
        .group_by("source", "pid", "device", "op_name")
        .agg(
            _calls(pl.struct("launch_tid", "op_start_ns", "op_end_ns"), pl.col("op_start_ns")),
            pl.len().cast(pl.Int64).alias("activities"),
            (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels"),
            pl.col("dur_ns").sum().cast(pl.Int64).alias("gpu_ns"),
            pl.col("dur_ns").max().cast(pl.Int64).alias("max_ns"),
        )
        .with_columns(pl.col("source", "op_name").cast(pl.String))  # (codes where from operator_links)
        .collect()
    )
    return _finished(grouped, device_table)


def _calls(op: pl.Expr, start: pl.Expr) -> pl.Expr:
    """The ``calls`` of a group: its distinct operator ranges (``op``: (thread, start, end)), where
    it has one (``start`` not null)."""
    return op.filter(start.is_not_null()).n_unique().cast(pl.Int64).alias("calls")


def operator_table_of(
    events: pl.DataFrame,
    device_table: pl.DataFrame,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    cpu: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``operator_table(operator_links(events, ...), device_table)``, without a row per activity:
    each activity's operator range is read by its launching call's position, the activities are
    summed per (device, operator range), and those sums per operator name (a 20 M-row trace's ten
    million activities become a few hundred thousand range sums before any name is read).
    ``cpu``: as :func:`~traceq.analyses.operators.activity_operators`."""
    found = call_operators(events, step_pattern=step_pattern, cpu=cpu)
    ranges = found.chosen.get_column(RANGE).gather(as_index(launching_calls(events).points))
    activity = device_activity(events).select(
        "source", "pid", "device", "kind", (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
    )
    per_range = (
        with_columns_like(activity, ranges)
        .lazy()
        .group_by("source", "pid", "device", RANGE)
        .agg(
            pl.len().cast(pl.Int64).alias("activities"),
            (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels"),
            pl.col("dur_ns").sum().alias("gpu_ns"),
            pl.col("dur_ns").max().alias("max_ns"),
        )
        .collect()
    )
    of_range = ranges_at(
        found.ops, per_range.get_column(RANGE), *(pl.col(c) for c in ("tid", "name", "start_ns", "end_ns"))
    )
    grouped = (
        pl.concat([per_range, of_range], how="horizontal")
        .lazy()
        .group_by("source", "pid", "device", pl.col("name").alias("op_name"))
        .agg(
            _calls(pl.struct("tid", "start_ns", "end_ns"), pl.col("start_ns")),
            *(pl.col(c).sum().cast(pl.Int64) for c in ("activities", "kernels", "gpu_ns")),
            pl.col("max_ns").max().cast(pl.Int64),
        )
        .with_columns(pl.col("source", "op_name").cast(pl.String))
        .collect()
    )
    return _finished(grouped, device_table)


def operator_names_of(
    events: pl.DataFrame, correlations: pl.Series, *, step_pattern: str = DEFAULT_STEP_PATTERN
) -> pl.DataFrame:
    """The operator of each GPU activity on a device whose correlation id is one of
    ``correlations``, as :func:`~traceq.analyses.operators.activity_operators` names it, read for
    those rows alone.

    Columns: source (String), pid, correlation, op_name (String; null: no operator); in event order."""
    found = call_operators(events, step_pattern=step_pattern)
    rows = (
        events.lazy()
        .filter(ON_DEVICE)
        .select("source", "pid", "correlation")
        .with_row_index("_row")  # (its place among the activities on a device)
        .filter(pl.col("correlation").is_in(correlations.implode()))
        .collect()
    )
    points = launching_calls(events).points[rows.get_column("_row").to_numpy()]
    names = ranges_at(
        found.ops, found.chosen.get_column(RANGE).gather(as_index(points)), pl.col("name").alias("op_name")
    )
    return pl.concat(
        [rows.select(pl.col("source").cast(pl.String), "pid", "correlation"), names.cast(pl.String)],
        how="horizontal",
    )


def _finished(grouped: pl.DataFrame, device_table: pl.DataFrame) -> pl.DataFrame:
    """The operator table from its sums per (source, pid, device, op_name): rank, mean, share, order."""
    keys = device_table.select("source", "pid", "device", "rank")
    total = pl.col("gpu_ns").sum().over("source", "pid", "device")
    return (
        grouped.join(keys, on=["source", "pid", "device"], how="left", nulls_equal=True)
        .with_columns(
            (pl.col("gpu_ns") // pl.col("activities")).alias("mean_ns"),
            pl.when(total > 0).then(pl.col("gpu_ns") / total).otherwise(0.0).alias("share"),
        )
        .sort(
            ["rank", "source", "pid", "device", "gpu_ns", "op_name"],
            descending=[False, False, False, False, True, False],
            nulls_last=[False, False, False, False, False, True],
        )
        .select(OPERATOR_TABLE_COLUMNS)
    )


NO_OPERATOR: Final = "(no operator)"
"""How the report names work launched outside every operator (or with no launch)."""


def top_operators(table: pl.DataFrame, limit: int) -> tuple[OperatorStat, ...]:
    """The ``limit`` operators with the most GPU time over every device (ties: by name), from rows of
    :func:`operator_table` (of one trace or of a job's parts); each share is of the summed time of
    every row."""
    if table.is_empty():
        return ()
    summed = table.group_by(pl.col("op_name").fill_null(NO_OPERATOR)).agg(
        pl.col("calls", "activities", "kernels", "gpu_ns").sum()
    )
    grand = int(summed.get_column("gpu_ns").sum() or 0)
    ranked = summed.sort(["gpu_ns", "op_name"], descending=[True, False]).head(limit)
    return tuple(
        OperatorStat(
            name=str(r["op_name"]),
            calls=int(r["calls"]),
            activities=int(r["activities"]),
            kernels=int(r["kernels"]),
            gpu_ns=int(r["gpu_ns"]),
            share=int(r["gpu_ns"]) / grand if grand else 0.0,
        )
        for r in ranked.iter_rows(named=True)
    )
