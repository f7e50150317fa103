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
from traceq.analyses.job_model import JobAnalysis, RankSummary
from traceq.analyses.model import Evidence, Finding
from traceq.analyses.straggler_rule import HOST_LATE, late_phrase
from traceq.units import evidence_ns, format_share

STRAGGLER_FIX = (
    "One rank computes longer than the others, which wait for it inside every collective: find what differs on "
    "that node (thermal or power limits, memory errors, a bad link, uneven data or work) and fix or replace it."
)

HOST_CHECKS = {
    "python": "Python work in its step (logging, metrics, callbacks, data transforms on the main thread)",
    "gc": "garbage collection (gc.freeze() after setup; gc.disable() during steps, gc.collect() between them)",
    "loader": "a slow data loader on that node (more workers, pin_memory and prefetching, local or cached data)",
    "sync": "a .item(), .cpu() or print(tensor) only that rank runs, often rank-0 logging (log every k steps)",
    "compile": "recompilation on that rank (TORCH_LOGS=recompiles: shapes or Python values unlike the others')",
}
"""What to look for on a rank whose host makes it late."""

HOST_ORDER = {
    "pause": ("gc", "python", "loader"),
    "cpu": ("python", "gc", "loader"),
    "input": ("loader", "python", "gc"),
    "sync": ("sync", "python", "gc", "loader"),
    "compile": ("compile", "python", "gc", "loader"),
}
"""The checks by why the rank is late (``RankSummary.late_because``), the likeliest first."""


def host_fix(who: str, late_because: str) -> str:
    """The fix for a rank its own host makes late: the likeliest check first, then the others."""
    first, *rest = (HOST_CHECKS[k] for k in HOST_ORDER[late_because])
    return (
        f"{who}'s GPU waits for its own host, and every other rank waits for it in the collectives: look for "
        f"{first} first; then for {'; '.join(rest)}. Overlap tuning cannot hide this wait."
    )


MAX_OTHERS = 3
"""Other ranks listed as evidence (those waiting longest)."""


def straggler(devices: Sequence[DeviceTotals], job: JobAnalysis | None) -> Finding | None:
    """The job's slow rank S (``JobAnalysis.straggler``: late beyond chance, by arrival order or by
    the size of the waits, and slower of its own: its GPU computes longer or its host keeps it idle),
    when the exposed wait it causes reaches 5% of the others' step time (median over the other
    communicating ranks).

    The cost is that median share: the time the others lose waiting for S with nothing of their own
    to compute.  Title, evidence and fix name why S is late: its GPU (compute), or its host (CPU-bound,
    a GC-like pause, its data loader, a sync, compiling: ``RankSummary.late_because``).  A slow link
    (long collectives, little arrival skew) has no such rank and never fires.
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
    host_late = slow.late_because in HOST_LATE
    if host_late:
        evidence.insert(1, _host_evidence(who_dev, slow))
    who, peers = (f"Rank {slow.rank}", "ranks") if slow.rank is not None else (f"GPU {slow.device}", "GPUs")
    why = (
        f", late because {late_phrase(slow, evidence_ns)}"
        if host_late
        else f" and computes {evidence_ns(slow.compute_excess_ns_per_step)} per step more than the median"
    )
    return Finding(
        id="straggler",
        severity=severity(share),
        title=(
            f"{who} is a straggler: the other {peers} wait {format_share(share)} of step time in collectives for it; "
            f"it arrives last at {slow.last_arrivals} of {slow.collectives}{why} ({who_dev.label})"
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
            "host_late": 1.0 if host_late else 0.0,
            "host_excess_ns_per_step": slow.host_excess_ns_per_step,
            "late_because_ns_per_step": slow.late_because_ns_per_step,
            "longest_cpu_idle_ns": slow.longest_cpu_idle_ns,
        },
        evidence=tuple(evidence),
        fix=host_fix(who, slow.late_because) if host_late else STRAGGLER_FIX,
        measured_on=who_dev.ref,
    )


def _host_evidence(who: DeviceTotals, slow: RankSummary) -> Evidence:
    """Why the straggler's host, not its GPU, makes it late: its host-caused idle against the others'."""
    others = slow.host_idle_ns_per_step - slow.host_excess_ns_per_step
    return Evidence(
        text=(
            f"{who.title_label} idles {evidence_ns(slow.host_idle_ns_per_step)} per step waiting for its own host "
            f"(other CPU work, its data loader, a sync, compiling), against a median {evidence_ns(others)} on the "
            f"others; its longest CPU-side idle stretch is {evidence_ns(slow.longest_cpu_idle_ns)}"
        ),
        rank=slow.rank,
        device=slow.device,
        value_ns=round(slow.late_because_ns_per_step),
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
