"""The findings rules on idle time and communication: launch_bound, host_sync, input_stall and
exposed_comm (straggler has its own module, :mod:`.findings_straggler`).

Each reads the step breakdown of :mod:`traceq.analyses.breakdown` (idle time by the cause of its
gaps, exposed communication) from a :class:`~traceq.analyses.findings_base.FindingContext`,
fires on the worst device when the cost reaches ``FIRE_SHARE`` of its step time, and names the
gaps, calls and collectives behind it.  The fixes come from the seeds' tables
(``../shared/seeds/000_*.txt`` section 2, ``004_*.txt`` step 3); ``docs/findings.md`` has each
rule's definition.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq import schema
from traceq.analyses.findings_base import DeviceTotals, FindingContext, WorstDevice, median_int, with_step
from traceq.analyses.host_state import cpu_rows, sync_calls
from traceq.analyses.model import Evidence, Finding
from traceq.units import evidence_ns, format_bytes, format_share, short_kernel_name, step_position

LAUNCH_FIX = (
    "The CPU issues kernels more slowly than the GPU runs them: give each kernel more work (a larger batch per "
    "GPU), launch fewer kernels (fusion with torch.compile, a fused or foreach optimizer), or take the CPU out of "
    'each launch (CUDA graphs, torch.compile(mode="reduce-overhead")).'
)
SYNC_FIX = (
    "Each host-device sync (.item(), .cpu(), print(tensor), `if tensor:`) drains the GPU's queue: log every k "
    "steps instead of every step, keep running metrics on the GPU, copy to the host asynchronously, and keep "
    "Python control flow off GPU values."
)
INPUT_FIX = (
    "The GPU waits for the next batch: give the DataLoader more workers (num_workers), use pin_memory=True with "
    ".to(device, non_blocking=True) copies, prefetch batches (prefetch_factor), and store the data pre-processed."
)
COMM_FIX = (
    "Overlap communication with compute: tune the DDP bucket size (bucket_cap_mb) so all-reduces start during the "
    "backward, turn on FSDP backward prefetch and check its unit size, keep most traffic inside a node (HSDP), and "
    "accumulate gradients to synchronise fewer times per token."
)

MAX_GROUPS = 3
"""Kernels, calls or collectives listed per finding."""


def launch_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`launch_bound` ranks devices by: idle time in ``launch`` gaps."""
    return d.idle_by_cause_ns["launch"]


def sync_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`host_sync` ranks devices by: idle time in ``sync`` gaps."""
    return d.idle_by_cause_ns["sync"]


def input_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`input_stall` ranks devices by: idle time in ``input`` gaps."""
    return d.idle_by_cause_ns["input"]


