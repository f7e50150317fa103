"""Every idle ns of every device, attributed to what the host was doing at that ns.

Definitions in ``docs/analyses.md`` ("Idle time by cause"); the facts each idle interval
``[a, b)`` is read with (A, L, T, E, S, the launch latency) come from :mod:`traceq.analyses.idle`,
the host's states from :mod:`traceq.analyses.host_state`.  For each ns ``t`` the first rule that
applies gives its cause:

1. ``unknown``: no thread T (no launch recorded for A, nor for the activity before the interval);
2. ``dependency``: ``t >= L.end + latency``: A was queued and could have started, the GPU waited
   on another stream, an event or a peer;
3. ``sync``: T is inside a synchronising call (blocked);
4. ``input``: T is inside a data-loader range, or another thread of its process is while T runs
   nothing more specific than its step;
5. ``compile``: T is inside a compile range;
6. ``sync``: ``t >= S.end`` for the draining sync S: the host refilling a queue a sync drained;
7. ``launch``: ``t >= E.start``: the host issuing A (its op, the launch call) or the latency after;
8. ``cpu``: T is inside any other recorded CPU event;
9. ``unknown``: nothing recorded on T.

Every rule is a set of intervals, applied in order to what the earlier ones left: the causes
partition the idle time exactly.  Everything is interval algebra over numpy arrays, per device and
launching thread; nothing runs per ns or per interval in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.asof import integer_groups
from traceq.analyses.host_state import HostState, ThreadKey, host_state, sync_calls
from traceq.analyses.idle import (
    idle_intervals,
    launch_latency_ns,
    with_draining_syncs,
    with_enclosing_ops,
    with_launches,
    with_neighbours,
)
from traceq.analyses.model import CAUSES


@dataclass(frozen=True)
class Attribution:
    """The idle time of every device, by cause.

    ``gaps`` has one row per idle interval (columns in :func:`attribute`); ``causes[dev][cause]`` is
    the normalised set of that device's idle ns of that cause; ``latency_ns[dev]`` its launch latency.
    """

    gaps: pl.DataFrame
    causes: Mapping[int, Mapping[str, iv.Intervals]]
    latency_ns: Mapping[int, int]


def attribute(
    cpu: pl.DataFrame,
    activity: pl.DataFrame,
    busy: Mapping[int, iv.Intervals],
    windows: pl.DataFrame,
    launches: pl.DataFrame,
    *,
    step_pattern: str,
) -> Attribution:
    """Attribute every idle ns of every device.

    ``cpu``: the CPU events, labelled (:func:`traceq.analyses.host_state.labelled`); ``activity``:
    the GPU rows with their ``dev`` (dev, source, pid, name, kind, stream, correlation, start_ns,
    end_ns); ``busy``: each dev's activity merged (a dev of the device table with no activity: none
    or empty); ``windows``: the step windows (dev, start_ns, end_ns); ``launches``: every launching
    call by device (:func:`traceq.analyses.idle.launches_by_device`).

    Columns of ``Attribution.gaps``, one row per idle interval, sorted by dev and start: dev,
    start_ns, end_ns, dur_ns, kind, cause (the dominant one: most ns, ties in :data:`CAUSES`
    order), ``<cause>_ns`` for every cause, next_name, next_kind, next_stream, next_correlation,
    next_start_ns, next_end_ns (null for a trailing interval), launch_name, launch_start_ns,
    launch_end_ns, launch_tid, launch_correlation (A's launch), sync_name, sync_start_ns,
    sync_end_ns, sync_tid, sync_correlation (the sync that blocked or drained, where sync has ns in
    the interval), thread (T: the thread whose state the interval's ns are read from; null without
    one).
    """
    step_names = _step_names(cpu, step_pattern)
    facts = with_neighbours(idle_intervals(activity, busy, windows), activity)
    facts = with_launches(facts, cpu)
    facts = with_enclosing_ops(facts, cpu, step_names)
    facts = with_draining_syncs(facts, sync_calls(cpu), launches)
    latency = launch_latency_ns(facts, activity)
    threads = facts.select("source", "pid", "thread").drop_nulls("thread").unique()
    keys: list[ThreadKey] = [(s, p, t) for s, p, t in threads.iter_rows()]
    state = host_state(cpu, keys)
    causes: dict[int, dict[str, iv.Intervals]] = {}
    measured: list[pl.DataFrame] = []
    for (dev,), rows in facts.with_row_index("_row").partition_by("dev", as_dict=True, maintain_order=True).items():
        per_cause = _device_causes(rows, state, latency.get(int(dev), 0))
        causes[int(dev)] = per_cause
        spans = iv.Intervals.from_frame(rows)
        measured.append(
            pl.DataFrame(
                {
                    "_row": rows.get_column("_row"),
                    **{f"{c}_ns": iv.overlap_with_windows(spans, per_cause[c]) for c in CAUSES},
                }
            )
        )
    gaps = _with_dominant_cause(facts, measured)
    return Attribution(gaps=gaps, causes=causes, latency_ns=latency)


def _step_names(cpu: pl.DataFrame, step_pattern: str) -> pl.Series:
    return cpu.filter(pl.col("_step")).get_column("name").unique().cast(pl.String)


def _device_causes(rows: pl.DataFrame, state: HostState, latency_ns: int) -> dict[str, iv.Intervals]:
    """The idle ns of one device's ``rows`` (its idle intervals with their facts), by cause."""
    found: dict[str, list[iv.Intervals]] = {c: [] for c in CAUSES}
    without = rows.filter(pl.col("thread").is_null())
    found["unknown"].append(iv.Intervals.from_frame(without))
    (threaded,), by, _ = integer_groups([rows.filter(pl.col("thread").is_not_null())], ["source", "pid", "thread"])
    for group in threaded.partition_by(by, maintain_order=True) if threaded.height else []:
        pid = group.item(0, "pid")
        key: ThreadKey = (str(group.item(0, "source")), None if pid is None else int(pid), int(group.item(0, "thread")))
        thread = state.threads[key]
        left = iv.Intervals.from_frame(group)  # disjoint and sorted: one device's idle intervals
        a = group.get_column("start_ns").to_numpy()
        b = group.get_column("end_ns").to_numpy()
        launch_end = group.get_column("launch_end_ns").fill_null(np.iinfo(np.int64).max).to_numpy()
        queued = _from(np.minimum(launch_end, np.iinfo(np.int64).max - latency_ns) + latency_ns, a, b)
        drained = _from(group.get_column("sync_end_ns").fill_null(np.iinfo(np.int64).max).to_numpy(), a, b)
        issuing = _from(group.get_column("op_start_ns").fill_null(np.iinfo(np.int64).max).to_numpy(), a, b)
        input_ns = iv.union(thread.loader, iv.subtract(state.loader_elsewhere(key), thread.busy))
        for cause, region in (
            ("dependency", queued),
            ("sync", thread.sync),
            ("input", input_ns),
            ("compile", thread.compile),
            ("sync", drained),
            ("launch", issuing),
            ("cpu", thread.recorded),
        ):
            taken = iv.intersect(left, region)
            if len(taken):
                found[cause].append(taken)
                left = iv.subtract(left, taken)
        found["unknown"].append(left)
    return {c: iv.union(*parts) if parts else iv.Intervals.empty() for c, parts in found.items()}


def _from(start: np.ndarray, a: np.ndarray, b: np.ndarray) -> iv.Intervals:
    """Per interval ``[a, b)``, its part from ``start`` on (empty where ``start >= b``)."""
    lo = np.clip(start, a, b)
    return iv.Intervals(lo, b)


def _with_dominant_cause(facts: pl.DataFrame, measured: list[pl.DataFrame]) -> pl.DataFrame:
    columns = [f"{c}_ns" for c in CAUSES]
    ns = (
        pl.concat(measured).sort("_row")
        if measured
        else pl.DataFrame(schema={"_row": pl.UInt32, **dict.fromkeys(columns, pl.Int64)})
    )
    table = facts.with_row_index("_row").join(ns, on="_row", how="left").drop("_row")
    most = pl.max_horizontal(columns)
    dominant = pl.coalesce(*(pl.when(pl.col(f"{c}_ns") == most).then(pl.lit(c)) for c in CAUSES))
    has_sync = pl.col("sync_ns") > 0
    sync_cols = [f"sync_{c}" for c in ("name", "start_ns", "end_ns", "tid", "correlation")]
    return table.with_columns(
        dominant.alias("cause"),
        *(
            pl.when(has_sync).then(pl.coalesce(pl.col(c), pl.col(c.replace("sync_", "blocked_")))).alias(c)
            for c in sync_cols
        ),
    ).select(
        "dev",
        "start_ns",
        "end_ns",
        "dur_ns",
        "kind",
        "cause",
        *columns,
        "next_name",
        "next_kind",
        "next_stream",
        "next_correlation",
        "next_start_ns",
        "next_end_ns",
        "launch_name",
        "launch_start_ns",
        "launch_end_ns",
        "launch_tid",
        "launch_correlation",
        *sync_cols,
        "thread",
    )
