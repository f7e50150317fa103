"""The straggler rule: one rank arrives last at the collectives and the others wait for it.

Seed ``../shared/seeds/000_*.txt``, section 2: "one rank slower than the others; the others wait
inside collectives ... per-rank step times; long NCCL kernels on the fast ranks".  Per-rank phase
times alone hide a straggler (the collectives equalise the step times), so the rule reads the
cross-rank analysis (:mod:`traceq.analyses.collectives`): collectives matched across ranks, who
arrived last, and the wait that cost the others.  ``docs/multi-rank.md`` has the definitions,
``docs/findings.md`` the rule.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import polars as pl

from traceq.analyses.findings_base import FIRE_SHARE, DeviceTotals, severity
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import Evidence, Finding
from traceq.units import evidence_ns, format_share

STRAGGLER_FIX = (
    "One rank computes longer than the others, which wait for it inside every collective: find what differs on "
    "that node (thermal or power limits, memory errors, a bad link, uneven data or work) and fix or replace it."
)

MAX_OTHERS = 3
"""Other ranks listed as evidence (those waiting longest)."""


def straggler(devices: Sequence[DeviceTotals], job: JobAnalysis | None) -> Finding | None:
    """The job's slow rank S (``JobAnalysis.straggler``: it arrives last far more often than chance
    and computes more per step than the median of the others), when the exposed wait it causes
    reaches 5% of the others' step time (median over the other communicating ranks).

    The cost is that median share: the time the others lose waiting for S with nothing of their own
    to compute.  A slow link (long collectives, little arrival skew) has no such rank and never fires.
    """
    if job is None or job.straggler is None:
        return None
    slow = job.ranks[job.straggler]
    share = slow.wait_caused_share
    if share < FIRE_SHARE:
        return None
    by_dev = {d.dev: d for d in devices}
    who_dev = by_dev[job.straggler]
    waits = _waits_for(job, job.straggler)
    others = [(by_dev[dev], ns) for dev, ns in waits if dev in by_dev]
    per_step = [ns / max(d.windows, 1) for d, ns in others]
    others_wait = statistics.median(per_step) if per_step else 0.0
    median_compute = job.median_compute_ns_per_step
    evidence = [
        Evidence(
            text=(
                f"{who_dev.title_label} arrives last at {slow.last_arrivals} of its {slow.collectives} collectives, "
                f"where chance would give {slow.expected_last_arrivals:.1f} (bound on that by chance: "
                f"{slow.last_arrival_bound:.2g})"
            ),
            rank=slow.rank,
            device=slow.device,
        ),
        Evidence(
            text=(
                f"{who_dev.title_label} computes {evidence_ns(slow.compute_ns_per_step)} per step against a median "
                f"{evidence_ns(median_compute)} over the ranks ({evidence_ns(slow.compute_excess_ns_per_step)} more)"
            ),
            rank=slow.rank,
            device=slow.device,
            value_ns=round(slow.compute_excess_ns_per_step),
        ),
        Evidence(
            text=(
                f"The others wait a median {evidence_ns(others_wait)} per step for it with nothing of their own to "
                f"compute ({format_share(share)} of their step time); {evidence_ns(slow.exposed_wait_caused_ns)} in "
                "all, "
                f"{evidence_ns(slow.wait_caused_ns)} counting the wait hidden behind their compute"
            ),
            rank=slow.rank,
            device=slow.device,
            value_ns=slow.exposed_wait_caused_ns,
        ),
    ]
    for d, ns in sorted(others, key=lambda dn: (-dn[1] / max(dn[0].dur_ns, 1), dn[0].dev))[:MAX_OTHERS]:
        evidence.append(
            Evidence(
                text=(
                    f"{d.title_label} waits {evidence_ns(ns / max(d.windows, 1))} per step for it "
                    f"({format_share(ns / d.dur_ns if d.dur_ns else 0.0)} of its step time); its exposed communication "
                    f"is {evidence_ns(d.exposed_comm_ns / max(d.windows, 1))} per step"
                ),
                rank=d.rank,
                device=d.device,
                value_ns=ns,
            )
        )
    widest = _widest_skew(job, job.straggler)
    if widest is not None:
        evidence.append(widest)
    who, peers = (f"Rank {slow.rank}", "ranks") if slow.rank is not None else (f"GPU {slow.device}", "GPUs")
    return Finding(
        id="straggler",
        severity=severity(share),
        title=(
            f"{who} is a straggler: the other {peers} wait {format_share(share)} of step time in collectives for it; "
            f"it arrives last at {slow.last_arrivals} of {slow.collectives} and computes "
            f"{evidence_ns(slow.compute_excess_ns_per_step)} per step more than the median ({who_dev.label})"
        ),
        share=share,
        metrics={
            "slow_rank": -1 if slow.rank is None else slow.rank,
            "slow_device": slow.device,
            "last_arrivals": slow.last_arrivals,
            "collectives": slow.collectives,
            "expected_last_arrivals": slow.expected_last_arrivals,
            "last_arrival_bound": slow.last_arrival_bound,
            "slow_compute_ns_per_step": slow.compute_ns_per_step,
            "median_compute_ns_per_step": median_compute,
            "compute_excess_ns_per_step": slow.compute_excess_ns_per_step,
            "wait_caused_ns": slow.exposed_wait_caused_ns,
            "others_wait_ns_per_step": others_wait,
            "wait_share": share,
            "median_arrival_skew_ns": job.median_arrival_skew_ns or 0,
            "ranks": len(job.ranks),
        },
        evidence=tuple(evidence),
        fix=STRAGGLER_FIX,
    )


def _waits_for(job: JobAnalysis, culprit: int) -> list[tuple[int, int]]:
    """``(dev, exposed wait ns)`` of every other communicating rank in the collectives ``culprit``
    arrived at last (0 for a rank that never waited for it)."""
    table = job.collective_table
    waited = (
        table.filter(pl.col("last_dev") == culprit)
        .group_by("dev")
        .agg(pl.col("exposed_wait_ns").sum())
        .filter(pl.col("dev") != culprit)
    )
    found = {int(dev): int(ns) for dev, ns in waited.iter_rows()}
    return [(i, found.get(i, 0)) for i, r in enumerate(job.ranks) if i != culprit and r.collectives > 0]


def _widest_skew(job: JobAnalysis, culprit: int) -> Evidence | None:
    """The collective with the largest arrival skew among those ``culprit`` arrived at last, at its
    start on the culprit's own clock (where the timeline draws it)."""
    rows = job.collective_table.filter((pl.col("last_dev") == culprit) & (pl.col("dev") == culprit))
    if rows.height == 0:
        return None
    top = rows.sort(["arrival_skew_ns", "collective"], descending=[True, False]).row(0, named=True)
    slow = job.ranks[culprit]
    return Evidence(
        text=(
            f"Widest arrival skew: {top['kind']} #{top['seq']} on {top['channel']}, which the others entered "
            f"{evidence_ns(top['arrival_skew_ns'])} before it"
        ),
        rank=slow.rank,
        device=slow.device,
        start_ns=int(top["start_ns"]),
        end_ns=int(top["end_ns"]),
        name=str(top["kind"]),
        value_ns=int(top["arrival_skew_ns"]),
    )
