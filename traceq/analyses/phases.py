"""Phases: every device's step time projected onto the CPU ranges that were open (forward, backward, ...).

Definitions in ``docs/analyses.md`` ("Phases").  The **phase ranges** of a process are its CPU
ranges that are neither step ranges, nor operators written as NVTX ranges (``aten::add, seq =
…``: :data:`OPERATOR_RANGE_PATTERN`), nor module ranges, or, where the user names them
(``--phase-pattern``), its CPU ranges, ops and Python frames whose name matches one of the
patterns.  Ranges are ordered by start (then longer first): on a thread, the **innermost** phase
open at ``t`` is the latest-starting one that contains it.  Every ns of a device's step windows
goes to exactly one phase (or to ``(no phase)``), so the phase table sums to the device totals:

* **GPU work is projected onto the phase its launch was in** (nsys's ``nvtx_gpu_proj_sum``): an
  activity belongs to the innermost phase open on its launching thread at the launch's start; a
  busy ns where work of several phases runs goes to the latest-starting of those phases (nested:
  the inner one; tiled: the later one), separately for compute, communication and exposed
  communication, so each is a partition;
* **an idle ns goes to the phase its host was in**: the innermost phase open at that ns on the
  thread the idle attribution reads (T: the launching thread of the work that ends the gap).

Everything is computed per device on the elementary segments between all the boundaries (of
activity, windows, phase ranges and idle causes), vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.column_arrays import column_array, selected
from traceq.analyses.host_state import matching
from traceq.analyses.launch_link import NONE, LaunchingCalls
from traceq.analyses.model import CAUSES, PhaseBreakdown
from traceq.analyses.nesting import innermost_of, prepared
from traceq.analyses.operators import DEFAULT_MODULE_PATTERN, OPERATOR_RANGE_PATTERN
from traceq.analyses.regimes import Busy
from traceq.analyses.steps import compile_step_pattern
from traceq.sorted_search import distinct

NO_PHASE: Final = "(no phase)"
"""The phase of work launched, and of idle time spent, outside every phase range."""

PHASE_COLUMNS: Final = (
    "rank",
    "device",
    "pid",
    "source",
    "phase",
    "ranges",
    "activities",
    "dur_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "idle_ns",
    *(f"idle_{c}_ns" for c in CAUSES),
)
"""The columns of :func:`phase_table`."""

_THREAD: Final = ("source", "pid", "tid")
_NONE: Final = -1
_EMPTY: Final = -2
_RUN_SUM_MIN: Final = 4096
"""Keys from which :func:`_sum_by_key` looks for runs (below it, counting each is as quick)."""


def phase_ranges(cpu: pl.DataFrame, step_pattern: str, patterns: Sequence[str] = ()) -> pl.DataFrame:
    """The phase ranges of :func:`traceq.analyses.host_state.cpu_rows` ``cpu``: source, pid, tid,
    name (String), start_ns, end_ns, with ``_range``/``_depth`` (:func:`~traceq.analyses.nesting.prepared`)
    and ``key`` (Int64): the range's place in (start, end descending) order, so that of two open
    ranges the one with the larger key is the innermost."""
    kinds = ("range", "cpu_op", "python", "other") if patterns else ("range",)
    # (one pass over the CPU rows, of one column: the launching calls are most of them)
    rows = cpu.lazy().filter(pl.col("kind").is_in(kinds)).select(*_THREAD, "name", "start_ns", "end_ns").collect()
    names = rows.get_column("name").unique()  # (once: each pattern below is matched against these)
    steps = matching(names, compile_step_pattern(step_pattern))
    if patterns:
        wanted = pl.concat([matching(names, p) for p in patterns]).unique()
    else:
        excluded = pl.concat([matching(names, OPERATOR_RANGE_PATTERN), matching(names, DEFAULT_MODULE_PATTERN)])
        wanted = names.cast(pl.String)
        wanted = wanted.filter(~wanted.is_in(excluded.implode()))
    name = pl.col("name").cast(pl.String)
    chosen = rows.filter(pl.col("name").is_in(wanted.implode()) & ~pl.col("name").is_in(steps.implode())).select(
        *_THREAD, name, "start_ns", "end_ns"
    )
    table = prepared(chosen, _THREAD)
    order = table.select("_range", "start_ns", "end_ns").sort(
        ["start_ns", "end_ns", "_range"], descending=[False, True, False]
    )
    keys = order.select("_range", pl.int_range(pl.len(), dtype=pl.Int64).alias("key"))
    return table.join(keys, on="_range", how="left")


def activity_phases(calls: LaunchingCalls, activity: pl.DataFrame, ranges: pl.DataFrame) -> pl.Series:
    """Per row of ``activity`` (``call``: its launching call's position in ``cpu_rows``, null
    without one), the ``key`` of the innermost phase range open on its launching thread at its
    launch's start; :data:`_NONE` (−1) without one.  ``calls``: the table's
    :func:`~traceq.analyses.launch_link.launching_calls`."""
    points = calls.points_of(column_array(activity, "call", NONE))
    at = calls.rows.select("_point", "source", "pid", "tid", pl.col("start_ns").alias("_t"))
    # innermost_of answers in the calls' order, and a range's key is read at its _range (a
    # position): no join, no sort.  Each look-up table ends in a _NONE, which a call in no range
    # (its _range null, read as the table's last place) and index NONE (-1) read.
    innermost = innermost_of(ranges, at, _THREAD, made_of=calls).get_column("_range")
    found = innermost.fill_null(ranges.height).to_numpy()  # (its UInt32 places, one pass)
    key_of_range = np.full(ranges.height + 1, _NONE, np.int64)
    key_of_range[ranges.get_column("_range").to_numpy()] = ranges.get_column("key").to_numpy()
    per_call = np.empty(len(found) + 1, np.int64)
    np.take(key_of_range, found, out=per_call[:-1])  # (written in place: no copy to append the _NONE)
    per_call[-1] = _NONE
    return pl.Series("key", per_call[points], dtype=pl.Int64)


def phase_table(
    activity: pl.DataFrame,
    windows: pl.DataFrame,
    gaps: pl.DataFrame,
    causes: Mapping[int, Mapping[str, iv.Intervals]],
    ranges: pl.DataFrame,
    device_table: pl.DataFrame,
    *,
    merged: Mapping[int, Busy] | None = None,
) -> pl.DataFrame:
    """The phase table: per device and phase, its share of the device's step windows.

    ``activity``: dev, source, pid, start_ns, end_ns, is_comm, ``phase_key`` (:func:`activity_phases`);
    ``windows``: dev, start_ns, end_ns; ``gaps``: dev, start_ns, end_ns, thread (the idle
    intervals); ``causes``: per dev and cause, its idle ns; ``ranges``: :func:`phase_ranges`;
    ``merged``: per dev, its activity merged where the caller has merged it already.

    Columns (:data:`PHASE_COLUMNS`): rank, device, pid, source, phase (the range name, or
    :data:`NO_PHASE`), ranges (its ranges on the device's process), activities (GPU activities
    launched in it, innermost), dur_ns, compute_ns, comm_ns, exposed_comm_ns, idle_ns,
    ``idle_<cause>_ns``.  Per device, each column sums over the phases to the device's total over
    the union of its step windows (``dur_ns = compute_ns + exposed_comm_ns + idle_ns``).  Sorted
    by rank, source, pid, device, then dur_ns descending and phase."""
    key_name = pl.Series([*ranges.sort("key").get_column("name").to_list(), NO_PHASE], dtype=pl.String)
    n_keys = len(key_name)  # index key + 1; 0 is no phase, which the last name reads through key -1
    key_name = pl.concat([key_name.tail(1), key_name.head(n_keys - 1)])
    frames: list[pl.DataFrame] = []
    # (what _device_phases reads: a filter copies only these columns, and one device's are all rows)
    narrow = selected(activity, "dev", "start_ns", "end_ns", "phase_key", "is_comm")
    for dev_row in device_table.iter_rows(named=True):
        dev = int(dev_row["dev"])
        win = iv.merge(iv.Intervals.from_frame(windows.filter(pl.col("dev") == dev)))
        if len(win) == 0:
            continue
        mine = ranges.filter((pl.col("source") == dev_row["source"]) & pl.col("pid").eq_missing(dev_row["pid"]))
        measured = _device_phases(
            narrow if device_table.height == 1 else narrow.filter(pl.col("dev") == dev),
            win,
            gaps.filter(pl.col("dev") == dev),
            causes.get(dev, {}),
            mine,
            n_keys,
            merged=None if merged is None else merged.get(dev),
        )
        per_key = pl.DataFrame({"phase": key_name, **measured}).filter(
            pl.any_horizontal(pl.col(c) != 0 for c in measured)
        )
        counted = mine.group_by("name").agg(pl.len().cast(pl.Int64).alias("ranges")).rename({"name": "phase"})
        by_name = per_key.group_by("phase").agg(pl.all().sum()).join(counted, on="phase", how="left")
        frames.append(
            by_name.with_columns(
                pl.col("ranges").fill_null(0),
                *(pl.lit(dev_row[k]).alias(k) for k in ("rank", "device", "pid", "source")),
            )
        )
    schema: dict[str, Any] = {
        "rank": pl.Int32,
        "device": pl.Int32,
        "pid": pl.Int64,
        "source": pl.String,
        "phase": pl.String,
        **{c: pl.Int64 for c in PHASE_COLUMNS[5:]},
    }
    table = (
        pl.concat([f.select(pl.col(c).cast(t) for c, t in schema.items()) for f in frames])
        if frames
        else pl.DataFrame(schema=schema)
    )
    return table.sort(
        ["rank", "source", "pid", "device", "dur_ns", "phase"],
        descending=[False, False, False, False, True, False],
        nulls_last=False,
    ).select(PHASE_COLUMNS)


def _device_phases(
    acts: pl.DataFrame,
    win: iv.Intervals,
    gaps: pl.DataFrame,
    causes: Mapping[str, iv.Intervals],
    ranges: pl.DataFrame,
    n_keys: int,
    *,
    painted: bool = False,
    merged: Busy | None = None,
) -> dict[str, np.ndarray]:
    """Per phase key + 1 (index 0: no phase; ``n_keys`` of them), one device's ns of each measure
    inside ``win``, and its ``activities``.

    A segment of the device's time between two consecutive bounds of anything measured (the
    activities, windows, gaps, phase ranges and causes) is compute time of the largest phase key
    among the compute activities covering it, else exposed communication of the largest among the
    communication ones, else idle time of the host's phase at its start.  Where no two compute
    activities overlap and no two communication ones do (one stream each: a segment is covered by
    at most one of each), each activity's own ns in the windows is its phase's, and only the idle
    time is cut into segments; else (or with ``painted``, which the tests compare against) every
    segment is painted with its largest key.  ``merged``: the device's activity merged (its compute
    and all of it), which the measures of apart activities read, where the caller holds it."""
    a_start = column_array(acts, "start_ns")
    a_end = column_array(acts, "end_ns")
    a_key = column_array(acts, "phase_key")
    a_comm = column_array(acts, "is_comm")
    # Where the idle measures can change: the windows, the gaps and phase ranges (the host's
    # phase) and the causes.
    breaks = [win.start_ns, win.end_ns]
    breaks += [f.get_column(c).to_numpy() for f in (gaps, ranges) for c in ("start_ns", "end_ns")]
    breaks += [x for c in causes.values() for x in (c.start_ns, c.end_ns)]
    every: _Spans = (a_start, a_end, a_key)
    comm_rows = a_comm if a_comm.any() else None
    comm = _rows_of(every, comm_rows if comm_rows is not None else slice(0))
    # (the compute activities, copied out of all of them only where they are read alone)
    compute: _Spans | None = every if comm_rows is None else None
    if painted or not _apart(*comm[:2]):
        apart = False
    elif merged is not None and len(merged.compute) == len(a_start) - len(comm[0]):
        apart = True  # (their union has a component per compute activity: none overlaps or touches another)
    else:
        compute = compute if compute is not None else _rows_of(every, ~a_comm)
        apart = _apart(*compute[:2])
    if apart:
        if merged is not None:
            compute_merged, every_merged = merged.compute, merged.every
        else:
            assert compute is not None  # (copied for the check above)
            compute_merged = iv.merge(iv.Intervals._trusted(*compute[:2]))
            every_merged = iv.merge(iv.Intervals._trusted(a_start, a_end))
        out, idle_start, idle_len = _measured_apart(
            compute_merged, every_merged, every, comm_rows, comm, win, breaks, n_keys
        )
    else:
        compute = compute if compute is not None else _rows_of(every, ~a_comm)
        out, idle_start, idle_len = _measured_painted(compute, comm, win, breaks, n_keys)
    host = _host_phase(idle_start, gaps, ranges)
    out["idle_ns"] = _sum_by_key(host, idle_len, n_keys)
    for cause in CAUSES:
        region = causes.get(cause)
        inside = _inside(idle_start, region) if region is not None else np.zeros(len(idle_start), bool)
        out[f"idle_{cause}_ns"] = _sum_by_key(np.where(inside, host, _EMPTY), idle_len, n_keys)
    out["dur_ns"] = out["compute_ns"] + out["exposed_comm_ns"] + out["idle_ns"]
    launched = np.bincount(a_key + 1, minlength=n_keys)[:n_keys] if len(a_key) else np.zeros(n_keys, np.int64)
    out["activities"] = launched.astype(np.int64)
    return out


_Spans = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Activities' starts, ends and phase keys."""
_Measured = tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]
"""The busy measures by key, and the idle segments' starts and ns inside the windows."""


