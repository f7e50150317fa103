"""Every idle interval of every device, and the facts around it that its attribution reads.

Definitions (``docs/analyses.md``, "Idle time by cause"): a device's *span* runs from the earlier of
its first step window and its first activity to the later of its last step window and its last
activity; its **idle intervals** are the maximal runs of the span with no activity on any stream,
so they include the *leading* interval before the first activity and the *trailing* one after the
last.  For each idle interval ``[a, b)`` this module finds:

* **A**, the activity that ends it (the earliest start at ``b``; ties: lowest correlation id; none
  for a trailing interval), and the activity that precedes it (the one ending at ``a``);
* **L**, A's launching call (the ``cuda_api`` row with the same source, process and correlation
  id; a CUDA-graph launch launches every kernel of its graph); **T**, the thread of L, or, where A
  has no recorded launch (or there is no A), the thread that launched the activity before it;
* **E**, the innermost CPU op or range on T enclosing L (Kineto links them by ``External id``;
  otherwise the latest-starting op or non-step range on T that contains L);
* **S**, the *draining* sync: the latest-starting synchronising call on T that started before
  ``a`` (it waited while the device was busy), if it returned by ``L.start`` and T started no other
  launch of work on this device after it and before L;
* the device's **launch latency** :func:`launch_latency_ns`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.asof import join_asof_by, latest_at_or_before, latest_containing
from traceq.analyses.column_arrays import column_array
from traceq.analyses.launch_link import NONE, LaunchLink, as_index, gathered, rows_where
from traceq.analyses.steps import only_dev
from traceq.sorted_search import distinct

LAUNCH_LATENCY_CAP_NS: Final = 50_000
"""A delay from a launch's return to its kernel's start above this is no launch latency."""

LAUNCH_LATENCY_QUANTILE: Final = 0.10
"""The latency is this quantile of the delays: on an idle GPU a kernel starts one latency after its
launch returns, so the low end of the delays is the latency; queued work waits longer."""


def idle_intervals(activity: pl.DataFrame, busy: Mapping[int, iv.Intervals], windows: pl.DataFrame) -> pl.DataFrame:
    """The idle intervals of every device.

    ``activity`` has dev, start_ns, end_ns (GPU activity); ``busy``: each dev's activity merged
    (:func:`traceq.intervals.merge` of its rows; a dev without any: none or empty); ``windows``
    dev, start_ns, end_ns.  Columns: dev (UInt32), start_ns, end_ns, dur_ns; sorted by dev, start_ns.
    """
    one = only_dev(activity)
    devs = None if one is not None else column_array(activity, "dev")
    starts = column_array(activity, "start_ns")
    ends = column_array(activity, "end_ns")
    win_dev = windows.get_column("dev").to_numpy()
    win_start = windows.get_column("start_ns").to_numpy()
    win_end = windows.get_column("end_ns").to_numpy()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for dev, merged in sorted(busy.items()):
        if len(merged) == 0:
            continue
        if devs is None:  # (one device: its rows are every row, not a copy of them)
            if dev != one:
                continue
            dev_starts, dev_ends = starts, ends
        else:
            on = devs == dev
            dev_starts, dev_ends = starts[on], ends[on]
        on_win = win_dev == dev
        first, last = int(dev_starts.min()), int(dev_ends.max())  # zero-length activities too
        lo = int(min(first, win_start[on_win].min(initial=first)))
        hi = int(max(last, win_end[on_win].max(initial=last)))
        idle = iv.complement(merged, lo, hi)
        parts.append((np.full(len(idle), dev, np.uint32), idle.start_ns, idle.end_ns))
    if not parts:
        return pl.DataFrame(schema={"dev": pl.UInt32, "start_ns": pl.Int64, "end_ns": pl.Int64, "dur_ns": pl.Int64})
    dev_col, start, end = (np.concatenate(c) for c in zip(*parts, strict=True))
    return pl.DataFrame({"dev": dev_col, "start_ns": start, "end_ns": end, "dur_ns": end - start})


def with_neighbours(intervals: pl.DataFrame, activity: pl.DataFrame) -> pl.DataFrame:
    """``intervals`` plus the activity that ends each one (``next_*``: name, kind, stream,
    correlation, start_ns, end_ns, call; ``source``, ``pid``), the correlation and call of the one
    before it (``prev_correlation``, ``prev_call``) and the interval's ``kind``: ``leading`` (no
    activity ends where it begins), ``trailing`` (none starts where it ends), else ``between``.
    ``activity`` has dev, source, pid, name, kind, stream, correlation, start_ns, end_ns, call.

    The activity that ends an interval is the one on its device that starts where the interval
    ends, the one before it the one that ends where it begins; of several, the first by
    correlation (nulls last), then in table order.  An interval without a next activity takes its
    ``source`` and ``pid`` from its device's first activity.  Each is found among the activity
    whose time is one of the intervals' (:func:`_first_at`), and gathered by position in the
    intervals' order."""
    gap_dev = intervals.get_column("dev").to_numpy()
    next_rows = _first_at(activity, "start_ns", gap_dev, intervals.get_column("end_ns").to_numpy())
    prev_rows = _first_at(activity, "end_ns", gap_dev, intervals.get_column("start_ns").to_numpy())
    firsts = activity.select(pl.col("dev").unique(maintain_order=True), pl.col("dev").arg_unique().alias("row"))
    first_of = np.full(int(max(gap_dev.max(initial=0), firsts.get_column("dev").max() or 0)) + 1, NONE, np.int64)
    first_of[firsts.get_column("dev").to_numpy()] = firsts.get_column("row").to_numpy()
    owner_rows = first_of[gap_dev]
    kinds = np.where(next_rows < 0, 0, np.where(prev_rows < 0, 1, 2))
    kind = pl.Series("kind", ["trailing", "leading", "between"], dtype=pl.String).gather(kinds)
    at_next, at_owner, at_prev = (
        as_index(r) for r in (next_rows, np.where(next_rows >= 0, next_rows, owner_rows), prev_rows)
    )
    found = activity.select(
        pl.col("source").gather(at_owner).cast(pl.String),
        pl.col("pid").gather(at_owner),
        pl.col("name").gather(at_next).cast(pl.String).alias("next_name"),
        pl.col("kind").gather(at_next).cast(pl.String).alias("next_kind"),
        *(
            pl.col(c).gather(at_next).alias(f"next_{c}")
            for c in ("stream", "correlation", "start_ns", "end_ns", "call")
        ),
        *(pl.col(c).gather(at_prev).alias(f"prev_{c}") for c in ("correlation", "call")),
    )
    return pl.concat([intervals, found, kind.to_frame()], how="horizontal")


