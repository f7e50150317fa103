"""The straggler rule: one rank computes longer per step while the others wait in collectives.

Seed ``../shared/seeds/000_*.txt``, section 2: "one rank slower than the others; the others wait
inside collectives ... per-rank step times; long NCCL kernels on the fast ranks".  The rule reads
only the step breakdown (compute and exposed communication per device); collective arrival skew
(when each rank entered each collective) will refine it, which is why it lives on its own.
``docs/findings.md`` has the definition.
"""

from __future__ import annotations

import statistics

from traceq.analyses.findings_base import FIRE_SHARE, DeviceTotals, FindingContext, fmt_ns, fmt_share, severity
from traceq.analyses.model import Evidence, Finding

STRAGGLER_FIX = (
    "One rank computes longer than the others, which wait for it inside every collective: find what differs on "
    "that node (thermal or power limits, memory errors, a bad link, uneven data or work) and fix or replace it."
)

MAX_OTHERS = 3
"""Other ranks listed as evidence (those waiting longest)."""


def straggler(ctx: FindingContext) -> Finding | None:
    """One rank computes longer per step while the others wait inside collectives.

    Over the devices that communicate (at least two), the slow device S has the largest compute
    share of step time; with the medians over the others,
    ``skew = compute_share(S) − median(compute_share(others))`` and
    ``wait = median(exposed_comm_share(others)) − exposed_comm_share(S)``.  The cost is
    ``min(skew, wait)``: both must hold, so a slow link (long collectives everywhere, no compute
    skew) does not fire.  Collective arrival skew will refine ``wait`` (a later issue).
    """
    ranks = [d for d in ctx.devices if d.comm_ns > 0 and d.dur_ns > 0]
    if len(ranks) < 2:
        return None
    compute = {d.dev: d.compute_ns / d.dur_ns for d in ranks}
    waits = {d.dev: d.exposed_comm_ns / d.dur_ns for d in ranks}
    slow = max(ranks, key=lambda d: (compute[d.dev], -d.dev))
    others = [d for d in ranks if d.dev != slow.dev]
    skew = compute[slow.dev] - statistics.median(compute[d.dev] for d in others)
    wait = statistics.median(waits[d.dev] for d in others) - waits[slow.dev]
    share = min(skew, wait)
    if share < FIRE_SHARE:
        return None

    def per_step(d: DeviceTotals, ns: int) -> float:
        return ns / max(d.windows, 1)

    slow_compute = per_step(slow, slow.compute_ns)
    others_compute = statistics.median(per_step(d, d.compute_ns) for d in others)
    others_wait = statistics.median(per_step(d, d.exposed_comm_ns) for d in others)
    slow_wait = per_step(slow, slow.exposed_comm_ns)
    evidence = [
        Evidence(
            text=(
                f"{slow.title_label} computes {fmt_ns(slow_compute)} per step ({fmt_share(compute[slow.dev])} of its "
                f"step), the others a median {fmt_ns(others_compute)} ({fmt_share(compute[slow.dev] - skew)})"
            ),
            rank=slow.rank,
            device=slow.device,
            value_ns=round(slow_compute),
        ),
        Evidence(
            text=(
                f"The others wait a median {fmt_ns(others_wait)} per step in collectives with nothing to compute "
                f"({fmt_share(wait + waits[slow.dev])} of step time); {slow.label} waits {fmt_ns(slow_wait)}"
            ),
            rank=slow.rank,
            device=slow.device,
            value_ns=round(others_wait - slow_wait),
        ),
    ]
    for d in sorted(others, key=lambda d: (-waits[d.dev], d.dev))[:MAX_OTHERS]:
        evidence.append(
            Evidence(
                text=(
                    f"{d.title_label}: compute {fmt_ns(per_step(d, d.compute_ns))} per step, exposed communication "
                    f"{fmt_ns(per_step(d, d.exposed_comm_ns))} per step ({fmt_share(waits[d.dev])})"
                ),
                rank=d.rank,
                device=d.device,
                value_ns=round(per_step(d, d.exposed_comm_ns)),
            )
        )
    who, peers = (f"Rank {slow.rank}", "ranks") if slow.rank is not None else (f"GPU {slow.device}", "GPUs")
    return Finding(
        id="straggler",
        severity=severity(share),
        title=(
            f"{who} is a straggler: the other {peers} wait {fmt_share(share)} of step time in collectives for its "
            f"{fmt_ns(slow_compute - others_compute)} of extra compute per step ({slow.label})"
        ),
        share=share,
        metrics={
            "slow_rank": -1 if slow.rank is None else slow.rank,
            "slow_device": slow.device,
            "slow_compute_ns_per_step": slow_compute,
            "others_compute_ns_per_step": others_compute,
            "compute_skew_share": skew,
            "slow_exposed_comm_ns_per_step": slow_wait,
            "others_exposed_comm_ns_per_step": others_wait,
            "wait_share": wait,
            "ranks": len(ranks),
        },
        evidence=tuple(evidence),
        fix=STRAGGLER_FIX,
    )