def _apart(start: np.ndarray, end: np.ndarray) -> bool:
    """Whether the intervals come in start order and none overlaps the next (so none overlaps any other)."""
    return bool(np.all(start[1:] >= end[:-1]))


def _measured_apart(
    compute_merged: iv.Intervals,
    every_merged: iv.Intervals,
    every: _Spans,
    comm_rows: np.ndarray | None,
    comm: _Spans,
    win: iv.Intervals,
    breaks: list[np.ndarray],
    n_keys: int,
) -> _Measured:
    """:func:`_device_phases`' busy measures where each kind's activities are apart (``every``: all
    of them; ``comm_rows``: which are communication, None for none, and ``comm`` those rows;
    ``compute_merged``, ``every_merged``: the compute activities and all of them, merged): each
    one's ns in the windows (and a communication one's exposed ns, outside the compute activities
    too); and the idle segments: the device's idle time, cut at the breaks inside it (the functions
    read there change only at breaks)."""
    # Each activity's ns in the windows is its own: the compute ones' are summed with those of
    # the communication ones read as 0, not copied out of the millions of rows.
    in_windows = iv.overlap_with_windows(iv.Intervals._trusted(*every[:2]), win)
    comm_in = in_windows[comm_rows if comm_rows is not None else slice(0)]
    compute_in = in_windows if comm_rows is None else np.where(comm_rows, 0, in_windows)
    hidden = iv.overlap_with_windows(iv.Intervals._trusted(*comm[:2]), iv.intersect(compute_merged, win))
    out = {
        "compute_ns": _sum_by_key(every[2], compute_in, n_keys),
        "comm_ns": _sum_by_key(comm[2], comm_in, n_keys),
        "exposed_comm_ns": _sum_by_key(comm[2], comm_in - hidden, n_keys),
    }
    spans = [*every[:2], *breaks]
    lo = min(int(x.min()) for x in spans if len(x))
    hi = max(int(x.max()) for x in spans if len(x))
    idle = iv.complement(every_merged, lo, hi)
    bounds = distinct(np.concatenate([idle.start_ns, idle.end_ns, *breaks]), runs=True)  # each part sorted, or nearly
    seg_start, seg_end = bounds[:-1], bounds[1:]
    keep = _inside(seg_start, idle)
    idle_start = seg_start[keep]
    return out, idle_start, np.where(_inside(idle_start, win), seg_end[keep] - idle_start, 0)


