"""Idle gaps on each device and the CPU call that explains each one.

A gap is a maximal interval with no activity (kernel, memcpy, memset, on any stream) on a device,
between two activities.  Let A be the activity that ends it (the earliest start at the gap's
end; ties: lowest correlation id) and L the CUDA API call that launched A (same source, process
and correlation id).  The cause, tried in this order:

* ``unknown``: no launching call was recorded;
* ``other``: L ended at or before the gap started (the work was queued; the GPU waited on
  something else, such as a cross-stream event);
* ``input``: A is a host-to-device copy (the GPU waited for input data);
* ``sync``: a synchronising call S on L's thread ended inside ``[gap start, L.start]`` (the
  latest such S is the match);
* ``launch``: otherwise (the CPU was late: launch overhead, Python, a data loader).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from traceq import intervals as iv

SYNC_CALL_PATTERN: Final = (
    r"^(?:"
    r"(?:cuda|hip)(?:Stream|Device|Event|Ctx|Thread)Synchronize"
    r"|cu(?:Stream|Ctx|Event)Synchronize"
    r"|(?:cuda|hip)Memcpy(?:2D|3D)?(?:To|From)?(?:Symbol|Array)?(?:Peer)?"
    r"|cuMemcpy(?:[DHA]to[DHA]|2D|3D|Peer)?(?:Unaligned)?"
    r")(?:_v\d+)?$"
)
"""Names of calls that block the CPU until the GPU catches up: the stream/device/event/context
synchronisations (runtime, driver and HIP) and the synchronous (non-``Async``) copies."""


def sync_calls(events: pl.DataFrame) -> pl.DataFrame:
    """The synchronising CUDA API calls. Columns: source, pid, tid, name, start_ns, end_ns, correlation."""
    is_api = pl.col("kind") == "cuda_api"
    api_names = events.lazy().filter(is_api).select(pl.col("name").unique()).collect().to_series()
    syncing = _matching_names(api_names, SYNC_CALL_PATTERN)
    return (
        events.select("kind", "source", "pid", "tid", "name", "start_ns", "end_ns", "correlation")
        .filter(is_api & pl.col("name").is_in(syncing.implode()))  # only the sync calls are copied
        .select(
            pl.col("source").cast(pl.String),
            "pid",
            "tid",
            pl.col("name").cast(pl.String),
            "start_ns",
            "end_ns",
            "correlation",
        )
        .sort("end_ns")
    )


def _matching_names(names: pl.Series, pattern: str) -> pl.Series:
    """The distinct values of ``names`` (Categorical or String) that match ``pattern``: the regex
    runs once per distinct name, not once per row."""
    distinct = names.unique()
    return distinct.filter(distinct.cast(pl.String).str.contains(pattern))


def find_gaps(activity: pl.DataFrame) -> pl.DataFrame:
    """Gaps per device. ``activity`` needs columns dev, start_ns, end_ns.

    Columns: dev (UInt32), start_ns, end_ns, dur_ns; sorted by dev, start_ns.
    """
    if activity.is_empty():
        return pl.DataFrame(schema={"dev": pl.UInt32, "start_ns": pl.Int64, "end_ns": pl.Int64, "dur_ns": pl.Int64})
    # Per device, its rows keep their event (start) order, so each merge is one linear pass.
    devs = activity.get_column("dev").to_numpy()
    order = np.argsort(devs.astype(np.uint16) if devs.max() < 1 << 16 else devs, kind="stable")  # radix
    devs = devs[order]
    starts = activity.get_column("start_ns").to_numpy()[order]
    ends = activity.get_column("end_ns").to_numpy()[order]
    bounds = np.flatnonzero(np.diff(devs)) + 1
    key_parts, start_parts, end_parts = [], [], []
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), devs.size], strict=True):
        found = iv.gaps(iv.Intervals(starts[lo:hi], ends[lo:hi]))
        key_parts.append(np.full(len(found), devs[lo], np.int64))
        start_parts.append(found.start_ns)
        end_parts.append(found.end_ns)
    keys = np.concatenate(key_parts)
    gaps = iv.Intervals(np.concatenate(start_parts), np.concatenate(end_parts))
    return pl.DataFrame(
        {
            "dev": keys.astype(np.uint32),
            "start_ns": gaps.start_ns,
            "end_ns": gaps.end_ns,
            "dur_ns": gaps.lengths_ns(),
        }
    )


def attribute_gaps(gaps: pl.DataFrame, activity: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Each gap with the activity that ended it, its launching call, the matched sync and the cause.

    ``gaps`` comes from :func:`find_gaps`; ``activity`` has the activity rows with their ``dev``
    (columns dev, source, pid, start_ns, end_ns, name, kind, stream, correlation, copy_kind).

    Columns of the result: dev, start_ns, end_ns, dur_ns, cause, next_name, next_kind,
    next_stream, next_correlation, next_start_ns, next_end_ns, launch_name, launch_start_ns,
    launch_end_ns, launch_tid, launch_correlation, sync_name, sync_start_ns, sync_end_ns,
    sync_tid, sync_correlation.  Same row order as ``gaps``.
    """
    gap_ends = gaps.select("dev", pl.col("end_ns").alias("start_ns"))
    # The activity that ends each gap: among those starting at the gap's end, the lowest
    # correlation id.  Only the rows starting at some gap end are sorted and turned into strings.
    at_some_end = pl.col("start_ns").is_in(gap_ends.get_column("start_ns").unique().implode())
    starting = (
        activity.with_row_index("_row")
        .select("_row", "dev", "start_ns", "correlation")
        .filter(at_some_end)  # a cheap pre-filter, so that the join sees few rows
        .join(gap_ends, on=["dev", "start_ns"], how="semi")
        .sort("dev", "start_ns", "correlation", nulls_last=True, maintain_order=True)
        .unique(subset=["dev", "start_ns"], keep="first", maintain_order=True)
    )
    first_at = activity.select(
        pl.col("source", "pid", "name", "kind", "stream", "correlation", "start_ns", "end_ns", "copy_kind").gather(
            starting.get_column("_row")
        )
    ).select(
        starting.get_column("dev"),
        pl.col("start_ns").alias("end_ns"),
        pl.col("source").cast(pl.String),
        "pid",
        pl.col("name").cast(pl.String).alias("next_name"),
        pl.col("kind").cast(pl.String).alias("next_kind"),
        pl.col("stream").alias("next_stream"),
        pl.col("correlation").alias("next_correlation"),
        pl.col("start_ns").alias("next_start_ns"),
        pl.col("end_ns").alias("next_end_ns"),
        ((pl.col("kind") == "memcpy") & (pl.col("copy_kind") == "HtoD")).alias("_next_is_input"),
    )
    launches = _launches(events, first_at.select("source", "pid", "next_correlation"))
    out = (
        gaps.with_row_index("_order")
        .join(first_at, on=["dev", "end_ns"], how="left")
        .join(launches, on=["source", "pid", "next_correlation"], how="left", nulls_equal=False)
        .with_columns(
            pl.when(pl.col("launch_name").is_not_null()).then(pl.col("next_correlation")).alias("launch_correlation")
        )
    )
    out = _match_syncs(out, sync_calls(events))
    cause = (
        pl.when(pl.col("launch_name").is_null())
        .then(pl.lit("unknown"))
        .when(pl.col("launch_end_ns") <= pl.col("start_ns"))
        .then(pl.lit("other"))
        .when(pl.col("_next_is_input"))
        .then(pl.lit("input"))
        .when(pl.col("sync_name").is_not_null())
        .then(pl.lit("sync"))
        .otherwise(pl.lit("launch"))
    )
    out = out.with_columns(cause.alias("cause"))
    # A sync is evidence only where it decided the cause.
    sync_cols = ["sync_name", "sync_start_ns", "sync_end_ns", "sync_tid", "sync_correlation"]
    out = out.with_columns(
        [pl.when(pl.col("cause") == "sync").then(pl.col(c)).otherwise(None).alias(c) for c in sync_cols]
    )
    return out.sort("_order").select(
        "dev",
        "start_ns",
        "end_ns",
        "dur_ns",
        "cause",
        "next_name",
        "next_kind",
        "next_stream",
        "next_correlation",
        "next_start_ns",
        "next_end_ns",
        "launch_name",
        "launch_start_ns",
        "launch_end_ns",
        "launch_tid",
        "launch_correlation",
        *sync_cols,
    )


