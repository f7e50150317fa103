"""Collectives across ranks: find the communication kernels, match them across ranks, measure the waits.

A *rank* here is a device of the device table (:func:`traceq.analyses.steps.devices`): one process on
one GPU, with its ``rank`` where the trace states it.  The pipeline, each step a function:

1. :func:`collective_calls`: every communication kernel (``is_comm``) of every rank, with its
   ``kind`` (AllReduce, AllGather, ReduceScatter, SendRecv, ... from the kernel name), its
   ``channel`` (the stream, or the stream's order of first use where ranks number streams
   differently) and ``seq``, its position among the rank's calls of that kind on that channel.
2. :func:`traceq.analyses.clock.align_clocks`: one offset per source.
3. :func:`match_collectives`: calls with the same ``(kind, channel, seq)`` on two or more ranks are
   one collective; per collective the arrival skew, the last rank, each rank's wait, and the part
   of it that the rank's own compute does not cover (:func:`with_exposed_waits`).
4. :func:`traceq.analyses.job.summarise_job`: the verdict over the collective table.

:func:`align_and_match` is steps 2 and 3.  Everything is vectorised over calls (polars).
Definitions: ``docs/multi-rank.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq import schema
from traceq.analyses.clock import MATCH_KEY, align_clocks, aligned
from traceq.analyses.job_model import ClockAlignment

KINDS: Final = (
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "SendRecv",
    "Broadcast",
    "AllToAll",
    "Reduce",
    "Send",
    "Recv",
)
"""Collective kinds recognised in kernel names, in matching order (AllReduce before Reduce)."""

_KIND_PATTERN: Final = "(?i)(" + "|".join(KINDS) + ")"


def kind_expr(name: str = "name") -> pl.Expr:
    """The collective kind of a kernel name: the first of :data:`KINDS` in it (any case), else the
    name up to its argument list (``ncclDevKernel_Generic``)."""
    text = pl.col(name).cast(pl.String)
    found = text.str.extract(_KIND_PATTERN, 1).str.to_lowercase()
    canonical = found.replace_strict({k.lower(): k for k in KINDS}, default=None, return_dtype=pl.String)
    return canonical.fill_null(text.str.replace(r"\(.*$", "")).alias("kind")


def collective_calls(events: pl.DataFrame, devices: pl.DataFrame) -> pl.DataFrame:
    """Every communication kernel on a device of ``devices`` (:func:`traceq.analyses.steps.devices`).

    Columns: dev (UInt32), source (String), stream (Int64), kind (String), channel (String),
    seq (UInt32), start_ns, end_ns (the source's own clock).  ``channel`` is ``stream S`` when every
    rank that runs this kind runs it on the same set of stream ids, else ``stream #i`` (the i-th
    stream of this kind on the rank, by first use).  ``seq`` numbers a rank's calls of one kind on
    one channel from 0, by start (then end).  Sorted by dev, start_ns, end_ns.
    """
    calls = (
        events.filter((pl.col("kind") == "kernel") & pl.col("is_comm") & pl.col("device").is_not_null())
        .select(pl.col("source").cast(pl.String), "pid", "device", "stream", kind_expr(), "start_ns", "end_ns")
        .join(devices.select("dev", "source", "pid", "device"), on=["source", "pid", "device"], nulls_equal=True)
        .drop("pid", "device")
    )
    streams = calls.group_by("dev", "kind", "stream").agg(pl.col("start_ns").min().alias("_first"))
    streams = streams.with_columns(
        pl.struct("_first", "stream").rank("dense").over("dev", "kind").cast(pl.Int64).alias("_order"),
        pl.col("dev").n_unique().over("kind").alias("_devs"),
        pl.col("dev").n_unique().over("kind", "stream").alias("_devs_on_stream"),
    )
    by_id = streams.group_by("kind").agg((pl.col("_devs_on_stream") == pl.col("_devs")).all().alias("_by_id"))
    streams = streams.join(by_id, on="kind").select(
        "dev",
        "kind",
        "stream",
        pl.when(pl.col("_by_id"))
        .then(pl.format("stream {}", pl.col("stream").cast(pl.String).fill_null("?")))
        .otherwise(pl.format("stream #{}", pl.col("_order")))
        .alias("channel"),
    )
    calls = calls.join(streams, on=["dev", "kind", "stream"], how="left", nulls_equal=True)
    calls = calls.sort("dev", "start_ns", "end_ns").with_columns(
        pl.int_range(pl.len(), dtype=pl.UInt32).over("dev", "kind", "channel").alias("seq")
    )
    return calls.select("dev", "source", "stream", "kind", "channel", "seq", "start_ns", "end_ns")


def compute_activity(events: pl.DataFrame, devices: pl.DataFrame) -> pl.DataFrame:
    """Every non-communication GPU activity (kernel, memcpy, memset) on a device of ``devices``:
    columns dev, start_ns, end_ns (the breakdown's *compute*)."""
    return (
        events.filter(
            pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS) & ~pl.col("is_comm") & pl.col("device").is_not_null()
        )
        .select(pl.col("source").cast(pl.String), "pid", "device", "start_ns", "end_ns")
        .join(devices.select("dev", "source", "pid", "device"), on=["source", "pid", "device"], nulls_equal=True)
        .select("dev", "start_ns", "end_ns")
    )


