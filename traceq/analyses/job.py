"""The job across ranks: per-rank summaries of the collectives, and the verdict (slow rank or slow link).

:func:`summarise_job` is a pure function of the collective table
(:func:`traceq.analyses.collectives.match_collectives`) and the per-rank breakdown
(:func:`per_rank_frame`): per rank how often it arrived last against chance, the wait it caused,
its compute per step against the median; and the verdict (slow rank, slow link, both, skewed,
balanced) with its one-line note.  :func:`analyze_job` runs the whole chain over one event table;
the report pipeline runs the same steps part by part.  Definitions: ``docs/multi-rank.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

import polars as pl

from traceq.analyses.collectives import (
    align_and_match,
    collective_calls,
    compute_activity,
    covered_waits_ns,
    with_exposed_waits,
)
from traceq.analyses.comm import with_comm_flags
from traceq.analyses.job_model import ClockAlignment, CollectiveStat, JobAnalysis, RankSummary
from traceq.analyses.model import Analysis, DeviceBreakdown
from traceq.analyses.steps import devices as device_table
from traceq.analyses.straggler_rule import CHANCE_LEVEL as CHANCE_LEVEL
from traceq.analyses.straggler_rule import HOST_CAUSES, late_phrase, straggler_expr, with_late_causes
from traceq.units import NOTE_DECIMALS, device_label, format_ns

MAX_COLLECTIVES: Final = 256
"""Collectives kept in :attr:`JobAnalysis.collectives` (the first, in time order); the table keeps all."""

MATERIAL_SHARE: Final = 0.05
"""A slow rank or a slow link matters from 5% of step time (the findings' ``FIRE_SHARE``)."""

LINK_WAIT_SHARE: Final = 0.5
"""A slow link: less than this share of the collectives' kernel time is waiting for a late rank."""

ALIGNMENT_TOLERANCE: Final = 0.25
"""Collectives end together: a residual skew above this share of the median transfer time puts a
caution in the job's note (clocks or matching off, or point-to-point transfers)."""


def per_rank_frame(devices: pl.DataFrame, breakdown: Sequence[DeviceBreakdown]) -> pl.DataFrame:
    """The per-rank breakdown :func:`summarise_job` reads: one row per device of ``devices``.

    Columns: dev, rank, device, pid, source, steps, dur_ns, compute_ns, exposed_comm_ns, idle_ns
    (totals over the device's step windows, from ``Analysis.devices``), and over its steady windows
    ``steady_steps``, ``idle_<cause>_ns`` for the host causes and ``longest_cpu_idle_ns`` (what says
    why a rank is late: :mod:`traceq.analyses.straggler_rule`).
    """
    counts = ("steps", "dur_ns", "compute_ns", "exposed_comm_ns", "idle_ns", "steady_steps", *HOST_COLUMNS)
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
                "steady_steps": d.steady.windows,
                **{f"idle_{c}_ns": d.steady.idle_by_cause_ns.get(c, 0) for c in HOST_CAUSES},
                "longest_cpu_idle_ns": d.steady.longest_cpu_idle_ns,
            }
            for d in breakdown
        ],
        schema={"source": pl.String, "pid": pl.Int64, "device": pl.Int32, **dict.fromkeys(counts, pl.Int64)},
    )
    return (
        devices.select("dev", "rank", "device", "pid", "source")
        .join(totals, on=["source", "pid", "device"], how="left", nulls_equal=True)
        .with_columns(pl.col(counts).fill_null(0))
        .sort("dev")
    )


HOST_COLUMNS: Final = (*(f"idle_{c}_ns" for c in HOST_CAUSES), "longest_cpu_idle_ns")
"""The per-rank frame's host-state columns (absent in a frame written by hand: read as 0)."""


