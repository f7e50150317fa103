"""What limits each device's steady-state step: its regime, with the evidence behind the verdict.

Seed ``000_*.txt`` §2 names three regimes of GPU work, each with its own fix: **overhead-bound**
(CPU time per kernel × kernels: larger batch, fusion, CUDA graphs), **memory-bound** (bytes /
bandwidth: fusion; CUDA graphs do not help) and **compute-bound** (FLOPs / peak: better kernels,
lower precision; compilation mostly does not help).  Its diagnosis table adds two limits outside
the GPU's own work: **communication-bound** (exposed collectives: overlap) and **input-bound** (the
data loader: workers, pinned memory, prefetching).  Over a device's steady-state step windows
(warm-up left out, :mod:`traceq.analyses.warmup`), each regime has a share of step time:

* overhead: the idle ns the host spent issuing kernels (``launch``) plus the ``cpu`` idle ns inside
  short gaps (under :data:`SHORT_GAP_NS`, ending at a kernel): the per-kernel CPU time;
* memory: the time memory-bound kernel classes run (:mod:`traceq.analyses.kernel_classes`), union;
* compute: the time math kernel classes (gemm, conv, attention) run, union;
* communication: the exposed communication; input: the ``input`` idle ns.

The **verdict** is the largest of the five, except that where the host launches more slowly than
the GPU runs its kernels (t_cpu > t_k) and that overhead is at least 5% of step time and outweighs
the input and communication limits, the device is overhead-bound: the host then sets the pace of
the kernels' own time too (a 2 µs kernel every 3.6 µs keeps the GPU 56% busy with memory-bound
kernels, yet the fix is fewer launches, not bandwidth).  The evidence: t_k, the median duration of the device's
kernels, and t_cpu, the median interval between consecutive launches on its main launching thread
(the seed's launch-bound criterion: the GPU is busy at most t_k / max(t_k, t_cpu)); and how much of
its work replays as CUDA graphs (then launches are no longer paid per kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.column_arrays import column_array
from traceq.analyses.host_state import matching
from traceq.analyses.kernel_classes import MATH_CLASSES, MEMORY_BOUND_CLASSES, names_in_classes
from traceq.analyses.model import REGIME_VERDICTS, Regime
from traceq.analyses.steps import only_dev
from traceq.sorted_search import is_sorted

SHORT_GAP_NS: Final = 100_000
"""Idle intervals shorter than this that end at a kernel are per-kernel overhead."""

REGIMES: Final = REGIME_VERDICTS[:5]
"""Every verdict but ``idle``, in the order that breaks a tie."""

OVERHEAD_MATERIAL: Final = 0.05
"""Launch overhead makes a device overhead-bound (when t_cpu > t_k) from this share of step time,
the findings' threshold."""

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]

GRAPH_LAUNCH_PATTERN: Final = r"(?i)GraphLaunch"
"""Launching calls that replay a CUDA (or HIP) graph: ``cudaGraphLaunch``, ``cuGraphLaunch``, ``hipGraphLaunch``."""