def match_collectives(
    calls: pl.DataFrame, alignment: ClockAlignment, compute: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The collective table: one row per call of a collective matched on ≥ 2 ranks.

    Columns: collective (UInt32, time order by the earliest arrival), kind, channel, seq, dev,
    start_ns, end_ns (own clock), aligned_start_ns, aligned_end_ns (reference clock), ranks (UInt32,
    ranks in the collective), first_start_ns, last_start_ns, arrival_skew_ns
    (= last_start_ns − first_start_ns), last_dev (UInt32; the latest start, ties to the lowest dev;
    null when the skew is 0), wait_ns (= last_start_ns − aligned_start_ns), transfer_ns (the last
    arrival's kernel duration; with no skew, the lowest dev's), end_spread_ns (latest − earliest
    aligned end), exposed_wait_ns (the ns of ``[start_ns, start_ns + wait_ns)`` not covered by the
    rank's own compute: ``compute`` has dev, start_ns, end_ns of every non-communication activity;
    without it the whole wait counts).  Sorted by collective, dev.
    """
    rows = aligned(calls, alignment)
    by = list(MATCH_KEY)
    latest_first = pl.struct(-pl.col("aligned_start_ns"), pl.col("dev"))
    per = rows.group_by(by).agg(
        pl.len().cast(pl.UInt32).alias("ranks"),
        pl.col("aligned_start_ns").min().alias("first_start_ns"),
        pl.col("aligned_start_ns").max().alias("last_start_ns"),
        pl.col("dev").sort_by(latest_first).first().alias("_top_dev"),
        (pl.col("end_ns") - pl.col("start_ns")).sort_by(latest_first).first().alias("transfer_ns"),
        (pl.col("aligned_end_ns").max() - pl.col("aligned_end_ns").min()).alias("end_spread_ns"),
    )
    per = (
        per.filter(pl.col("ranks") >= 2)
        .with_columns((pl.col("last_start_ns") - pl.col("first_start_ns")).alias("arrival_skew_ns"))
        .with_columns(pl.when(pl.col("arrival_skew_ns") > 0).then(pl.col("_top_dev")).alias("last_dev"))
        .sort("first_start_ns", *by)
        .with_row_index("collective")
        .drop("_top_dev")
    )
    table = rows.join(per, on=by, how="inner").with_columns(
        (pl.col("last_start_ns") - pl.col("aligned_start_ns")).alias("wait_ns")
    )
    table = table.select(
        "collective",
        *by,
        "dev",
        "start_ns",
        "end_ns",
        "aligned_start_ns",
        "aligned_end_ns",
        "ranks",
        "first_start_ns",
        "last_start_ns",
        "arrival_skew_ns",
        "last_dev",
        "wait_ns",
        "transfer_ns",
        "end_spread_ns",
    ).sort("collective", "dev")
    return table.with_columns(pl.Series("exposed_wait_ns", _exposed_waits(table, compute), dtype=pl.Int64))


def _exposed_waits(table: pl.DataFrame, compute: pl.DataFrame | None) -> np.ndarray:
    """Per row of ``table``: its wait minus the part of it covered by the rank's own compute."""
    wait: np.ndarray = table.get_column("wait_ns").to_numpy().astype(np.int64)
    if compute is None or table.height == 0:
        return wait
    exposed: np.ndarray = wait - covered_waits_ns(table, compute)
    return exposed


def covered_waits_ns(table: pl.DataFrame, compute: pl.DataFrame) -> np.ndarray:
    """Per row of ``table``: the ns of its wait covered by its rank's compute."""
    covered = np.zeros(table.height, np.int64)
    devs = table.get_column("dev").to_numpy()
    start = table.get_column("start_ns").to_numpy().astype(np.int64)
    wait = table.get_column("wait_ns").to_numpy().astype(np.int64)
    for (dev,), rows in compute.partition_by("dev", as_dict=True).items():
        on = devs == dev
        if on.any():
            covered[on] = wait_covered_ns(rows, start[on], wait[on])
    return covered


def wait_covered_ns(compute: pl.DataFrame, start_ns: np.ndarray, wait_ns: np.ndarray) -> np.ndarray:
    """Per wait ``[start_ns[i], start_ns[i] + wait_ns[i])`` of one rank (its own clock): the ns of it
    covered by that rank's ``compute`` (columns start_ns, end_ns: :func:`compute_activity`'s rows of
    the rank).  ``wait − covered`` is the exposed wait."""
    start = np.asarray(start_ns, np.int64)
    waits = iv.Intervals(start, start + np.asarray(wait_ns, np.int64))
    return iv.measure_in_windows(iv.Intervals.from_frame(compute), waits)


def with_exposed_waits(table: pl.DataFrame, covered_ns: np.ndarray) -> pl.DataFrame:
    """The collective table with ``exposed_wait_ns = wait_ns − covered_ns`` (one value per row, as
    :func:`wait_covered_ns` gives for each rank's rows): what :func:`match_collectives` computes
    from ``compute``, when the ranks' compute lies elsewhere (one worker per rank)."""
    exposed = table.get_column("wait_ns").to_numpy().astype(np.int64) - np.asarray(covered_ns, np.int64)
    return table.with_columns(pl.Series("exposed_wait_ns", exposed, dtype=pl.Int64))


def align_and_match(
    calls: pl.DataFrame, anchors: Mapping[str, int | None] | None
) -> tuple[ClockAlignment, pl.DataFrame]:
    """The clock alignment of ``calls`` (:func:`collective_calls`) and their collective table, with
    ``exposed_wait_ns`` still equal to ``wait_ns`` (see :func:`with_exposed_waits`); the table is
    empty when the clocks could not be aligned."""
    alignment = align_clocks(calls, anchors)
    if alignment.method == "none":
        return alignment, _empty_table(calls)
    return alignment, match_collectives(calls, alignment)


def _empty_table(calls: pl.DataFrame) -> pl.DataFrame:
    return match_collectives(calls.head(0), ClockAlignment("none", None, {"": 0}, None, ""))
