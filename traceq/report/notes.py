"""Sentences both renderers (terminal and HTML) say the same way: why a device has ``unknown``
idle, what the report counted as communication, and what GPU work the trace lacks."""

from __future__ import annotations

from collections.abc import Sequence

from traceq.analyses.comm import merge_comm_kernel_stats
from traceq.analyses.model import CommKernelStat, DataCaveat, DeviceBreakdown
from traceq.units import format_ns, pct

NOTE_SHARE = 0.0005
"""Unknown idle below this share of step time (what prints as 0.0%) gets no note."""


def unknown_idle_note(d: DeviceBreakdown) -> str | None:
    """Why a device has ``unknown`` idle, in one sentence; None when it has (next to) none."""
    unknown = d.idle_by_cause_ns.get("unknown", 0)
    if d.dur_ns <= 0 or unknown < NOTE_SHARE * d.dur_ns:
        return None
    head = f"unknown idle {pct(unknown, d.dur_ns)}"
    activities = d.kernels + d.memcpys + d.memsets
    if d.unlaunched_activities and activities:
        return (
            f"{head}: {pct(d.unlaunched_activities, activities)} of its GPU activities "
            f"({d.unlaunched_activities:,} of {activities:,}) have no recorded launch "
            "(the profiler did not record their CPU side)"
        )
    return f"{head}: every GPU activity has its launch, but the host thread recorded nothing at those times"


def caveat_note(c: DataCaveat) -> str:
    """A caveat as the report prints it beside the breakdown: its text, and whether it withholds."""
    return c.text + ("; the findings measured on it are withheld" if c.withholds and c.devices else "")


def comm_kernels(devices: Sequence[DeviceBreakdown]) -> tuple[CommKernelStat, ...]:
    """Every kernel name counted as communication on any device, most time first (summed)."""
    return merge_comm_kernel_stats([d.comm_kernels for d in devices])


def comm_summary(stats: Sequence[CommKernelStat]) -> str:
    """``3 names, 1,234 calls, 45.6 ms of GPU time; counted by NCCL (2), DeepEP (1)``."""
    by_rule: dict[str, int] = {}
    for s in stats:
        by_rule[s.matched_by] = by_rule.get(s.matched_by, 0) + 1
    names = f"{len(stats)} name" + ("s" if len(stats) != 1 else "")
    calls = sum(s.count for s in stats)
    total = format_ns(sum(s.total_ns for s in stats))
    rules = ", ".join(f"{rule} ({n})" for rule, n in by_rule.items())
    return f"{names}, {calls:,} calls, {total} of GPU time; counted by {rules}"