def exposed_comm_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`exposed_comm` ranks devices by: communication with no compute beside it."""
    return d.exposed_comm_ns


def launch_bound(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Idle time in ``launch`` gaps: the CPU was late with the next kernel."""
    share, d = worst.share, worst.device
    gaps = ctx.gaps.filter((pl.col("dev") == d.dev) & (pl.col("cause") == "launch") & (pl.col("in_steps_ns") > 0))
    gaps = gaps.with_columns((pl.col("next_end_ns") - pl.col("next_start_ns")).alias("next_dur_ns"))
    t_k = median_int(gaps.get_column("next_dur_ns")) or 0
    tid_counts = gaps.group_by("launch_tid").len().sort(["len", "launch_tid"], descending=[True, False])
    tid = tid_counts.item(0, "launch_tid")
    t_cpu = _launch_interval_ns(ctx, d, tid) or 0
    busy = t_k / max(t_k, t_cpu) if max(t_k, t_cpu) > 0 else 1.0
    idle_ns = d.idle_by_cause_ns["launch"]
    evidence = [
        Evidence(
            text=(
                f"Kernels behind the launch gaps run a median t_k = {evidence_ns(t_k)}; thread {tid} issues a launch "
                "every "
                f"t_cpu = {evidence_ns(t_cpu)} (median): the GPU can be busy at most t_k / max(t_k, t_cpu) = {busy:.0%}"
            ),
            rank=d.rank,
            device=d.device,
            name=str(gaps.get_column("launch_name").mode().sort()[0]),
            value_ns=t_cpu,
        )
    ]
    by_kernel = (
        gaps.group_by("next_name")
        .agg(pl.len().alias("n"), pl.col("in_steps_ns").sum().alias("idle_ns"), pl.col("next_dur_ns").median())
        .sort(["idle_ns", "next_name"], descending=[True, False])
        .head(MAX_GROUPS)
    )
    for name, n, total, dur in by_kernel.iter_rows():
        evidence.append(
            Evidence(
                text=(
                    f"{n} launch gaps ({n / max(d.windows, 1):.1f} per step, {evidence_ns(total)} idle) before "
                    f"{short_kernel_name(name)} (median {evidence_ns(dur)})"
                ),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(total),
            )
        )
    evidence.append(_longest_gap(ctx, gaps, d))
    return worst.finding(
        "launch_bound",
        title=f"GPU idle {format_share(share)} of step time waiting for kernel launches ({d.label})",
        metrics={
            "launch_idle_ns": idle_ns,
            "step_ns": d.dur_ns,
            "launch_idle_share": share,
            "launch_gaps": gaps.height,
            "t_k_ns": t_k,
            "t_cpu_ns": t_cpu,
            "busy_bound": busy,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=LAUNCH_FIX,
        also="launch gaps",
    )


def _launch_interval_ns(ctx: FindingContext, d: DeviceTotals, tid: int | None) -> int | None:
    """Median CPU time between consecutive launches of work on ``d`` by thread ``tid``, in steps."""
    launched = ctx.device_rows(d, schema.GPU_ACTIVITY_KINDS, "correlation").drop_nulls().unique()
    calls = (
        ctx.events.select("kind", "source", "pid", "tid", "correlation", "start_ns", "end_ns")
        .filter(
            (pl.col("kind") == "cuda_api")
            & (pl.col("source") == d.source)
            & pl.col("pid").eq_missing(d.pid)
            & pl.col("tid").eq_missing(tid)
        )
        .join(launched, on="correlation", how="semi")
        .select("start_ns", "end_ns")
        .sort("start_ns")
    )
    inside = iv.overlap_with_windows(iv.Intervals.from_frame(calls), ctx.window_intervals(d.dev)) > 0
    starts = calls.get_column("start_ns").to_numpy()[inside]
    if starts.size < 2:
        return None
    return round(float(np.median(np.diff(starts))))


def _longest_gap(ctx: FindingContext, gaps: pl.DataFrame, d: DeviceTotals) -> Evidence:
    row = with_step(gaps.sort(["in_steps_ns", "start_ns"], descending=[True, False]).head(1), ctx.windows).row(
        0, named=True
    )
    return Evidence(
        text=(
            f"Longest: {evidence_ns(row['dur_ns'])} idle at "
            f"{step_position(row['step_name'], row['step_offset_ns'])}, until "
            f"{short_kernel_name(row['next_name'])} launched by {row['launch_name']}"
        ),
        rank=d.rank,
        device=d.device,
        start_ns=row["start_ns"],
        end_ns=row["end_ns"],
        name=row["next_name"],
        value_ns=row["dur_ns"],
    )


def host_sync(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Idle time in ``sync`` gaps: the CPU blocked on the GPU, then had to refill its queue."""
    share, d = worst.share, worst.device
    gaps = ctx.gaps.filter((pl.col("dev") == d.dev) & (pl.col("cause") == "sync") & (pl.col("in_steps_ns") > 0))
    steps = max(d.windows, 1)
    syncs = sync_calls(cpu_rows(ctx.events)).filter((pl.col("source") == d.source) & (pl.col("pid").eq_missing(d.pid)))
    syncs = syncs.filter(iv.overlap_with_windows(iv.Intervals.from_frame(syncs), ctx.window_intervals(d.dev)) > 0)
    by_call = (
        gaps.group_by("sync_name", "sync_tid")
        .agg(pl.len().alias("n"), pl.col("in_steps_ns").sum().alias("idle_ns"))
        .sort(["idle_ns", "sync_name"], descending=[True, False])
        .head(MAX_GROUPS)
    )
    evidence = []
    for name, tid, n, total in by_call.iter_rows():
        calls = syncs.filter((pl.col("name") == name) & (pl.col("tid").eq_missing(tid))).height
        evidence.append(
            Evidence(
                text=(
                    f"{name} on thread {tid}: {n} times ({n / steps:.1f} per step) the GPU idled after it returned, "
                    f"{evidence_ns(total)} in all ({calls / steps:.1f} such calls per step on that thread)"
                ),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(total),
            )
        )
    top = with_step(gaps.sort(["in_steps_ns", "start_ns"], descending=[True, False]).head(2), ctx.windows)
    for row in top.iter_rows(named=True):
        evidence.append(
            Evidence(
                text=(
                    f"{step_position(row['step_name'], row['step_offset_ns'])}: {row['sync_name']} returned "
                    f"{evidence_ns(row['sync_end_ns'] - row['start_ns'])} into a {evidence_ns(row['dur_ns'])} gap; "
                    "the next "
                    f"work ({short_kernel_name(row['next_name'])}) was queued by {row['launch_name']} "
                    f"{evidence_ns(row['launch_start_ns'] - row['sync_end_ns'])} later"
                ),
                rank=d.rank,
                device=d.device,
                start_ns=row["sync_start_ns"],
                end_ns=row["end_ns"],
                name=row["sync_name"],
                value_ns=row["dur_ns"],
            )
        )
    return worst.finding(
        "host_sync",
        title=f"GPU idle {format_share(share)} of step time after host-device syncs ({d.label})",
        metrics={
            "sync_idle_ns": d.idle_by_cause_ns["sync"],
            "step_ns": d.dur_ns,
            "sync_idle_share": share,
            "sync_gaps": gaps.height,
            "sync_gaps_per_step": gaps.height / steps,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=SYNC_FIX,
        also="sync gaps",
    )


def input_stall(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Idle time in ``input`` gaps: the GPU waited for a host-to-device copy of the batch."""
    share, d = worst.share, worst.device
    gaps = ctx.gaps.filter((pl.col("dev") == d.dev) & (pl.col("cause") == "input") & (pl.col("in_steps_ns") > 0))
    copies = ctx.device_rows(d, ("memcpy",), "correlation", "start_ns", "bytes").select(
        pl.col("correlation").alias("next_correlation"), pl.col("start_ns").alias("next_start_ns"), "bytes"
    )
    gaps = gaps.join(copies, on=["next_correlation", "next_start_ns"], how="left").unique(
        subset=["start_ns"], keep="first", maintain_order=True
    )
    steps = max(d.windows, 1)
    total_bytes = int(gaps.get_column("bytes").sum() or 0)
    wait = median_int(gaps.get_column("in_steps_ns")) or 0
    evidence = [
        Evidence(
            text=(
                f"{gaps.height} host-to-device copies ({gaps.height / steps:.1f} per step, "
                f"{format_bytes(total_bytes)}) "
                f"each waited behind an idle GPU, a median {evidence_ns(wait)}"
            ),
            rank=d.rank,
            device=d.device,
            value_ns=wait,
        )
    ]
    top = with_step(gaps.sort(["in_steps_ns", "start_ns"], descending=[True, False]).head(MAX_GROUPS), ctx.windows)
    for row in top.iter_rows(named=True):
        size = "" if row["bytes"] is None else f" of {format_bytes(row['bytes'])}"
        evidence.append(
            Evidence(
                text=(
                    f"{step_position(row['step_name'], row['step_offset_ns'])}: GPU idle "
                    f"{evidence_ns(row['dur_ns'])} before "
                    f"{row['next_name']}{size} ({evidence_ns(row['next_end_ns'] - row['next_start_ns'])}), queued by "
                    f"{row['launch_name']} which took {evidence_ns(row['launch_end_ns'] - row['launch_start_ns'])}"
                ),
                rank=d.rank,
                device=d.device,
                start_ns=row["start_ns"],
                end_ns=row["next_end_ns"],
                name=row["next_name"],
                value_ns=row["dur_ns"],
            )
        )
    return worst.finding(
        "input_stall",
        title=f"GPU idle {format_share(share)} of step time waiting for input data ({d.label})",
        metrics={
            "input_idle_ns": d.idle_by_cause_ns["input"],
            "step_ns": d.dur_ns,
            "input_idle_share": share,
            "input_gaps": gaps.height,
            "htod_bytes": total_bytes,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=INPUT_FIX,
        also="input gaps",
    )


def exposed_comm(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Communication with no compute beside it: ``|(U(comm) − U(compute)) ∩ steps|``."""
    share, d = worst.share, worst.device
    acts = ctx.kernels.filter(pl.col("dev") == d.dev)
    comm = acts.filter(pl.col("is_comm"))
    compute = iv.merge(iv.Intervals.from_frame(_compute_activity(ctx, d.dev)))
    exposed = iv.intersect(iv.subtract(iv.Intervals.from_frame(comm), compute), iv.merge(ctx.window_intervals(d.dev)))
    comm = comm.with_columns(
        pl.Series("exposed_ns", iv.measure_in_windows(exposed, iv.Intervals.from_frame(comm)), dtype=pl.Int64)
    ).filter(pl.col("exposed_ns") > 0)
    hidden = 1.0 - d.exposed_comm_ns / d.comm_ns if d.comm_ns else 0.0
    steps = max(d.windows, 1)
    evidence = [
        Evidence(
            text=(
                f"{comm.height} collectives ran with no compute beside them for part of their time: "
                f"{evidence_ns(d.exposed_comm_ns / steps)} per step exposed of {evidence_ns(d.comm_ns / steps)} "
                f"communication ({hidden:.0%} hidden behind compute)"
            ),
            rank=d.rank,
            device=d.device,
            value_ns=d.exposed_comm_ns,
        )
    ]
    top = with_step(comm.sort(["exposed_ns", "start_ns"], descending=[True, False]).head(MAX_GROUPS), ctx.windows)
    for row in top.iter_rows(named=True):
        evidence.append(
            Evidence(
                text=(
                    f"{step_position(row['step_name'], row['step_offset_ns'])}: {short_kernel_name(row['name'])} ran "
                    f"{evidence_ns(row['dur_ns'])}, {evidence_ns(row['exposed_ns'])} of it with the compute streams "
                    "empty"
                ),
                rank=d.rank,
                device=d.device,
                start_ns=row["start_ns"],
                end_ns=row["end_ns"],
                name=row["name"],
                value_ns=row["exposed_ns"],
            )
        )
    return worst.finding(
        "exposed_comm",
        title=f"Communication with no compute beside it takes {format_share(share)} of step time ({d.label})",
        metrics={
            "exposed_comm_ns": d.exposed_comm_ns,
            "comm_ns": d.comm_ns,
            "step_ns": d.dur_ns,
            "exposed_comm_share": share,
            "hidden_comm_share": hidden,
            "collectives": comm.height,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=COMM_FIX,
        also="exposed communication",
    )


def _compute_activity(ctx: FindingContext, dev: int) -> pl.DataFrame:
    """Compute activity of ``dev``: its non-comm kernels plus its memcpys and memsets."""
    kernels = ctx.kernels.filter((pl.col("dev") == dev) & ~pl.col("is_comm")).select("start_ns", "end_ns")
    copies = ctx.device_rows(ctx.devices[dev], ("memcpy", "memset"), "start_ns", "end_ns")
    return pl.concat([kernels, copies])