def regimes(
    activity: pl.DataFrame,
    steady: Mapping[int, iv.Intervals],
    causes: Mapping[int, Mapping[str, iv.Intervals]],
    gaps: pl.DataFrame,
    launches: pl.DataFrame,
    unions: Mapping[int, Busy],
    n_devices: int,
) -> dict[int, Regime | None]:
    """The regime of every device (None for a device without steady step time).

    ``activity``: dev, name, kind, start_ns, end_ns, is_comm, correlation; ``steady``: each
    device's steady step windows; ``causes``: the idle ns by cause
    (:class:`~traceq.analyses.attribution.Attribution`); ``gaps``: its idle intervals (dev,
    start_ns, end_ns, dur_ns, next_kind); ``launches``: every launching call (dev, tid, name,
    start_ns, end_ns, correlation; :func:`traceq.analyses.idle.launches_by_device`); ``unions``:
    each device's activity merged, compute and communication (the breakdown merges them once).
    """
    rows = _Rows.of(activity)  # (read once as arrays: every selection below is a mask, not a copy of a frame)
    calls = launches.select("dev", "tid", "name", "start_ns", "end_ns", "correlation")
    out: dict[int, Regime | None] = {}
    empty = iv.Intervals.empty()
    for dev in range(n_devices):
        windows = iv.merge(steady.get(dev, empty))
        step_ns = iv.measure(windows)
        if step_ns == 0:
            out[dev] = None
            continue
        on_dev = rows.on(dev)
        kernels = on_dev & rows.kernel
        dev_calls = _of_dev(calls, dev, n_devices)
        dev_causes = causes.get(dev, {})
        short = gaps.filter(
            (pl.col("dev") == dev) & (pl.col("dur_ns") < SHORT_GAP_NS) & (pl.col("next_kind") == "kernel")
        )
        overhead = iv.union(dev_causes.get("launch", empty), iv.intersect(dev_causes.get("cpu", empty), _of(short)))
        busy = unions.get(dev, Busy(empty, empty, empty))
        shares = {
            "overhead-bound": _ns_inside(overhead, windows),
            "memory-bound": _ns_inside(rows.union(kernels & rows.memory_class), windows),
            "compute-bound": _ns_inside(rows.union(kernels & rows.math_class), windows),
            "communication-bound": _ns_inside(iv.subtract(busy.comm, busy.compute), windows),
            "input-bound": _ns_inside(dev_causes.get("input", empty), windows),
        }
        inside = rows.inside(kernels, windows)
        t_k = _median_ns(rows.lengths_ns(inside & rows.not_comm))
        t_cpu = _launch_interval_ns(dev_calls.select("tid", "start_ns", "end_ns"), windows)
        verdict = _verdict(shares, step_ns, t_k, t_cpu)
        out[dev] = Regime(
            verdict=verdict,
            step_ns=step_ns,
            overhead_ns=shares["overhead-bound"],
            memory_ns=shares["memory-bound"],
            compute_ns=shares["compute-bound"],
            communication_ns=shares["communication-bound"],
            input_ns=shares["input-bound"],
            t_k_ns=t_k,
            t_cpu_ns=t_cpu,
            graph_share=_graph_share(rows.correlation, np.flatnonzero(inside), dev_calls),
        )
    return out


@dataclass(frozen=True)
class Busy:
    """One device's activity, merged: its compute (the activities that are not communication), its
    communication, and all of it (the breakdown merges them once; the regimes and the phase table
    read them)."""

    compute: iv.Intervals
    comm: iv.Intervals
    every: iv.Intervals


@dataclass(frozen=True)
class _Rows:
    """The activity rows as arrays (each column read once) and the row masks the regimes select by."""

    dev: np.ndarray[Any, np.dtype[Any]] | int | None
    """Each row's dev, or the one dev of every row (None: no rows)"""
    start_ns: iv.Int64Array
    end_ns: iv.Int64Array
    correlation: pl.Series
    kernel: BoolArray
    not_comm: BoolArray
    """(a row whose ``is_comm`` is null is neither communication nor compute)"""
    memory_class: BoolArray
    math_class: BoolArray

    @classmethod
    def of(cls, activity: pl.DataFrame) -> _Rows:
        names = activity.get_column("name").unique()  # (each class's names are found once per name)
        flags = activity.select(
            (pl.col("kind") == "kernel").fill_null(False).alias("kernel"),
            (~pl.col("is_comm")).fill_null(False).alias("not_comm"),
            *(
                (~pl.col("is_comm").fill_null(False) & pl.col("name").is_in(names_in_classes(names, c).implode()))
                .fill_null(False)
                .alias(alias)
                for alias, c in (("memory", MEMORY_BOUND_CLASSES), ("math", MATH_CLASSES))
            ),
        )
        one = only_dev(activity)
        return cls(
            dev=one if one is not None or activity.is_empty() else column_array(activity, "dev"),
            start_ns=column_array(activity, "start_ns"),
            end_ns=column_array(activity, "end_ns"),
            correlation=activity.get_column("correlation"),
            kernel=flags.get_column("kernel").to_numpy(),
            not_comm=flags.get_column("not_comm").to_numpy(),
            memory_class=flags.get_column("memory").to_numpy(),
            math_class=flags.get_column("math").to_numpy(),
        )

    def on(self, dev: int) -> BoolArray:
        """The rows of ``dev``."""
        if self.dev is None or isinstance(self.dev, int):
            return np.full(self.start_ns.size, self.dev == dev, np.bool_)
        return np.asarray(self.dev == dev, np.bool_)

    def union(self, rows: BoolArray) -> iv.Intervals:
        """The union of the selected rows' spans."""
        return iv.merge_where(iv.Intervals._trusted(self.start_ns, self.end_ns), rows)

    def inside(self, rows: BoolArray, windows: iv.Intervals) -> BoolArray:
        """The selected rows that share a ns with ``windows``."""
        if self.dev is None or isinstance(self.dev, int):
            # One device: most rows are asked, and all of them in start order cost less than a copy.
            return iv.overlaps(iv.Intervals._trusted(self.start_ns, self.end_ns), windows) & rows
        picked = np.flatnonzero(rows)
        out = np.zeros(self.start_ns.size, np.bool_)
        out[picked] = iv.overlaps(iv.Intervals._trusted(self.start_ns[picked], self.end_ns[picked]), windows)
        return out

    def lengths_ns(self, rows: BoolArray) -> pl.Series:
        """The selected rows' lengths (one pass of polars: no copy of the selected starts and ends)."""
        return (pl.Series(self.end_ns) - pl.Series(self.start_ns)).filter(pl.Series(rows))


