"""Findings: diagnoses of a trace, each with its cost, evidence and the fix to try.

:func:`find_findings` runs every rule in :data:`RULES` over the event table and its
:class:`~traceq.analyses.model.Analysis` and returns the :class:`~traceq.analyses.model.Finding`
objects that fire, most severe first.  The rules live in :mod:`.findings_rules` (launch_bound,
host_sync, input_stall, exposed_comm), :mod:`.findings_straggler` and :mod:`.findings_kernels`
(memory_bound_kernels, small_kernels); what they share (thresholds, context, formatting) in
:mod:`.findings_base`.  Every rule fires when its cost reaches 5% of step time on some device
(:data:`~traceq.analyses.findings_base.FIRE_SHARE`), so always at 10% and never below 2%.
Definitions, thresholds and fixes: ``docs/findings.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Final

import polars as pl

from traceq.analyses.findings_base import FIRE_SHARE, SEVERITY_BANDS, FindingContext, build_context
from traceq.analyses.findings_kernels import (
    MEMORY_BOUND_ALLOWANCE,
    SHORT_KERNEL_NS,
    memory_bound_kernels,
    small_kernels,
)
from traceq.analyses.findings_rules import exposed_comm, host_sync, input_stall, launch_bound
from traceq.analyses.findings_straggler import straggler
from traceq.analyses.model import SEVERITIES, Analysis, Finding, JobAnalysis, Mfu

Rule = Callable[[FindingContext], Finding | None]

RULES: Final[tuple[tuple[str, Rule], ...]] = (
    ("launch_bound", launch_bound),
    ("host_sync", host_sync),
    ("input_stall", input_stall),
    ("exposed_comm", exposed_comm),
    ("straggler", straggler),
    ("memory_bound_kernels", memory_bound_kernels),
    ("small_kernels", small_kernels),
)
"""Every rule, by the stable id of the finding it makes."""

FINDING_IDS: Final = tuple(rule_id for rule_id, _ in RULES)

JOB_RULES: Final = ("straggler",)
"""Rules that read the whole job (``FindingContext.job``) instead of ranking devices by a cost with
``FindingContext.ranked``; every other rule ranks the devices once and fires on the worst, which
lets a report built rank by rank (:mod:`traceq.analyses.by_rank`) merge their rankings."""

__all__ = [
    "FINDING_IDS",
    "FIRE_SHARE",
    "JOB_RULES",
    "MEMORY_BOUND_ALLOWANCE",
    "RULES",
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
    the cross-rank analysis (clock-aligned collectives) the straggler rule reads; without it the
    rule computes its own from ``events``.
    """
    if not analysis.devices:
        return ()
    ctx = build_context(events, analysis, mfu, job)
    return rank_findings(rule(ctx) for _, rule in RULES)


def rank_findings(findings: Iterable[Finding | None]) -> tuple[Finding, ...]:
    """The findings of the rules that fired (one per rule id), cross-referenced and most severe first:
    by severity (high, medium, low), then share (descending), then id."""
    found = {f.id: f for f in findings if f is not None}
    _point_exposed_comm_at_straggler(found)
    order = {name: i for i, name in enumerate(SEVERITIES)}
    return tuple(sorted(found.values(), key=lambda f: (order[f.severity], -f.share, f.id)))


def _point_exposed_comm_at_straggler(found: dict[str, Finding]) -> None:
    """When a straggler explains at least half of the exposed communication, say so in its fix:
    overlapping the collectives cannot hide a wait for a slow rank."""
    comm, slow = found.get("exposed_comm"), found.get("straggler")
    if comm is None or slow is None or slow.metrics["wait_share"] < 0.5 * comm.share:
        return
    who = slow.title.split(" is a straggler")[0]
    found["exposed_comm"] = replace(
        comm,
        fix=f"Most of this is waiting for a straggler ({who}; see the straggler finding): fix that first. " + comm.fix,
    )