def _rows_of(spans: _Spans, rows: np.ndarray | slice) -> _Spans:
    """The ``rows`` (a mask or a slice) of ``spans``."""
    return (spans[0][rows], spans[1][rows], spans[2][rows])


def _measured_painted(
    compute: _Spans, comm: _Spans, win: iv.Intervals, breaks: list[np.ndarray], n_keys: int
) -> _Measured:
    """:func:`_device_phases`' busy measures by painting every segment with its largest key, and
    its idle segments."""
    bounds = distinct(np.concatenate([*compute[:2], *comm[:2], *breaks]), runs=True)  # each part sorted, or nearly
    seg_start, seg_end = bounds[:-1], bounds[1:]
    seg_len = np.where(_inside(seg_start, win), seg_end - seg_start, 0)
    covered_compute = _paint(bounds, *compute)
    covered_comm = _paint(bounds, *comm)
    exposed = np.where(covered_compute == _EMPTY, covered_comm, _EMPTY)
    out = {
        "compute_ns": _sum_by_key(covered_compute, seg_len, n_keys),
        "comm_ns": _sum_by_key(covered_comm, seg_len, n_keys),
        "exposed_comm_ns": _sum_by_key(exposed, seg_len, n_keys),
    }
    # The idle segments (no activity) are a few thousand of a device's millions: the host's phase
    # and the causes are read for those alone.
    idle = np.flatnonzero((covered_compute == _EMPTY) & (covered_comm == _EMPTY))
    return out, seg_start[idle], seg_len[idle]


