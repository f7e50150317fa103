"""Findings: diagnoses of a trace, each with its cost, evidence and the fix to try.

The rules live in :mod:`.findings_rules` (launch_bound, host_sync, input_stall, exposed_comm),
:mod:`.findings_kernels` (memory_bound_kernels, small_kernels) and :mod:`.findings_straggler`;
what they share (thresholds, context, the two kinds of rule) in :mod:`.findings_base`.
:data:`RANKED_RULES` rank the devices by a cost and fire on the worst when it reaches 5% of its
step time (:data:`~traceq.analyses.findings_base.FIRE_SHARE`), so always at 10% and never below
2%; :data:`JOB_RULES` read the whole job.  :func:`find_findings` runs them all over one event
table; the report pipeline runs the same rules part by part (:mod:`traceq.analyses.parts`).
Definitions, thresholds and fixes: ``docs/findings.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Final

import polars as pl

from traceq.analyses.comm import with_comm_flags
from traceq.analyses.findings_base import (
    FIRE_SHARE,
    SEVERITY_BANDS,
    JobRule,
    RankedRule,
    build_context,
    ranking,
    worst_of,
)
from traceq.analyses.findings_kernels import (
    MEMORY_BOUND_ALLOWANCE,
    SHORT_KERNEL_NS,
    memory_bound_excess_ns,
    memory_bound_kernels,
    small_kernel_ns,
    small_kernels,
)
from traceq.analyses.findings_rules import (
    exposed_comm,
    exposed_comm_ns,
    host_sync,
    input_idle_ns,
    input_stall,
    launch_bound,
    launch_idle_ns,
    sync_idle_ns,
)
from traceq.analyses.findings_straggler import straggler
from traceq.analyses.job import analyze_job
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.model import SEVERITIES, Analysis, Finding, Mfu

RANKED_RULES: Final = (
    RankedRule("launch_bound", launch_idle_ns, launch_bound),
    RankedRule("host_sync", sync_idle_ns, host_sync),
    RankedRule("input_stall", input_idle_ns, input_stall),
    RankedRule("exposed_comm", exposed_comm_ns, exposed_comm),
    RankedRule("memory_bound_kernels", memory_bound_excess_ns, memory_bound_kernels),
    RankedRule("small_kernels", small_kernel_ns, small_kernels),
)
"""The rules that rank devices by a cost and fire on the worst."""

JOB_RULES: Final = (JobRule("straggler", straggler),)
"""The rules that read the whole job (the cross-rank analysis)."""

FINDING_IDS: Final = (
    "launch_bound",
    "host_sync",
    "input_stall",
    "exposed_comm",
    "straggler",
    "memory_bound_kernels",
    "small_kernels",
)
"""Every finding id (of :data:`RANKED_RULES` and :data:`JOB_RULES`), in the order the docs list them."""

__all__ = [
    "FINDING_IDS",
    "FIRE_SHARE",
    "JOB_RULES",
    "MEMORY_BOUND_ALLOWANCE",
    "RANKED_RULES",
    "SEVERITY_BANDS",
    "SHORT_KERNEL_NS",
    "find_findings",
    "rank_findings",
]


def find_findings(
    events: pl.DataFrame, analysis: Analysis, *, mfu: Mfu | None = None, job: JobAnalysis | None = None
) -> tuple[Finding, ...]:
    """The findings that fire on ``events`` (the event table ``analysis`` was computed from).

    Sorted by severity (high, medium, low), then share (descending), then id.  ``mfu`` is
    accepted for rules that weigh utilisation; none of the current rules needs it.  ``job`` is
    the cross-rank analysis (clock-aligned collectives) the job rules read; without it, and with
    two or more devices, it is computed from ``events`` (clocks then aligned without the sources'
    anchors).
    """
    if not analysis.devices:
        return ()
    events = with_comm_flags(events, analysis.options)
    ctx = build_context(events, analysis, mfu, job)
    found: list[Finding | None] = []
    for rule in RANKED_RULES:
        worst = worst_of(ranking(ctx, rule.cost_ns))
        found.append(None if worst is None else rule.explain(ctx, worst))
    if job is None:
        job = analyze_job(events, analysis)
    found.extend(rule.find(ctx.devices, job) for rule in JOB_RULES)
    return rank_findings(found)


def rank_findings(findings: Iterable[Finding | None]) -> tuple[Finding, ...]:
    """The findings of the rules that fired (one per rule id), cross-referenced and most severe first:
    by severity (high, medium, low), then share (descending), then id."""
    found = {f.id: f for f in findings if f is not None}
    _point_exposed_comm_at_straggler(found)
    order = {name: i for i, name in enumerate(SEVERITIES)}
    return tuple(sorted(found.values(), key=lambda f: (order[f.severity], -f.share, f.id)))


def _point_exposed_comm_at_straggler(found: dict[str, Finding]) -> None:
    """When a straggler explains at least half of the exposed communication, the fix is the
    straggler's, not overlap tuning: overlapping the collectives cannot hide a wait for a slow rank.
    (Below half, the overlap advice stays, after a pointer to the straggler.)"""
    comm, slow = found.get("exposed_comm"), found.get("straggler")
    if comm is None or slow is None or slow.metrics["wait_share"] < 0.5 * comm.share:
        return
    rank = int(slow.metrics["slow_rank"])  # -1: the trace names no rank
    who = f"Rank {rank}" if rank >= 0 else f"GPU {int(slow.metrics['slow_device'])}"
    why = "its host is late" if slow.metrics.get("host_late") else "it computes longer"
    found["exposed_comm"] = replace(
        comm,
        fix=(
            f"Most of this is waiting for a straggler ({who}: {why}; see the straggler finding): fix that rank "
            "first. Overlap tuning (bucket sizes, prefetching) cannot hide a wait for a late rank."
        ),
    )