def _launches(events: pl.DataFrame, wanted: pl.DataFrame) -> pl.DataFrame:
    """The launching API call of each (source, pid, correlation) in ``wanted``: the earliest one.

    Columns: source (String), pid, next_correlation, launch_name, launch_start_ns, launch_end_ns,
    launch_tid.  The API rows are cut down to the wanted correlation ids before anything is
    sorted or turned into strings.
    """
    ids = wanted.get_column("next_correlation").drop_nulls().unique()
    calls = events.select("kind", "source", "pid", "correlation", "name", "start_ns", "end_ns", "tid").filter(
        (pl.col("kind") == "cuda_api") & pl.col("correlation").is_in(ids.implode())
    )
    return (
        calls.select(
            pl.col("source").cast(pl.String),
            "pid",
            pl.col("correlation").alias("next_correlation"),
            pl.col("name").cast(pl.String).alias("launch_name"),
            pl.col("start_ns").alias("launch_start_ns"),
            pl.col("end_ns").alias("launch_end_ns"),
            pl.col("tid").alias("launch_tid"),
        )
        .join(wanted.unique(), on=["source", "pid", "next_correlation"], how="semi", nulls_equal=False)
        .sort("launch_start_ns", maintain_order=True)
        .unique(subset=["source", "pid", "next_correlation"], keep="first", maintain_order=True)
    )