def _inside(points: np.ndarray, region: iv.Intervals) -> np.ndarray:
    """Whether each point lies in the normalised ``region``."""
    if len(region) == 0:
        return np.zeros(len(points), bool)
    i = np.searchsorted(region.start_ns, points, side="right") - 1
    ok = i >= 0
    out = np.zeros(len(points), bool)
    out[ok] = points[ok] < region.end_ns[i[ok]]
    return out


def _paint(bounds: np.ndarray, start: np.ndarray, end: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per segment between ``bounds``, the largest ``key`` of the intervals covering it
    (:data:`_EMPTY` where none does)."""
    out = np.full(max(len(bounds) - 1, 0), _EMPTY, np.int64)
    first = np.searchsorted(bounds, start)
    last = np.searchsorted(bounds, end)
    counts = np.maximum(last - first, 0)
    # Most intervals cover one segment (the bounds hold every start and end): those are painted
    # as they are; only the others are expanded to one entry per segment they cover.
    one = counts == 1
    np.maximum.at(out, first[one], key[one])
    several = np.flatnonzero(counts > 1)
    if len(several):
        n = counts[several]
        owner = np.repeat(several, n)
        offsets = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        np.maximum.at(out, first[owner] + offsets, key[owner])
    return out


def _host_phase(points: np.ndarray, gaps: pl.DataFrame, ranges: pl.DataFrame) -> np.ndarray:
    """Per point (sorted), the key of the innermost phase open at it on the thread the idle
    attribution reads for the gap it lies in (:data:`_NONE` outside phases, outside gaps or without
    a thread)."""
    host = np.full(len(points), _NONE, np.int64)
    g_start = gaps.get_column("start_ns").to_numpy()
    if len(g_start) == 0 or len(points) == 0:
        return host
    g_end = gaps.get_column("end_ns").to_numpy()
    g_thread = gaps.get_column("thread").fill_null(-1).to_numpy()
    point_gap = np.searchsorted(g_start, points, side="right") - 1
    in_gap = (point_gap >= 0) & (points < g_end[np.maximum(point_gap, 0)])
    thread = np.where(in_gap, g_thread[np.maximum(point_gap, 0)], -1)
    for tid in distinct(thread[in_gap & (thread != -1)]):
        on = ranges.filter(pl.col("tid") == int(tid))
        mask = thread == tid
        host[mask] = np.maximum(
            _innermost(
                points[mask],
                on.get_column("start_ns").to_numpy(),
                on.get_column("end_ns").to_numpy(),
                on.get_column("key").to_numpy(),
            ),
            _NONE,
        )
    return host


def _innermost(points: np.ndarray, start: np.ndarray, end: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per point, the largest ``key`` of the intervals that contain it (:data:`_EMPTY` where none
    does): the intervals painted over the segments between their own ends (not the device's
    millions of segments), each point read in the segment that starts at or before it.  A point
    ``p`` lies in segment ``[b_j, b_j+1)``; an interval ``[s, e)`` covers that segment exactly when
    ``s <= p < e``, since both of its ends are bounds."""
    bounds = distinct(np.concatenate([start, end]), runs=True)  # (ranges by start: two runs, or nearly)
    # One more _EMPTY: a point at or past the last bound reads it, and so does one before the
    # first bound (segment -1).
    painted = np.append(_paint(bounds, start, end, key), _EMPTY)
    return painted[np.searchsorted(bounds, points, side="right") - 1]


def _sum_by_key(key: np.ndarray, lengths: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key + 1, the summed ``lengths`` of the segments with that key (:data:`_EMPTY` left out).

    Activities in start order come in runs of one phase key (a phase launches many kernels): where
    the runs are few, each run is summed first (exactly, in int64) and only the runs are counted."""
    if len(key) > _RUN_SUM_MIN:
        first = np.flatnonzero(key[1:] != key[:-1]) + 1
        if len(first) < len(key) // 4:
            first = np.concatenate(([0], first))
            key, lengths = key[first], np.add.reduceat(lengths, first)
    # _EMPTY (-2) lands in bin 0, which is dropped.
    return np.bincount(key + 2, weights=lengths, minlength=n_keys + 1)[1 : n_keys + 1].astype(np.int64)


def phase_breakdowns(table: pl.DataFrame) -> tuple[PhaseBreakdown, ...]:
    """The rows of :func:`phase_table` as result dataclasses, in its order."""
    return tuple(
        PhaseBreakdown(
            rank=r["rank"],
            device=int(r["device"]),
            pid=r["pid"],
            source=str(r["source"]),
            phase=str(r["phase"]),
            ranges=int(r["ranges"]),
            activities=int(r["activities"]),
            dur_ns=int(r["dur_ns"]),
            compute_ns=int(r["compute_ns"]),
            comm_ns=int(r["comm_ns"]),
            exposed_comm_ns=int(r["exposed_comm_ns"]),
            idle_ns=int(r["idle_ns"]),
            idle_by_cause_ns={c: int(r[f"idle_{c}_ns"]) for c in CAUSES},
        )
        for r in table.iter_rows(named=True)
    )