def _verdict(shares: Mapping[str, int], step_ns: int, t_k: int | None, t_cpu: int | None) -> str:
    """The largest share; but where the host launches more slowly than the GPU runs its kernels
    (t_cpu > t_k, seed 000's launch-bound criterion) and that overhead is material and outweighs the
    input and communication limits, the host sets the pace of the kernels' own time too:
    overhead-bound."""
    host = shares["overhead-bound"]
    if (
        t_k is not None
        and t_cpu is not None
        and t_cpu > t_k
        and host >= OVERHEAD_MATERIAL * step_ns
        and host >= max(shares["input-bound"], shares["communication-bound"])
    ):
        return "overhead-bound"
    verdict = max(REGIMES, key=lambda r: (shares[r], -REGIMES.index(r)))
    return verdict if shares[verdict] > 0 else "idle"


def _of_dev(frame: pl.DataFrame, dev: int, n_devices: int) -> pl.DataFrame:
    """The rows of ``frame`` on ``dev``: ``frame`` itself, uncopied, where every row is (one device)."""
    if n_devices == 1 and only_dev(frame) == dev:
        return frame
    return frame.filter(pl.col("dev") == dev)


def _ns_inside(intervals: iv.Intervals, windows: iv.Intervals) -> int:
    """The ns of ``intervals`` inside ``windows`` (merged: disjoint, so their measures add up):
    ``measure(intersect(intervals, windows))`` without making the intersection."""
    return int(iv.measure_in_windows(intervals, windows).sum())


def _of(rows: pl.DataFrame) -> iv.Intervals:
    return iv.Intervals.from_frame(rows) if rows.height else iv.Intervals.empty()


def _median_ns(values_ns: pl.Series) -> int | None:
    """The median of ``values_ns`` (integers, each at least 0): the middle value, or the mean of the
    middle two rounded half to even; None for no values.  Exact below 2**52 ns (52 days; polars
    selects the middle values, 3-6x faster than NumPy's partition here, and interpolates them in
    float64, as NumPy's median did)."""
    median = values_ns.median()
    assert median is None or isinstance(median, int | float)
    return None if median is None else round(median)


def _launch_interval_ns(launches: pl.DataFrame, windows: iv.Intervals) -> int | None:
    """The median interval between consecutive launch starts on the thread that launches most."""
    if launches.height < 2:
        return None
    inside = pl.Series(iv.overlaps(_of(launches), windows))
    tid = launches.get_column("tid")
    if not tid.null_count() and tid.min() == tid.max():  # one launching thread (the usual case): no count
        mine = inside
    else:
        tids = tid.filter(inside)
        if tids.len() < 2:
            return None
        # (a lazy group-by: the eager one gathers every group's rows first)
        counts = tids.to_frame("tid").lazy().group_by("tid").len().sort(["len", "tid"], descending=[True, False])
        mine = inside & (tid == counts.collect().item(0, "tid")).fill_null(False)
    # (a thread's calls come in start order: then they are not copied to be sorted; else NumPy's
    # merge sort sees a few runs, 0.015 s against 0.66 s for its default sort on 10 M launches)
    starts = launches.get_column("start_ns").filter(mine).to_numpy()
    starts = starts if is_sorted(starts) else np.sort(starts, kind="stable")
    if starts.size < 2:
        return None
    return _median_ns(pl.Series(np.diff(starts)))


def _graph_share(correlation: pl.Series, inside: np.ndarray[Any, np.dtype[np.intp]], launches: pl.DataFrame) -> float:
    """The share of the device's kernels in the windows (the rows ``inside``) that a graph launch
    (among ``launches``, the device's launching calls) replayed."""
    if inside.size == 0:
        return 0.0
    graphs = matching(launches.get_column("name"), GRAPH_LAUNCH_PATTERN)  # (the regex once per name)
    if graphs.is_empty():
        return 0.0
    graph = launches.filter(pl.col("name").is_in(graphs.implode())).get_column("correlation")
    replayed = correlation.gather(pl.Series(inside, dtype=pl.Int64)).is_in(graph.implode()).sum()
    return float(replayed) / inside.size
