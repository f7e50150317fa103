"""Collectives across ranks: match them, measure arrival skew and waits, tell a slow rank from a slow link.

A *rank* here is a device of the device table (:func:`traceq.analyses.steps.devices`): one process on
one GPU, with its ``rank`` where the trace states it.  The pipeline, each step a function:

1. :func:`collective_calls`: every communication kernel (``is_comm``) of every rank, with its
   ``kind`` (AllReduce, AllGather, ReduceScatter, SendRecv, ... from the kernel name), its
   ``channel`` (the stream, or the stream's order of first use where ranks number streams
   differently) and ``seq``, its position among the rank's calls of that kind on that channel.
2. :func:`traceq.analyses.clock.align_clocks`: one offset per source.
3. :func:`match_collectives`: calls with the same ``(kind, channel, seq)`` on two or more ranks are
   one collective; per collective the arrival skew, the last rank, each rank's wait.
4. :func:`summarise_job`: a pure function of the collective table and the per-rank breakdown: per
   rank how often it arrived last against chance, the wait it caused, its compute per step against
   the median; and the verdict (slow rank, slow link, both, skewed, balanced).

:func:`analyze_job` runs them all.  Everything is vectorised over calls (polars); only the final
per-rank and per-collective dataclasses are built in Python.  Definitions: ``docs/multi-rank.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq import schema
from traceq.analyses.clock import MATCH_KEY, align_clocks, aligned
from traceq.analyses.model import Analysis, ClockAlignment, CollectiveStat, DeviceBreakdown, JobAnalysis, RankSummary
from traceq.analyses.steps import devices as device_table

MAX_COLLECTIVES: Final = 256
"""Collectives kept in :attr:`JobAnalysis.collectives` (the first, in time order); the table keeps all."""

CHANCE_LEVEL: Final = 0.01
"""A rank arrives last "far more often than chance" when the Chernoff bound on doing so by chance is
at most this, divided by the number of ranks compared (Bonferroni)."""

MATERIAL_SHARE: Final = 0.05
"""A slow rank or a slow link matters from 5% of step time (the findings' ``FIRE_SHARE``)."""

LINK_WAIT_SHARE: Final = 0.5
"""A slow link: less than this share of the collectives' kernel time is waiting for a late rank."""

ALIGNMENT_TOLERANCE: Final = 0.25
"""Collectives end together: a residual skew above this share of the median transfer time puts a
caution in the job's note (clocks or matching off, or point-to-point transfers)."""

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


def rank_label(rank: int | None, device: int, pid: int | None) -> str:
    """``rank 2, GPU 2``; ``GPU 1, pid 145`` when the trace names no rank."""
    if rank is not None:
        return f"rank {rank}, GPU {device}"
    return f"GPU {device}" if pid is None else f"GPU {device}, pid {pid}"


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
    exposed: np.ndarray = wait - _covered(table, compute)
    return exposed


def _covered(table: pl.DataFrame, compute: pl.DataFrame) -> np.ndarray:
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


def per_rank_frame(devices: pl.DataFrame, breakdown: Sequence[DeviceBreakdown]) -> pl.DataFrame:
    """The per-rank breakdown :func:`summarise_job` reads: one row per device of ``devices``.

    Columns: dev, rank, device, pid, source, steps, dur_ns, compute_ns, exposed_comm_ns, idle_ns
    (totals over the device's step windows, from ``Analysis.devices``).
    """
    totals = pl.DataFrame(
        [
            {
                "source": d.source,
                "pid": d.pid,
                "device": d.device,
                "steps": d.steps,
                "dur_ns": d.dur_ns,
                "compute_ns": d.compute_ns,
                "exposed_comm_ns": d.exposed_comm_ns,
                "idle_ns": d.idle_ns,
            }
            for d in breakdown
        ],
        schema={
            "source": pl.String,
            "pid": pl.Int64,
            "device": pl.Int32,
            "steps": pl.Int64,
            "dur_ns": pl.Int64,
            "compute_ns": pl.Int64,
            "exposed_comm_ns": pl.Int64,
            "idle_ns": pl.Int64,
        },
    )
    return (
        devices.select("dev", "rank", "device", "pid", "source")
        .join(totals, on=["source", "pid", "device"], how="left", nulls_equal=True)
        .with_columns(pl.col("steps", "dur_ns", "compute_ns", "exposed_comm_ns", "idle_ns").fill_null(0))
        .sort("dev")
    )


def _rank_stats(table: pl.DataFrame, per_rank: pl.DataFrame) -> pl.DataFrame:
    """Per rank: its collectives, last arrivals against chance, waits, wait caused, compute per step."""
    steps = pl.max_horizontal(pl.col("steps"), pl.lit(1))
    ranks = per_rank.with_columns(
        (pl.col("dur_ns") / steps).alias("step_ns_per_step"),
        (pl.col("compute_ns") / steps).alias("compute_ns_per_step"),
        (pl.col("exposed_comm_ns") / steps).alias("exposed_comm_ns_per_step"),
        (pl.col("idle_ns") / steps).alias("idle_ns_per_step"),
    )
    ranks = ranks.with_columns(
        (pl.col("compute_ns_per_step") - pl.col("compute_ns_per_step").median()).alias("compute_excess_ns_per_step")
    )
    decided = pl.col("arrival_skew_ns") > 0
    own = table.group_by("dev").agg(
        pl.len().alias("collectives"),
        (pl.col("dev") == pl.col("last_dev")).sum().alias("last_arrivals"),
        decided.sum().alias("decided"),
        (1.0 / pl.col("ranks")).filter(decided).sum().alias("expected_last_arrivals"),
        pl.col("wait_ns").sum().alias("wait_ns"),
        pl.col("exposed_wait_ns").sum().alias("exposed_wait_ns"),
    )
    pairs = (
        table.filter(pl.col("last_dev").is_not_null())
        .group_by(pl.col("last_dev").alias("culprit"), "dev")
        .agg(pl.col("wait_ns").sum().alias("_caused"), pl.col("exposed_wait_ns").sum().alias("caused_ns"))
    )
    caused = pairs.group_by("culprit").agg(
        pl.col("_caused").sum().alias("wait_caused_ns"), pl.col("caused_ns").sum().alias("exposed_wait_caused_ns")
    )
    ranks = (
        ranks.join(own, on="dev", how="left")
        .join(caused.rename({"culprit": "dev"}), on="dev", how="left")
        .with_columns(
            pl.col(
                "collectives",
                "last_arrivals",
                "decided",
                "wait_ns",
                "exposed_wait_ns",
                "wait_caused_ns",
                "exposed_wait_caused_ns",
            )
            .fill_null(0)
            .cast(pl.Int64),
            pl.col("expected_last_arrivals").fill_null(0.0),
        )
    )
    # Every (culprit, other) pair of communicating ranks, with the wait the culprit caused the other.
    comm = ranks.filter(pl.col("collectives") > 0).select("dev", "dur_ns", "compute_ns_per_step")
    cross = (
        comm.select(pl.col("dev").alias("culprit"))
        .join(comm, how="cross")
        .filter(pl.col("culprit") != pl.col("dev"))
        .join(pairs.drop("_caused"), on=["culprit", "dev"], how="left")
        .with_columns(pl.col("caused_ns").fill_null(0))
    )
    others = cross.group_by("culprit").agg(
        (pl.col("caused_ns") / pl.col("dur_ns")).filter(pl.col("dur_ns") > 0).median().alias("wait_caused_share"),
        pl.col("compute_ns_per_step").median().alias("_others_compute"),
    )
    ranks = ranks.join(others.rename({"culprit": "dev"}), on="dev", how="left").with_columns(
        pl.col("wait_caused_share").fill_null(0.0)
    )
    n, k = pl.col("decided"), pl.col("last_arrivals")
    p = pl.col("expected_last_arrivals") / n
    a = k / n
    divergence = pl.when(a > 0).then(a * (a / p).log()).otherwise(0.0) + pl.when(a < 1).then(
        (1 - a) * ((1 - a) / (1 - p)).log()
    ).otherwise(0.0)
    bound = pl.when((n > 0) & (a > p)).then((-n * divergence).exp()).otherwise(1.0)
    compared = ranks.filter(pl.col("decided") > 0).height
    ranks = ranks.with_columns(bound.alias("last_arrival_bound"))
    return ranks.with_columns(
        (
            (pl.col("last_arrival_bound") <= CHANCE_LEVEL / max(compared, 1))
            & (pl.col("compute_ns_per_step") > pl.col("_others_compute"))
        )
        .fill_null(False)
        .alias("straggler")
    ).sort("dev")


def summarise_job(
    table: pl.DataFrame,
    per_rank: pl.DataFrame,
    alignment: ClockAlignment,
    *,
    comm_calls: int,
    max_collectives: int = MAX_COLLECTIVES,
) -> JobAnalysis:
    """The job from its collective table (:func:`match_collectives`) and per-rank breakdown
    (:func:`per_rank_frame`, whose ``dev`` must be 0..n−1): per-rank summaries and the verdict.

    * **slow rank**: a rank flagged ``straggler`` (arrives last far more often than chance and
      computes more per step than the median of the others) whose wait caused reaches
      :data:`MATERIAL_SHARE` of the others' step time; the one causing the most if several.
    * **slow link**: exposed communication reaches :data:`MATERIAL_SHARE` of step time (median over
      ranks) while less than :data:`LINK_WAIT_SHARE` of the collectives' kernel time is waiting.
    * both: ``slow_rank_and_link``.  Otherwise **skewed** when some rank still costs the others
      :data:`MATERIAL_SHARE` of their step time (without passing the straggler test), else
      **balanced**; ``no_collectives`` when the table is empty.
    """
    stats = _rank_stats(table, per_rank)
    ranks = tuple(
        RankSummary(
            rank=r["rank"],
            device=int(r["device"]),
            pid=r["pid"],
            source=r["source"],
            steps=int(r["steps"]),
            step_ns_per_step=float(r["step_ns_per_step"]),
            compute_ns_per_step=float(r["compute_ns_per_step"]),
            exposed_comm_ns_per_step=float(r["exposed_comm_ns_per_step"]),
            idle_ns_per_step=float(r["idle_ns_per_step"]),
            compute_excess_ns_per_step=float(r["compute_excess_ns_per_step"]),
            collectives=int(r["collectives"]),
            last_arrivals=int(r["last_arrivals"]),
            expected_last_arrivals=float(r["expected_last_arrivals"]),
            last_arrival_bound=float(r["last_arrival_bound"]),
            wait_ns=int(r["wait_ns"]),
            exposed_wait_ns=int(r["exposed_wait_ns"]),
            wait_caused_ns=int(r["wait_caused_ns"]),
            exposed_wait_caused_ns=int(r["exposed_wait_caused_ns"]),
            wait_caused_share=float(r["wait_caused_share"]),
            straggler=bool(r["straggler"]),
        )
        for r in stats.iter_rows(named=True)
    )
    median_compute = _median(stats.get_column("compute_ns_per_step")) or 0.0
    stepped = stats.filter(pl.col("dur_ns") > 0)
    exposed_share = _median(stepped.get_column("exposed_comm_ns") / stepped.get_column("dur_ns")) or 0.0
    per = table.unique("collective", keep="first", maintain_order=True)
    kernel_ns = int((table.get_column("end_ns") - table.get_column("start_ns")).sum())
    wait_share = int(table.get_column("wait_ns").sum()) / kernel_ns if kernel_ns else 0.0
    skew = _median(per.get_column("arrival_skew_ns"))
    transfer = _median(per.get_column("transfer_ns"))
    caused = [(r.wait_caused_ns, -i) for i, r in enumerate(ranks)]
    slowest = -max(caused)[1] if caused and max(caused)[0] > 0 else None
    slow = [
        (r.wait_caused_share, -i) for i, r in enumerate(ranks) if r.straggler and r.wait_caused_share >= MATERIAL_SHARE
    ]
    straggler = -max(slow)[1] if slow else None
    link = table.height > 0 and exposed_share >= MATERIAL_SHARE and wait_share < LINK_WAIT_SHARE
    if table.height == 0:
        verdict = "no_collectives"
    elif straggler is not None:
        verdict = "slow_rank_and_link" if link else "slow_rank"
    elif link:
        verdict = "slow_link"
    elif max((r.wait_caused_share for r in ranks), default=0.0) >= MATERIAL_SHARE:
        verdict = "skewed"
    else:
        verdict = "balanced"
    job = JobAnalysis(
        clock=alignment,
        comm_calls=comm_calls,
        unmatched_calls=comm_calls - table.height,
        collectives_total=per.height,
        collectives=_collective_stats(table, per.head(max_collectives), len(ranks)),
        ranks=ranks,
        median_compute_ns_per_step=median_compute,
        median_arrival_skew_ns=None if skew is None else int(skew),
        median_transfer_ns=None if transfer is None else int(transfer),
        wait_share=wait_share,
        exposed_comm_share=exposed_share,
        verdict=verdict,
        straggler=straggler,
        slowest=slowest,
        note="",
        collective_table=table,
    )
    return _with_note(job)


def _median(values: pl.Series) -> float | None:
    if values.len() == 0:
        return None
    m = values.median()
    assert isinstance(m, int | float)
    return float(m)


def _collective_stats(table: pl.DataFrame, per: pl.DataFrame, n_ranks: int) -> tuple[CollectiveStat, ...]:
    chosen = table.join(per.select("collective"), on="collective", how="semi")
    wide = (
        chosen.select("collective", pl.col("dev").cast(pl.String), "wait_ns")
        .pivot(on="dev", index="collective", values="wait_ns")
        .sort("collective")
    )
    columns = [str(i) for i in range(n_ranks)]
    wide = wide.with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in columns if c not in wide.columns)
    waits = dict(zip(wide.get_column("collective").to_list(), wide.select(columns).rows(), strict=True))
    return tuple(
        CollectiveStat(
            index=int(r["collective"]),
            kind=r["kind"],
            channel=r["channel"],
            seq=int(r["seq"]),
            ranks=int(r["ranks"]),
            start_ns=int(r["first_start_ns"]),
            end_ns=int(r["_end"]),
            arrival_skew_ns=int(r["arrival_skew_ns"]),
            last=None if r["last_dev"] is None else int(r["last_dev"]),
            transfer_ns=int(r["transfer_ns"]),
            end_spread_ns=int(r["end_spread_ns"]),
            waits_ns=waits[r["collective"]],
        )
        for r in per.join(
            chosen.group_by("collective").agg(pl.col("aligned_end_ns").max().alias("_end")), on="collective"
        )
        .sort("collective")
        .iter_rows(named=True)
    )


