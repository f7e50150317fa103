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

import polars as pl

from traceq import intervals as iv
from traceq.analyses.findings_base import DeviceTotals, FindingContext, WorstDevice, with_step
from traceq.analyses.host_state import cpu_rows, loader_ranges, sync_calls
from traceq.analyses.model import Evidence, Finding
from traceq.analyses.operator_table import operator_names_of
from traceq.analyses.regimes import SHORT_GAP_NS
from traceq.units import evidence_ns, format_share, short_kernel_name, step_position

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

LAUNCH_FIX_GRAPHS = (
    "The step already replays CUDA graphs, so launches are not paid per kernel: what is left is the host between "
    "graph launches and kernels too short for the GPU: give each kernel more work (a larger batch per GPU) or "
    "launch fewer kernels (fusion with torch.compile)."
)

MAX_GROUPS = 3
"""Kernels, calls or collectives listed per finding."""

GRAPH_REPLAYED = 0.5
"""A device whose kernels a CUDA-graph launch replays at least this share of already uses CUDA graphs."""


def launch_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`launch_bound` ranks devices by: the per-kernel overhead of the regime (the
    ``launch`` idle ns, and the ``cpu`` idle ns inside short gaps before kernels)."""
    return d.regime.overhead_ns if d.regime is not None else d.idle_by_cause_ns["launch"]


def sync_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`host_sync` ranks devices by: the ``sync`` idle ns."""
    return d.idle_by_cause_ns["sync"]


def input_idle_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`input_stall` ranks devices by: the ``input`` idle ns."""
    return d.idle_by_cause_ns["input"]


def exposed_comm_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`exposed_comm` ranks devices by: communication with no compute beside it."""
    return d.exposed_comm_ns


def _steady_gaps(ctx: FindingContext, d: DeviceTotals, cause: str) -> pl.DataFrame:
    """The device's gaps inside its steady windows with some ns of ``cause``."""
    return ctx.gaps.filter((pl.col("dev") == d.dev) & (pl.col(f"{cause}_ns") > 0) & (pl.col("in_steps_ns") > 0))


