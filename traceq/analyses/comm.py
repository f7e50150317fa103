"""Communication kernels as the analyses see them: ``is_comm`` recomputed with the user's patterns.

The importers write ``is_comm`` by :data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS` (and, for
Kineto, a kernel's own ``Collective name``).  Every analysis entry point (``analyze``, the
findings, the job, a job's parts) recomputes the column from the kernel names with
:func:`with_comm_flags` before anything reads it, with the user's patterns
(``Options.comm_patterns``) added, or alone (``Options.default_comm_patterns`` false), so every
consumer (breakdown, collectives, kernel classes, regimes, findings, the timeline, a job's parts)
sees one flag:

    is_comm = kind == "kernel" and (name matches a pattern, or (defaults and the importer's is_comm))

With the defaults on, the importer's flag (the default patterns, the trace's collective metadata)
stays, and a table imported with fewer patterns (an older version's Parquet, a hand-built table)
gains the names the list now knows; with them off, only the user's patterns count.  The regex runs
once per distinct kernel name (the Categorical's codes), not per row.  :func:`comm_kernel_stats`
lists the names so counted, per device.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceq.analyses.model import CommKernelStat
from traceq.analyses.options import Options
from traceq.comm_kernels import (
    DEFAULT_COMM_PATTERNS,
    TRACE_METADATA,
    USER_PATTERN,
    comm_name_expr,
    effective_patterns,
)


def with_comm_flags(events: pl.DataFrame, options: Options) -> pl.DataFrame:
    """``events`` with ``is_comm`` recomputed for ``options`` (a new frame; the input is not changed)."""
    patterns = effective_patterns(options.comm_patterns, defaults=options.default_comm_patterns)
    is_kernel = pl.col("kind") == "kernel"
    kept = pl.col("is_comm").fill_null(False) if options.default_comm_patterns else pl.lit(False)
    if events.schema.get("name") == pl.Categorical:
        names = events.lazy().filter(is_kernel).select(pl.col("name").unique().drop_nulls()).collect()
        codes = names.filter(comm_name_expr(pl.col("name"), patterns)).select(pl.col("name").to_physical())
        matched = pl.col("name").to_physical().is_in(codes.to_series().implode())
    else:
        matched = comm_name_expr(pl.col("name"), patterns)
    return events.with_columns((is_kernel & (matched.fill_null(False) | kept)).alias("is_comm"))


def comm_kernel_stats(activity: pl.DataFrame, options: Options) -> dict[int, tuple[CommKernelStat, ...]]:
    """Per dev, every kernel name it counted as communication: count, total ns and the rule that
    counted it; most total time first, then by name.  ``activity``: dev, kind, name, start_ns,
    end_ns, is_comm (flagged for ``options``); a dev without communication kernels is left out."""
    dur = pl.col("end_ns") - pl.col("start_ns")
    totals = (
        activity.lazy()
        .filter((pl.col("kind") == "kernel") & pl.col("is_comm"))
        .group_by("dev", "name")
        .agg(pl.len().alias("count"), dur.sum().alias("total_ns"))
        .with_columns(pl.col("name").cast(pl.String).fill_null(""))
        .collect()
    )
    if totals.is_empty():
        return {}
    names = totals.select("name").unique().with_columns(_matched_by(options).alias("matched_by"))
    ordered = totals.join(names, on="name").sort(["dev", "total_ns", "name"], descending=[False, True, False])
    out: dict[int, tuple[CommKernelStat, ...]] = {}
    for (dev,), rows in ordered.partition_by("dev", as_dict=True, maintain_order=True).items():
        out[int(dev)] = tuple(
            CommKernelStat(
                name=r["name"], count=int(r["count"]), total_ns=int(r["total_ns"]), matched_by=r["matched_by"]
            )
            for r in rows.iter_rows(named=True)
        )
    return out


def _matched_by(options: Options) -> pl.Expr:
    """Per name: the first default library whose pattern matches, the user's patterns, else the
    trace's own metadata."""
    name = pl.col("name")
    out: pl.Expr = pl.lit(TRACE_METADATA)
    if options.comm_patterns:
        out = pl.when(comm_name_expr(name, options.comm_patterns)).then(pl.lit(USER_PATTERN)).otherwise(out)
    if options.default_comm_patterns:
        for pattern in reversed(DEFAULT_COMM_PATTERNS):
            out = pl.when(comm_name_expr(name, (pattern.regex,))).then(pl.lit(pattern.library)).otherwise(out)
    return out


def merge_comm_kernel_stats(lists: Sequence[Sequence[CommKernelStat]]) -> tuple[CommKernelStat, ...]:
    """Several devices' lists as one: counts and totals summed per name, the rule of the first list
    that names it; most total time first, then by name (what the report shows for a job)."""
    merged: dict[str, CommKernelStat] = {}
    for stats in lists:
        for s in stats:
            seen = merged.get(s.name)
            merged[s.name] = (
                s
                if seen is None
                else CommKernelStat(s.name, seen.count + s.count, seen.total_ns + s.total_ns, seen.matched_by)
            )
    return tuple(sorted(merged.values(), key=lambda s: (-s.total_ns, s.name)))


__all__ = ["comm_kernel_stats", "merge_comm_kernel_stats", "with_comm_flags"]