def _match_syncs(gaps: pl.DataFrame, syncs: pl.DataFrame) -> pl.DataFrame:
    """Attach the latest sync call on the launching thread that ended in [gap start, launch start]."""
    right = syncs.select(
        "source",
        "pid",
        pl.col("tid").alias("launch_tid"),
        pl.col("end_ns").alias("_sync_key"),
        pl.col("name").alias("sync_name"),
        pl.col("start_ns").alias("sync_start_ns"),
        pl.col("end_ns").alias("sync_end_ns"),
        pl.col("tid").alias("sync_tid"),
        pl.col("correlation").alias("sync_correlation"),
    ).sort("_sync_key")
    with_launch = gaps.filter(pl.col("launch_start_ns").is_not_null())
    without = gaps.filter(pl.col("launch_start_ns").is_null())
    matched = (
        with_launch.with_columns(pl.col("launch_start_ns").alias("_sync_key"))
        .sort("_sync_key")
        .join_asof(
            right, on="_sync_key", by=["source", "pid", "launch_tid"], strategy="backward", check_sortedness=False
        )
        .drop("_sync_key")
    )
    too_early = pl.col("sync_end_ns") < pl.col("start_ns")
    sync_cols = ["sync_name", "sync_start_ns", "sync_end_ns", "sync_tid", "sync_correlation"]
    matched = matched.with_columns([pl.when(too_early).then(None).otherwise(pl.col(c)).alias(c) for c in sync_cols])
    empty = without.with_columns(
        pl.lit(None, dtype=pl.String).alias("sync_name"),
        pl.lit(None, dtype=pl.Int64).alias("sync_start_ns"),
        pl.lit(None, dtype=pl.Int64).alias("sync_end_ns"),
        pl.lit(None, dtype=pl.Int64).alias("sync_tid"),
        pl.lit(None, dtype=pl.Int64).alias("sync_correlation"),
    )
    return pl.concat([matched, empty], how="vertical_relaxed")