def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def _with_note(job: JobAnalysis) -> JobAnalysis:
    """The job with its one-line ``note``: the verdict and its numbers, or why nothing was compared."""
    if job.verdict == "no_collectives":
        if job.comm_calls == 0:
            note = "no communication kernels on any rank: no collectives to compare"
        elif job.clock.method == "none":
            note = job.clock.note
        else:
            note = (
                f"none of the {job.comm_calls} communication kernels matches one on another rank "
                "(same kind, channel and position): no collectives to compare"
            )
        return replace(job, note=note)
    parts = []
    if job.straggler is not None:
        r = job.ranks[job.straggler]
        parts.append(
            f"slow rank: {rank_label(r.rank, r.device, r.pid)} arrives last at {r.last_arrivals} of "
            f"{r.collectives} collectives ({r.expected_last_arrivals:.1f} expected by chance); the others wait "
            f"a median {r.wait_caused_share:.1%} of their step time for it; it computes "
            f"{_fmt_ns(r.compute_ns_per_step)} per step, {_fmt_ns(r.compute_excess_ns_per_step)} above the median"
        )
    if job.verdict in ("slow_link", "slow_rank_and_link"):
        parts.append(
            f"slow link: exposed communication takes {job.exposed_comm_share:.1%} of step time (median rank) and "
            f"only {job.wait_share:.1%} of the collectives' time is waiting for a late rank"
        )
    skew = _fmt_ns(job.median_arrival_skew_ns or 0)
    if job.verdict == "skewed" and job.slowest is not None:
        r = job.ranks[job.slowest]
        parts.append(
            f"skewed: ranks wait for one another ({job.wait_share:.1%} of the collectives' time, median arrival "
            f"skew {skew}); {rank_label(r.rank, r.device, r.pid)} costs the others the most "
            f"({r.wait_caused_share:.1%} of their step time, last at {r.last_arrivals} of {r.collectives}, "
            f"{r.expected_last_arrivals:.1f} expected by chance) but not often enough, or without enough extra "
            "compute, to be called a straggler"
        )
    if job.verdict == "balanced":
        parts.append(
            f"balanced: no rank arrives last far more often than chance with more compute and a material wait; "
            f"median arrival skew {skew}, {job.wait_share:.1%} of the collectives' time is waiting"
        )
    residual, transfer = job.clock.residual_skew_ns, job.median_transfer_ns
    if residual is not None and transfer and residual > ALIGNMENT_TOLERANCE * transfer:
        parts.append(
            f"caution: matched collectives end a median {_fmt_ns(residual)} apart after alignment against a median "
            f"transfer of {_fmt_ns(transfer)}, so the clocks or the matching are off (or these are point-to-point "
            "transfers, which need not end together): read the skews with care"
        )
    return replace(job, note="; ".join(parts))


def analyze_job(
    events: pl.DataFrame,
    analysis: Analysis,
    *,
    anchors: Mapping[str, int | None] | None = None,
    max_collectives: int = MAX_COLLECTIVES,
) -> JobAnalysis | None:
    """The cross-rank analysis of ``events`` (``analysis`` computed from them); None with fewer than
    two devices.  ``anchors``: each source's ``clock_offset_ns`` by path (``SourceMeta``), for
    clock alignment by anchor; without them, sources are aligned by their collectives.
    """
    table = device_table(events)
    if table.height < 2:
        return None
    calls = collective_calls(events, table)
    alignment, matched = align_and_match(calls, anchors)
    if matched.height:
        matched = with_exposed_waits(matched, _covered(matched, compute_activity(events, table)))
    return summarise_job(
        matched,
        per_rank_frame(table, analysis.devices),
        alignment,
        comm_calls=calls.height,
        max_collectives=max_collectives,
    )


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