def _with_operators(ctx: FindingContext, gaps: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` with ``op_name``: the operator that launched the activity ending each one
    (``docs/analyses.md``, "Operators"), null where none did."""
    # Only the activities with a correlation some gap ends at: a few rows, not every activity's.
    ids = gaps.get_column("next_correlation").drop_nulls().unique()
    ops = (
        operator_names_of(ctx.events, ids, step_pattern=ctx.analysis.step_pattern)
        .rename({"correlation": "next_correlation"})
        .unique(subset=["source", "pid", "next_correlation"], keep="first")
    )
    keyed = gaps.with_columns(pl.col("source").cast(pl.String))
    return keyed.join(ops, on=["source", "pid", "next_correlation"], how="left", nulls_equal=False)


def launch_bound(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """The host takes longer to issue each kernel than the GPU takes to run it (seed 000's
    launch-bound criterion t_cpu > t_k): the GPU idles between short kernels."""
    share, d = worst.share, worst.device
    regime = d.regime
    short = (pl.col("dur_ns") < SHORT_GAP_NS) & (pl.col("next_kind") == "kernel")
    gaps = ctx.gaps.filter(
        (pl.col("dev") == d.dev)
        & (pl.col("in_steps_ns") > 0)
        & ((pl.col("launch_ns") > 0) | ((pl.col("cpu_ns") > 0) & short))
    ).with_columns(
        (pl.col("next_end_ns") - pl.col("next_start_ns")).alias("next_dur_ns"),
        (pl.col("launch_ns") + pl.when(short).then(pl.col("cpu_ns")).otherwise(0)).alias("overhead_ns"),
    )
    t_k = (regime.t_k_ns if regime else None) or 0
    t_cpu = (regime.t_cpu_ns if regime else None) or 0
    busy = t_k / max(t_k, t_cpu) if max(t_k, t_cpu) > 0 else 1.0
    tid = gaps.group_by("launch_tid").len().sort(["len", "launch_tid"], descending=[True, False]).item(0, "launch_tid")
    graphs = regime is not None and regime.graph_share >= GRAPH_REPLAYED
    evidence = [
        Evidence(
            text=(
                f"Kernels run a median t_k = {evidence_ns(t_k)}; thread {tid} issues a launch every t_cpu = "
                f"{evidence_ns(t_cpu)} (median): the GPU can be busy at most t_k / max(t_k, t_cpu) = {busy:.0%}"
            ),
            rank=d.rank,
            device=d.device,
            name=str(gaps.get_column("launch_name").drop_nulls().mode().sort()[0]) if gaps.height else None,
            value_ns=t_cpu,
        )
    ]
    by_kernel = (
        _with_operators(ctx, gaps)
        .group_by("next_name")
        .agg(
            pl.len().alias("n"),
            pl.col("overhead_ns").sum().alias("idle_ns"),
            pl.col("next_dur_ns").median(),
            pl.col("op_name").drop_nulls().mode().sort().first().alias("op_name"),
        )
        .sort(["idle_ns", "next_name"], descending=[True, False])
        .head(MAX_GROUPS)
    )
    for name, n, total, dur, op in by_kernel.iter_rows():
        origin = f" (from {op})" if op else ""
        evidence.append(
            Evidence(
                text=(
                    f"{n} launch gaps ({n / max(d.windows, 1):.1f} per step, {evidence_ns(total)} idle) before "
                    f"{short_kernel_name(name)}{origin} (median {evidence_ns(dur)})"
                ),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(total),
            )
        )
    if gaps.height:
        evidence.append(_longest_gap(ctx, gaps, d))
    return worst.finding(
        "launch_bound",
        title=f"GPU idle {format_share(share)} of step time waiting for kernel launches ({d.label})",
        metrics={
            "launch_idle_ns": d.idle_by_cause_ns["launch"],
            "overhead_idle_ns": launch_idle_ns(ctx, d),
            "step_ns": d.dur_ns,
            "launch_idle_share": share,
            "launch_gaps": gaps.height,
            "t_k_ns": t_k,
            "t_cpu_ns": t_cpu,
            "busy_bound": busy,
            "graph_share": regime.graph_share if regime else 0.0,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=LAUNCH_FIX_GRAPHS if graphs else LAUNCH_FIX,
        also="launch overhead",
    )


def _longest_gap(ctx: FindingContext, gaps: pl.DataFrame, d: DeviceTotals) -> Evidence:
    row = with_step(gaps.sort(["in_steps_ns", "start_ns"], descending=[True, False]).head(1), ctx.windows).row(
        0, named=True
    )
    until = (
        f", until {short_kernel_name(row['next_name'])} launched by {row['launch_name']}" if row["next_name"] else ""
    )
    return Evidence(
        text=(
            f"Longest: {evidence_ns(row['dur_ns'])} idle at {step_position(row['step_name'], row['step_offset_ns'])}"
            f"{until}"
        ),
        rank=d.rank,
        device=d.device,
        start_ns=row["start_ns"],
        end_ns=row["end_ns"],
        name=row["next_name"],
        value_ns=row["dur_ns"],
    )


def host_sync(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """The host blocked on the GPU (``.item()``, a synchronous copy, a stream sync), then had to
    refill the queue the sync drained: the ``sync`` idle ns."""
    share, d = worst.share, worst.device
    gaps = _steady_gaps(ctx, d, "sync")
    steps = max(d.windows, 1)
    syncs = sync_calls(cpu_rows(ctx.events)).filter((pl.col("source") == d.source) & (pl.col("pid").eq_missing(d.pid)))
    syncs = syncs.filter(iv.overlap_with_windows(iv.Intervals.from_frame(syncs), ctx.window_intervals(d.dev)) > 0)
    by_call = (
        gaps.filter(pl.col("sync_name").is_not_null())
        .group_by("sync_name", "sync_tid")
        .agg(pl.len().alias("n"), pl.col("sync_ns").sum().alias("idle_ns"))
        .sort(["idle_ns", "sync_name"], descending=[True, False])
        .head(MAX_GROUPS)
    )
    evidence = []
    for name, tid, n, total in by_call.iter_rows():
        calls = syncs.filter((pl.col("name") == name) & (pl.col("tid").eq_missing(tid))).height
        evidence.append(
            Evidence(
                text=(
                    f"{name} on thread {tid}: {n} times ({n / steps:.1f} per step) the GPU idled while the host was "
                    f"blocked in it or refilling the queue after it, {evidence_ns(total)} in all "
                    f"({calls / steps:.1f} such calls per step on that thread)"
                ),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(total),
            )
        )
    top = with_step(gaps.sort(["sync_ns", "start_ns"], descending=[True, False]).head(2), ctx.windows)
    for row in top.iter_rows(named=True):
        then = (
            f"; the next work ({short_kernel_name(row['next_name'])}) was queued by {row['launch_name']} "
            f"{evidence_ns(row['launch_start_ns'] - row['sync_end_ns'])} after it returned"
            if row["launch_start_ns"] is not None and row["sync_end_ns"] is not None
            else ""
        )
        evidence.append(
            Evidence(
                text=(
                    f"{step_position(row['step_name'], row['step_offset_ns'])}: {evidence_ns(row['sync_ns'])} of a "
                    f"{evidence_ns(row['dur_ns'])} gap after {row['sync_name']}{then}"
                ),
                rank=d.rank,
                device=d.device,
                start_ns=row["sync_start_ns"] if row["sync_start_ns"] is not None else row["start_ns"],
                end_ns=row["end_ns"],
                name=row["sync_name"],
                value_ns=row["sync_ns"],
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
        also="sync idle",
    )


def input_stall(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """The host waited in the data loader while the GPU idled (seed 000: "idle time matches the loader
    wait"): the ``input`` idle ns."""
    share, d = worst.share, worst.device
    gaps = _steady_gaps(ctx, d, "input")
    steps = max(d.windows, 1)
    input_ns = d.idle_by_cause_ns["input"]
    loaders = loader_ranges(ctx.events, ctx.analysis.options.input_pattern).filter(
        (pl.col("source") == d.source) & pl.col("pid").eq_missing(d.pid)
    )
    loaders = loaders.with_columns(
        pl.Series("in_steps_ns", iv.overlap_with_windows(iv.Intervals.from_frame(loaders), ctx.window_intervals(d.dev)))
    ).filter(pl.col("in_steps_ns") > 0)
    wait = int(loaders.get_column("in_steps_ns").sum() or 0)
    evidence = []
    for name, n, total in (
        loaders.group_by("name")
        .agg(pl.len().alias("n"), pl.col("in_steps_ns").sum().alias("ns"))
        .sort(["ns", "name"], descending=[True, False])
        .head(MAX_GROUPS)
        .iter_rows()
    ):
        evidence.append(
            Evidence(
                text=(f"{name}: {n / steps:.1f} per step, {evidence_ns(total / steps)} per step waiting for the batch"),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(total),
            )
        )
    matched = f" ({input_ns / wait:.0%} of the loader's wait)" if wait else ""
    evidence.append(
        Evidence(
            text=f"The GPU idled {evidence_ns(input_ns / steps)} per step while the host was loading data{matched}",
            rank=d.rank,
            device=d.device,
            value_ns=input_ns,
        )
    )
    top = with_step(gaps.sort(["input_ns", "start_ns"], descending=[True, False]).head(MAX_GROUPS), ctx.windows)
    for row in top.iter_rows(named=True):
        before = f" before {short_kernel_name(row['next_name'])}" if row["next_name"] else ""
        evidence.append(
            Evidence(
                text=(
                    f"{step_position(row['step_name'], row['step_offset_ns'])}: GPU idle "
                    f"{evidence_ns(row['input_ns'])} waiting for input{before}"
                ),
                rank=d.rank,
                device=d.device,
                start_ns=row["start_ns"],
                end_ns=row["end_ns"],
                name=row["next_name"],
                value_ns=row["input_ns"],
            )
        )
    return worst.finding(
        "input_stall",
        title=f"GPU idle {format_share(share)} of step time waiting for input data ({d.label})",
        metrics={
            "input_idle_ns": input_ns,
            "loader_wait_ns": wait,
            "step_ns": d.dur_ns,
            "input_idle_share": share,
            "input_gaps": gaps.height,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=INPUT_FIX,
        also="input idle",
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
