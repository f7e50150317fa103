"""The findings rules on kernels: memory_bound_kernels and small_kernels.

Both measure a cost in step time, like the idle-cause rules, so the same guarantee holds (fires
from ``FIRE_SHARE`` = 5% of step time on some device, so always at 10% and never below 2%):

* **memory_bound_kernels**: the time in memory-bound kernels (elementwise, norm, softmax,
  reduction, loss, optimizer, memory: :mod:`traceq.analyses.kernel_classes`) beyond an allowance
  of :data:`MEMORY_BOUND_ALLOWANCE` × the time in math kernels (gemm, conv, attention) — the
  part fusion is there to remove (seed ``000_*.txt``, section 2: "long elementwise, norm or
  softmax kernels ... fusion");
* **small_kernels**: the time in kernels shorter than :data:`SHORT_KERNEL_NS` together with the
  ``launch`` gaps shorter than :data:`SHORT_GAP_NS` that end at them — the launch-overhead
  regime (seed ``000_*.txt``: "kernels of a few µs"; ``004_*.txt``: "each CUDA kernel launch
  has ~5-10 μs overhead").

Times are unions (``|U(x) ∩ steps|``), so concurrent kernels count once.  ``docs/findings.md``
has the definitions.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.findings_base import DeviceTotals, FindingContext, WorstDevice
from traceq.analyses.findings_rules import GRAPH_REPLAYED
from traceq.analyses.kernel_classes import MEMORY_BOUND_CLASSES
from traceq.analyses.model import Evidence, Finding
from traceq.analyses.regimes import SHORT_GAP_NS
from traceq.units import evidence_ns, format_share, short_kernel_name

MEMORY_BOUND_ALLOWANCE: Final = 0.5
"""Memory-bound kernel time counted as normal, per unit of math-kernel time: a fused transformer
still spends about a third of its kernel time in norms, softmax and activations."""

SHORT_KERNEL_NS: Final = 10_000
"""Kernels under 10 µs are shorter than the CPU cost of launching them from eager PyTorch."""

MAX_KERNELS = 3

MEMORY_FIX = (
    "Memory-bound kernels move bytes, not FLOPs: fuse them (torch.compile / TorchInductor, XLA), use fused kernels "
    "(FlashAttention, fused layer norm, a fused or foreach optimizer) and keep activations in bf16."
)
SMALL_FIX = (
    "Most kernels are shorter than their launch: fuse chains of small ops (torch.compile), give each kernel more "
    "work (a larger batch), use foreach/fused optimizers, and replay the step as a CUDA graph "
    '(torch.compile(mode="reduce-overhead")) to remove the CPU cost per kernel.'
)


def _union_in_steps(ctx: FindingContext, dev: int, rows: pl.DataFrame) -> int:
    return int(iv.measure(iv.intersect(iv.merge(iv.Intervals.from_frame(rows)), iv.merge(ctx.window_intervals(dev)))))


def _device_kernels(ctx: FindingContext, d: DeviceTotals, *columns: str, steps_only: bool = False) -> pl.DataFrame:
    """The listed columns of ``d``'s non-communication kernels (only those inside step windows
    with ``steps_only``), copying nothing else."""
    keep = (pl.col("dev") == d.dev) & ~pl.col("is_comm")
    if steps_only:
        keep &= pl.col("in_steps_ns") > 0
    return ctx.kernels.lazy().filter(keep).select(columns).collect()


def memory_bound_split(ctx: FindingContext, d: DeviceTotals) -> tuple[int, int, int]:
    """``(memory_bound_ns, math_ns, excess_ns)`` of a device inside its steady step windows, with
    ``excess_ns = max(0, memory_bound_ns − MEMORY_BOUND_ALLOWANCE · math_ns)``.  The two unions are
    the regime's memory and compute shares (:mod:`traceq.analyses.regimes`), measured over the
    same kernels (by class: a communication kernel is in neither) and windows; a device without a
    regime has no steady step time, so none of either."""
    memory, math = (d.regime.memory_ns, d.regime.compute_ns) if d.regime is not None else (0, 0)
    return memory, math, max(0, round(memory - MEMORY_BOUND_ALLOWANCE * math))


def memory_bound_excess_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`memory_bound_kernels` ranks devices by: memory-bound time beyond the allowance;
    none on an overhead-bound device, whose kernels are shorter than the interval between their
    launches (t_k < t_cpu) while the launch overhead is what limits it: the host sets their pace,
    not the memory bandwidth (seed 000), and fusing them is ``launch_bound``'s advice."""
    if d.regime is not None and d.regime.verdict == "overhead-bound":
        return 0
    return memory_bound_split(ctx, d)[2]