def _first_at(
    activity: pl.DataFrame, column: str, devs: np.ndarray[Any, Any], queries: iv.Int64Array
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Per query (a dev of ``devs`` and a time of ``queries``), the activity row on that dev whose
    ``column`` equals the time, :data:`NONE` for none; of several, the first by correlation, nulls
    last, then in table order.  Only the rows whose time is one of the queries' are read out of
    the table (one in a thousand, where the GPU runs back to back)."""
    out = np.full(queries.size, NONE, np.int64)
    wanted = pl.Series(queries, dtype=pl.Int64).implode()
    rows = rows_where(activity, pl.col(column).is_in(wanted))  # (in table order)
    if rows.size == 0:
        return out
    found = gathered(activity, rows, "dev", column, pl.col("correlation").is_null().alias("_none"), "correlation")
    row_dev, times = found.get_column("dev").to_numpy(), found.get_column(column).to_numpy()
    no_correlation = found.get_column("_none").to_numpy()
    correlations = found.get_column("correlation").fill_null(0).to_numpy()
    for dev in distinct(devs).tolist():
        mine, on = np.flatnonzero(row_dev == dev), np.flatnonzero(devs == dev)
        if mine.size == 0:
            continue
        if not bool(np.all(times[mine][1:] > times[mine][:-1])):  # (in time order, no two at once: as they are)
            mine = mine[np.lexsort((mine, correlations[mine], no_correlation[mine], times[mine]))]
        by_time = times[mine]
        at = np.minimum(np.searchsorted(by_time, queries[on]), by_time.size - 1)  # (the first of equal times)
        out[on] = np.where(by_time[at] == queries[on], rows[mine[at]], NONE)
    return out


def with_launches(frame: pl.DataFrame, cpu: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (from :func:`with_neighbours`) plus ``launch_*`` (A's launch: name, start_ns, end_ns,
    tid, correlation, external_id), ``prev_launch_tid`` and ``thread`` (T: the launch's thread, else
    the preceding activity's launch's)."""
    nxt = cpu.select(
        *(
            pl.col(c).gather(frame.get_column("next_call")).alias(f"launch_{c}")
            for c in ("name", "start_ns", "end_ns", "tid", "external_id")
        ),
        pl.col("tid").gather(frame.get_column("prev_call")).alias("_prev_tid"),
    ).with_columns(pl.col("launch_name").cast(pl.String))
    return (
        pl.concat([frame, nxt], how="horizontal")
        .with_columns(
            pl.when(pl.col("launch_name").is_not_null()).then(pl.col("next_correlation")).alias("launch_correlation"),
            # A's launching thread; where A has no launch recorded (or there is no A), the thread
            # that launched the activity before the interval: the host that last fed the device.
            pl.coalesce("launch_tid", "_prev_tid").alias("thread"),
        )
        .drop("_prev_tid")
    )


def launch_latency_ns(frame: pl.DataFrame, activity: pl.DataFrame) -> dict[int, int]:
    """Per dev: the :data:`LAUNCH_LATENCY_QUANTILE` of ``A.start − L.end`` over its idle intervals
    whose A is the first activity of its launch (a CUDA graph's later nodes wait for the earlier
    ones, not for the launch) and whose delay lies in ``[0, LAUNCH_LATENCY_CAP_NS]`` (0 where there
    is none)."""
    # Only the launches of the activities that end an interval matter: a semi join first spares a
    # group_by over every activity of the table.
    ending = frame.select("dev", pl.col("next_correlation").alias("correlation")).drop_nulls().unique()
    first = (
        activity.lazy()
        .filter(pl.col("correlation").is_in(ending.get_column("correlation").implode()))  # (one key: cheap per row)
        .select("dev", "correlation", "start_ns")
        .collect()
        .join(ending, on=["dev", "correlation"], how="semi")
        .group_by("dev", "correlation")
        .agg(pl.col("start_ns").min().alias("_first"))
    )
    delay = pl.col("next_start_ns") - pl.col("launch_end_ns")
    per = (
        frame.join(first.rename({"correlation": "next_correlation"}), on=["dev", "next_correlation"], how="left")
        .filter(delay.is_between(0, LAUNCH_LATENCY_CAP_NS) & (pl.col("next_start_ns") == pl.col("_first")))
        .group_by("dev")
        .agg(delay.quantile(LAUNCH_LATENCY_QUANTILE, interpolation="lower").alias("lat"))
    )
    return {int(d): int(lat) for d, lat in per.iter_rows()}


def with_enclosing_ops(frame: pl.DataFrame, cpu: pl.DataFrame, step_names: pl.Series) -> pl.DataFrame:
    """``frame`` plus ``op_start_ns``: the start of the innermost CPU op or range on T enclosing L
    (null without L; L's own start where nothing encloses it).

    The op Kineto links to L by ``External id`` where it contains L; else the latest-starting op or
    non-step range on T that contains L (:func:`~traceq.analyses.asof.latest_containing`), which
    need not be the latest to start before L: an op that started later may have ended already (a
    child op done before its parent launched)."""
    ops = cpu.filter(pl.col("kind").is_in(("cpu_op", "range")) & ~pl.col("name").is_in(step_names.implode()))
    # (only the ids of the intervals' launches: a trace's ops are millions, its idle intervals few)
    asked = frame.get_column("launch_external_id").drop_nulls().unique()
    by_id = (
        ops.filter(pl.col("external_id").is_in(asked.implode()))
        .select("source", "pid", pl.col("external_id").alias("launch_external_id"), "start_ns", "end_ns")
        .sort("start_ns", descending=True)
        .unique(subset=["source", "pid", "launch_external_id"], keep="first")
        .rename({"start_ns": "_xs", "end_ns": "_xe"})
    )
    linked = frame.join(
        by_id, on=["source", "pid", "launch_external_id"], how="left", nulls_equal=False, maintain_order="left"
    )
    near = ops.select("source", "pid", pl.col("tid").alias("thread"), "start_ns", "end_ns")
    calls = linked.select(
        "source", "pid", "thread", pl.col("launch_start_ns").alias("start_ns"), pl.col("launch_end_ns").alias("end_ns")
    )
    around = as_index(latest_containing(calls, near, by=("source", "pid", "thread")))
    linked_contains = (pl.col("_xs") <= pl.col("launch_start_ns")) & (pl.col("_xe") >= pl.col("launch_end_ns"))
    start = pl.when(linked_contains).then(pl.col("_xs")).otherwise(pl.coalesce("_as", "launch_start_ns"))
    with_around = linked.with_columns(near.get_column("start_ns").gather(around).alias("_as"))
    return with_around.with_columns(start.alias("op_start_ns")).drop("_xs", "_xe", "_as")


def with_draining_syncs(frame: pl.DataFrame, syncs: pl.DataFrame, launches_by_dev: pl.DataFrame) -> pl.DataFrame:
    """``frame`` plus ``sync_*`` (name, start_ns, end_ns, tid, correlation) of the draining sync S
    (null where there is none) and ``blocked_*`` (the latest sync on T that started before the
    interval's end and ended after its start: the host blocked inside the interval).

    S is the latest-starting sync on T that started before the interval (``start < a``: it waited
    while the device was busy), provided it returned by ``L.start`` and T started no launch of work
    on this device after it and before L."""
    right = syncs.select(
        "source",
        "pid",
        pl.col("tid").alias("thread"),
        pl.col("start_ns").alias("_key"),
        *(pl.col(c).alias(f"sync_{c}") for c in ("name", "start_ns", "end_ns", "tid", "correlation")),
    ).sort("_key", "sync_end_ns")
    left = frame.with_row_index("_order")
    with_l = left.filter(pl.col("launch_start_ns").is_not_null()).with_columns((pl.col("start_ns") - 1).alias("_key"))
    matched = join_asof_by(
        with_l.sort("_key"),
        right,
        on="_key",
        by=["source", "pid", "thread"],
        strategy="backward",
        check_sortedness=False,
    )
    matched = _with_previous_launch(
        matched.with_columns((pl.col("launch_start_ns") - 1).alias("_key")), launches_by_dev
    )
    drains = (
        pl.col("sync_name").is_not_null()
        & (pl.col("sync_end_ns") <= pl.col("launch_start_ns"))
        & (pl.col("_prev_start").is_null() | (pl.col("_prev_start") < pl.col("sync_end_ns")))
    )
    sync_cols = [f"sync_{c}" for c in ("name", "start_ns", "end_ns", "tid", "correlation")]
    matched = matched.with_columns(pl.when(drains).then(pl.col(c)).alias(c) for c in sync_cols).select(
        "_order", *sync_cols
    )
    blocked = _blocked_syncs(left, syncs)
    return (
        left.join(matched, on="_order", how="left").join(blocked, on="_order", how="left").sort("_order").drop("_order")
    )


def _with_previous_launch(frame: pl.DataFrame, launches_by_dev: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (dev, source, pid, thread, ``_key``) plus ``_prev_start``: the start of the latest
    launch of work on the device by the thread that started at or before ``_key`` (null: none).
    There are few intervals and millions of launches: a binary search where the keys pack, so the
    launches are not sorted (they come in start order) nor joined."""
    by = ["dev", "source", "pid", "thread"]
    prev = launches_by_dev.select(
        "dev", "source", "pid", pl.col("tid").alias("thread"), pl.col("start_ns").alias("_key")
    )
    found = latest_at_or_before(frame, prev, on="_key", by=by)
    if found is not None:
        return frame.with_columns(prev.get_column("_key").gather(as_index(found)).alias("_prev_start"))
    return join_asof_by(
        frame.sort("_key"),
        prev.with_columns(pl.col("_key").alias("_prev_start")).sort("_key"),
        on="_key",
        by=by,
        strategy="backward",
        check_sortedness=False,
    )


def _blocked_syncs(left: pl.DataFrame, syncs: pl.DataFrame) -> pl.DataFrame:
    """Per interval (``_order``), the latest-starting sync on T that overlaps it (``blocked_*``)."""
    right = syncs.select(
        "source",
        "pid",
        pl.col("tid").alias("thread"),
        pl.col("start_ns").alias("_key"),
        *(pl.col(c).alias(f"blocked_{c}") for c in ("name", "start_ns", "end_ns", "tid", "correlation")),
    ).sort("_key")
    keyed = left.filter(pl.col("thread").is_not_null()).with_columns((pl.col("end_ns") - 1).alias("_key")).sort("_key")
    found = join_asof_by(
        keyed, right, on="_key", by=["source", "pid", "thread"], strategy="backward", check_sortedness=False
    )
    cols = [f"blocked_{c}" for c in ("name", "start_ns", "end_ns", "tid", "correlation")]
    overlaps = pl.col("blocked_end_ns") > pl.col("start_ns")
    return found.select("_order", *(pl.when(overlaps).then(pl.col(c)).alias(c) for c in cols))


def launches_by_device(cpu: pl.DataFrame, activity: pl.DataFrame, link: LaunchLink) -> pl.DataFrame:
    """Every API call that launched work on a device: dev, source, pid, tid, name (as ``cpu`` holds
    it: a Categorical), start_ns, end_ns, correlation (one row per call and device, in ``cpu``
    order).  ``cpu``: :func:`cpu_rows` of the table ``link`` was made of; ``activity``: dev and
    ``slot`` (its launch key's)."""
    slot = column_array(activity, "slot")
    columns = ("source", "pid", "tid", "name", "start_ns", "end_ns", "correlation")
    # (a row of cpu has a slot only if it is a keyed cuda_api call; a mask picks the calls: a
    # filter of ten million rows costs a third of a gather)
    one = only_dev(activity)
    if one is not None:
        # Per slot, whether the device's activity has it; one place more, where the rows without a
        # key write (slot NONE is -1: the last place) and which is then reset, so that no row needs
        # a mask.  (Bytes, not devs: an eighth of the fresh memory for ten million keys and calls.)
        on_device = np.zeros(len(link.first_call) + 1, np.bool_)
        on_device[slot] = True
        on_device[NONE] = False
        calls = on_device[link.cpu_slot]
        return cpu.select(columns).filter(pl.Series(calls)).select(pl.lit(one, pl.UInt32).alias("dev"), pl.all())
    # Per slot, the dev of its activity (the same extra place)
    dev_of = np.full(len(link.first_call) + 1, NONE, np.int64)
    dev = activity.get_column("dev").to_numpy().astype(np.int64)
    dev_of[slot] = dev
    dev_of[NONE] = NONE
    if bool(np.all((dev_of[slot] == dev) | (slot < 0))):  # one device per key: a look-up
        found = dev_of[link.cpu_slot]
        calls = found >= 0
        return cpu.select(columns).filter(pl.Series(calls)).select(pl.Series("dev", found[calls], pl.UInt32), pl.all())
    api_slot = link.cpu_slot.astype(np.int64)
    keyed = np.flatnonzero(api_slot >= 0)
    on = slot >= 0
    work = pl.DataFrame({"dev": activity.get_column("dev").to_numpy()[on], "slot": slot[on]}).unique()
    calls_frame = gathered(cpu, keyed, *columns).with_columns(pl.Series("slot", api_slot[keyed]))
    return (
        calls_frame.with_row_index("_order")
        .join(work, on="slot", how="inner")
        .sort("_order", "dev")
        .select(pl.col("dev").cast(pl.UInt32), "source", "pid", "tid", "name", "start_ns", "end_ns", "correlation")
    )
