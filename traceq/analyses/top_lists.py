"""The report's top lists: the longest idle gaps (:func:`longest_gaps`) and the kernel names with the
most GPU time (:func:`kernel_totals`, :func:`top_kernels`), of one event table or of a job's parts,
whose rows are ranked the same way once merged."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.analyses.model import CAUSES, ActivityRef, CallRef, Gap, KernelStat


def _call_ref(row: dict[str, Any], prefix: str) -> CallRef | None:
    """The ``<prefix>_*`` columns of a gap-table row as a :class:`CallRef` (None where unmatched)."""
    if row[f"{prefix}_name"] is None:
        return None
    return CallRef(
        name=row[f"{prefix}_name"],
        start_ns=row[f"{prefix}_start_ns"],
        end_ns=row[f"{prefix}_end_ns"],
        tid=row[f"{prefix}_tid"],
        correlation=row[f"{prefix}_correlation"],
    )


def longest_gap_rows(gap_table: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The ``limit`` longest rows of a gap table (:attr:`Analysis.gap_table`'s columns), ordered by
    duration (longest first), then rank (nulls first), device and start."""
    return gap_table.sort(["dur_ns", "rank", "device", "start_ns"], descending=[True, False, False, False]).head(limit)


def longest_gaps(gap_table: pl.DataFrame, limit: int) -> tuple[Gap, ...]:
    """:func:`longest_gap_rows` as :class:`Gap` objects (of one table, or of the rows a job's parts
    hand in, each part its own longest)."""
    top = longest_gap_rows(gap_table, limit)
    out = []
    for row in top.iter_rows(named=True):
        launch = _call_ref(row, "launch")
        sync = _call_ref(row, "sync")
        out.append(
            Gap(
                rank=row["rank"],
                device=int(row["device"]),
                pid=row["pid"],
                start_ns=int(row["start_ns"]),
                end_ns=int(row["end_ns"]),
                dur_ns=int(row["dur_ns"]),
                in_steps_ns=int(row["in_steps_ns"]),
                kind=row["kind"],
                cause=row["cause"],
                causes_ns={c: int(row[f"{c}_ns"]) for c in CAUSES},
                next=None
                if row["next_start_ns"] is None
                else ActivityRef(
                    name=row["next_name"],
                    kind=row["next_kind"],
                    stream=row["next_stream"],
                    correlation=row["next_correlation"],
                    start_ns=int(row["next_start_ns"]),
                    end_ns=int(row["next_end_ns"]),
                ),
                launch=launch,
                sync=sync,
            )
        )
    return tuple(out)


def kernel_totals(events: pl.DataFrame) -> pl.DataFrame:
    """Per kernel name: how often it ran, its total and its longest duration.

    Columns: name (String), count (UInt32), total_ns, max_ns; one row per distinct name, in no
    particular order (:func:`top_kernels` orders them).
    """
    dur = pl.col("end_ns") - pl.col("start_ns")
    return (
        events.lazy()
        .filter(pl.col("kind") == "kernel")
        .group_by("name")  # by the Categorical: names become strings only per distinct name
        .agg(pl.len().alias("count"), dur.sum().alias("total_ns"), dur.max().alias("max_ns"))
        .with_columns(pl.col("name").cast(pl.String))
        .collect()
    )


def kernel_name_count(totals: pl.DataFrame) -> int:
    """How many distinct kernel names the rows of :func:`kernel_totals` hold (of one table or of
    several: a name in two parts counts once)."""
    return totals.get_column("name").n_unique() if "name" in totals.columns else 0


def top_kernels(totals: pl.DataFrame, limit: int) -> tuple[KernelStat, ...]:
    """The ``limit`` kernel names with the most total GPU time (ties: by name), from the rows of
    :func:`kernel_totals` of one event table or of several (a job's parts): rows of one name are
    summed first, and each share is of the summed time of every name."""
    if totals.height != totals.get_column("name").n_unique():
        totals = totals.group_by("name").agg(pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("max_ns").max())
    grand = int(totals.get_column("total_ns").sum() or 0)
    ranked = totals.sort(["total_ns", "name"], descending=[True, False]).head(limit)
    return tuple(
        KernelStat(
            name=row["name"],
            count=int(row["count"]),
            total_ns=int(row["total_ns"]),
            mean_ns=int(row["total_ns"]) // int(row["count"]),
            max_ns=int(row["max_ns"]),
            share=(int(row["total_ns"]) / grand) if grand else 0.0,
        )
        for row in ranked.iter_rows(named=True)
    )