def memory_bound_kernels(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Memory-bound kernels take more step time than the math they surround justifies."""
    share, d = worst.share, worst.device
    memory_ns, math_ns, excess_ns = memory_bound_split(ctx, d)
    kernels = _device_kernels(
        ctx, d, "name", "kernel_class", "start_ns", "end_ns", "dur_ns", "in_steps_ns", steps_only=True
    )
    kernel_ns = _union_in_steps(ctx, d.dev, kernels)
    steps = max(d.windows, 1)
    evidence = [
        Evidence(
            text=(
                f"Memory-bound kernels run {evidence_ns(memory_ns / steps)} per step ({memory_ns / kernel_ns:.0%} of "
                "kernel "
                f"time), math kernels (gemm, conv, attention) {evidence_ns(math_ns / steps)}: "
                f"{evidence_ns(excess_ns / steps)} per step beyond the allowance of {MEMORY_BOUND_ALLOWANCE:g} x "
                "math time"
            ),
            rank=d.rank,
            device=d.device,
            value_ns=excess_ns,
        )
    ]
    memory = kernels.filter(pl.col("kernel_class").is_in(sorted(MEMORY_BOUND_CLASSES)))
    by_class = (
        memory.group_by("kernel_class")
        .agg(pl.col("in_steps_ns").sum().alias("ns"))
        .with_columns(pl.col("kernel_class").cast(pl.String))
        .sort(["ns", "kernel_class"], descending=[True, False])
    )
    evidence.append(
        Evidence(
            text="By class, per step: "
            + ", ".join(f"{cls} {evidence_ns(ns / steps)}" for cls, ns in by_class.iter_rows()),
            rank=d.rank,
            device=d.device,
        )
    )
    top = (
        memory.group_by("name", "kernel_class")
        .agg(pl.len().alias("n"), pl.col("in_steps_ns").sum().alias("ns"), pl.col("dur_ns").median().alias("dur"))
        .with_columns(pl.col("name", "kernel_class").cast(pl.String))
        .sort(["ns", "name"], descending=[True, False])
        .head(MAX_KERNELS)
    )
    for name, cls, n, ns, dur in top.iter_rows():
        evidence.append(
            Evidence(
                text=(
                    f"{short_kernel_name(name)} ({cls}): {n / steps:.1f} per step, median {evidence_ns(dur)}, "
                    f"{evidence_ns(ns / steps)} per step"
                ),
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(ns),
            )
        )
    return worst.finding(
        "memory_bound_kernels",
        title=(
            f"Memory-bound kernels (elementwise, norm, softmax, ...) take {format_share(memory_ns / d.dur_ns)} of step "
            f"time, {format_share(share)} beyond {MEMORY_BOUND_ALLOWANCE:g}x the matmul time ({d.label})"
        ),
        metrics={
            "memory_bound_ns": memory_ns,
            "math_ns": math_ns,
            "kernel_ns": kernel_ns,
            "memory_bound_excess_ns": excess_ns,
            "step_ns": d.dur_ns,
            "memory_bound_share": memory_ns / d.dur_ns,
            "memory_bound_kernel_share": memory_ns / kernel_ns if kernel_ns else 0.0,
            "memory_bound_excess_share": share,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=MEMORY_FIX,
        also="memory-bound time beyond the allowance",
    )


def small_kernel_ns(ctx: FindingContext, d: DeviceTotals) -> int:
    """The cost :func:`small_kernels` ranks devices by: short kernels and the launch gaps before them
    together (:func:`small_kernel_cost`); none on a device that replays CUDA graphs, where launches
    are no longer paid per kernel."""
    regime = d.regime
    if regime is not None and regime.graph_share >= GRAPH_REPLAYED:
        return 0
    return small_kernel_cost(ctx, d)[2]


def small_kernel_cost(ctx: FindingContext, d: DeviceTotals) -> tuple[int, int, int]:
    """``(short_kernel_ns, launch_gap_ns, cost_ns)`` of a device inside its steady step windows: the
    short idle intervals (under :data:`SHORT_GAP_NS`) in which the host was issuing the next kernel
    (``launch`` ns) and that kernel was short (non-comm, under :data:`SHORT_KERNEL_NS`); those
    kernels; and both together.  Short kernels the GPU ran back to back (queued, no launch gap
    before them) cost nothing here: launches do not limit them."""
    gaps = ctx.gaps.filter(
        (pl.col("dev") == d.dev)
        & (pl.col("launch_ns") > 0)
        & (pl.col("dur_ns") < SHORT_GAP_NS)
        & (pl.col("next_kind") == "kernel")
        & ((pl.col("next_end_ns") - pl.col("next_start_ns")) < SHORT_KERNEL_NS)
    )
    short = (
        ctx.kernels.lazy()
        .filter((pl.col("dev") == d.dev) & ~pl.col("is_comm") & (pl.col("dur_ns") < SHORT_KERNEL_NS))
        .filter(pl.col("start_ns").is_in(gaps.get_column("next_start_ns").implode()))
        .select("start_ns", "end_ns")
        .collect()
    )
    gaps = gaps.select("start_ns", "end_ns")
    both = pl.concat([short, gaps])
    return (
        _union_in_steps(ctx, d.dev, short),
        _union_in_steps(ctx, d.dev, gaps),
        _union_in_steps(ctx, d.dev, both),
    )


def small_kernels(ctx: FindingContext, worst: WorstDevice) -> Finding:
    """Short kernels and the launch gaps before them take a large share of step time."""
    share, d = worst.share, worst.device
    short_ns, gap_ns, cost_ns = small_kernel_cost(ctx, d)
    kernels = _device_kernels(ctx, d, "name", "dur_ns", steps_only=True)
    durations = kernels.get_column("dur_ns").to_numpy()
    is_short = durations < SHORT_KERNEL_NS
    steps = max(d.windows, 1)
    p10, p50, p90 = (float(v) for v in np.percentile(durations, [10, 50, 90])) if durations.size else (0.0,) * 3
    short_share = float(is_short.mean()) if durations.size else 0.0
    evidence = [
        Evidence(
            text=(
                f"{kernels.height / steps:.0f} kernels per step, {short_share:.0%} of them under "
                f"{evidence_ns(SHORT_KERNEL_NS)}; durations p10 {evidence_ns(p10)}, median {evidence_ns(p50)}, p90 "
                f"{evidence_ns(p90)}"
            ),
            rank=d.rank,
            device=d.device,
            value_ns=round(p50),
        ),
        Evidence(
            text=(
                f"Per step: {evidence_ns(short_ns / steps)} running short kernels and {evidence_ns(gap_ns / steps)} "
                "idle in the "
                f"launch gaps (under {evidence_ns(SHORT_GAP_NS)}) before them"
            ),
            rank=d.rank,
            device=d.device,
            value_ns=cost_ns,
        ),
    ]
    frequent = (
        kernels.filter(pl.col("dur_ns") < SHORT_KERNEL_NS)
        .group_by("name")
        .agg(pl.len().alias("n"), pl.col("dur_ns").median().alias("dur"), pl.col("dur_ns").sum().alias("ns"))
        .with_columns(pl.col("name").cast(pl.String))
        .sort(["n", "name"], descending=[True, False])
        .head(MAX_KERNELS)
    )
    for name, n, dur, ns in frequent.iter_rows():
        evidence.append(
            Evidence(
                text=f"{short_kernel_name(name)}: {n / steps:.1f} per step, median {evidence_ns(dur)}",
                rank=d.rank,
                device=d.device,
                name=name,
                value_ns=int(ns),
            )
        )
    return worst.finding(
        "small_kernels",
        title=(
            f"Kernels under {evidence_ns(SHORT_KERNEL_NS)} and the launch gaps before them take "
            f"{format_share(share)} of "
            f"step time; {short_share:.0%} of kernels are that short ({d.label})"
        ),
        metrics={
            "short_kernel_ns": short_ns,
            "short_launch_gap_ns": gap_ns,
            "small_kernel_cost_ns": cost_ns,
            "step_ns": d.dur_ns,
            "small_kernel_share": share,
            "kernels": kernels.height,
            "short_kernels": int(is_short.sum()),
            "short_kernel_count_share": short_share,
            "median_kernel_ns": p50,
            "steps": d.windows,
        },
        evidence=evidence,
        fix=SMALL_FIX,
        also="short kernels and their launch gaps",
    )