def _rank_stats(table: pl.DataFrame, per_rank: pl.DataFrame) -> pl.DataFrame:
    """Per rank: its collectives, last arrivals against chance, waits, wait caused, compute per step,
    why it is late, and whether it is a straggler (:mod:`traceq.analyses.straggler_rule`)."""
    steps = pl.max_horizontal(pl.col("steps"), pl.lit(1))
    missing = [c for c in ("steady_steps", *HOST_COLUMNS) if c not in per_rank.columns]
    per_rank = per_rank.with_columns(
        pl.col("steps").alias(c) if c == "steady_steps" else pl.lit(0, dtype=pl.Int64).alias(c) for c in missing
    )
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
    comm = ranks.filter(pl.col("collectives") > 0).select("dev", "dur_ns", "steps", "compute_ns_per_step")
    cross = (
        comm.select(pl.col("dev").alias("culprit"))
        .join(comm, how="cross")
        .filter(pl.col("culprit") != pl.col("dev"))
        .join(pairs.drop("_caused"), on=["culprit", "dev"], how="left")
        .with_columns(pl.col("caused_ns").fill_null(0))
    )
    others = cross.group_by("culprit").agg(
        (pl.col("caused_ns") / pl.col("dur_ns")).filter(pl.col("dur_ns") > 0).median().alias("wait_caused_share"),
        (pl.col("caused_ns") / steps).median().alias("wait_caused_ns_per_step"),
        pl.col("compute_ns_per_step").median().alias("_others_compute"),
    )
    ranks = ranks.join(others.rename({"culprit": "dev"}), on="dev", how="left").with_columns(
        pl.col("wait_caused_share", "wait_caused_ns_per_step").fill_null(0.0)
    )
    ranks = with_late_causes(ranks)
    n, k = pl.col("decided"), pl.col("last_arrivals")
    p = pl.col("expected_last_arrivals") / n
    a = k / n
    divergence = pl.when(a > 0).then(a * (a / p).log()).otherwise(0.0) + pl.when(a < 1).then(
        (1 - a) * ((1 - a) / (1 - p)).log()
    ).otherwise(0.0)
    bound = pl.when((n > 0) & (a > p)).then((-n * divergence).exp()).otherwise(1.0)
    compared = ranks.filter(pl.col("decided") > 0).height
    ranks = ranks.with_columns(bound.alias("last_arrival_bound"))
    return ranks.with_columns(straggler_expr(compared).alias("straggler")).sort("dev")


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

    * **slow rank**: a rank flagged ``straggler`` (late beyond chance, by its arrival order or by
      the size of the waits it causes, and slower of its own: more compute per step than the
      others' median, or more host-caused idle: :mod:`traceq.analyses.straggler_rule`) whose wait
      caused reaches :data:`MATERIAL_SHARE` of the others' step time; the one causing the most if
      several.
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
            host_idle_ns_per_step=float(r["host_idle_ns_per_step"]),
            host_excess_ns_per_step=float(r["host_excess_ns_per_step"]),
            longest_cpu_idle_ns=int(r["longest_cpu_idle_ns"]),
            late_because=str(r["late_because"]),
            late_because_ns_per_step=float(r["late_because_ns_per_step"]),
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


def _note_ns(ns: float) -> str:
    return format_ns(ns, decimals=NOTE_DECIMALS)


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
            f"slow rank: {device_label(r.rank, r.device, pid=r.pid)} arrives last at {r.last_arrivals} of "
            f"{r.collectives} collectives ({r.expected_last_arrivals:.1f} expected by chance); the others wait "
            f"a median {r.wait_caused_share:.1%} of their step time for it; it computes "
            f"{_note_ns(r.compute_ns_per_step)} per step, {_note_ns(r.compute_excess_ns_per_step)} above the median; "
            f"late because {late_phrase(r, _note_ns)}"
        )
    if job.verdict in ("slow_link", "slow_rank_and_link"):
        parts.append(
            f"slow link: exposed communication takes {job.exposed_comm_share:.1%} of step time (median rank) and "
            f"only {job.wait_share:.1%} of the collectives' time is waiting for a late rank"
        )
    skew = _note_ns(job.median_arrival_skew_ns or 0)
    if job.verdict == "skewed" and job.slowest is not None:
        r = job.ranks[job.slowest]
        parts.append(
            f"skewed: ranks wait for one another ({job.wait_share:.1%} of the collectives' time, median arrival "
            f"skew {skew}); {device_label(r.rank, r.device, pid=r.pid)} costs the others the most "
            f"({r.wait_caused_share:.1%} of their step time, last at {r.last_arrivals} of {r.collectives}, "
            f"{r.expected_last_arrivals:.1f} expected by chance) but not often enough, or without enough extra "
            "compute or host delay of its own, to be called a straggler"
        )
    if job.verdict == "balanced":
        parts.append(
            f"balanced: no rank arrives last far more often than chance with more compute and a material wait; "
            f"median arrival skew {skew}, {job.wait_share:.1%} of the collectives' time is waiting"
        )
    residual, transfer = job.clock.residual_skew_ns, job.median_transfer_ns
    if residual is not None and transfer and residual > ALIGNMENT_TOLERANCE * transfer:
        parts.append(
            f"caution: matched collectives end a median {_note_ns(residual)} apart after alignment against a median "
            f"transfer of {_note_ns(transfer)}, so the clocks or the matching are off (or these are point-to-point "
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
    events = with_comm_flags(events, analysis.options)
    calls = collective_calls(events, table)
    alignment, matched = align_and_match(calls, anchors)
    if matched.height:
        matched = with_exposed_waits(matched, covered_waits_ns(matched, compute_activity(events, table)))
    return summarise_job(
        matched,
        per_rank_frame(table, analysis.devices),
        alignment,
        comm_calls=calls.height,
        max_collectives=max_collectives,
    )
