"""The step breakdown: per device and step window, compute, communication, exposed communication
and idle time, idle split by the cause of its gaps, and the top kernels.

With U(x) the union of intervals x, W a step window and |·| total length in ns:

* ``compute_ns = |U(compute) ∩ W|`` (compute = every activity that is not a comm kernel);
* ``comm_ns = |U(comm) ∩ W|``; ``exposed_comm_ns = |(U(comm) − U(compute)) ∩ W|``;
* ``idle_ns = |W − U(activity)|``; ``dur_ns = |W|``;
* ``idle_by_cause_ns[c] = |U(gaps of cause c) ∩ W|``.

So ``dur_ns = compute_ns + exposed_comm_ns + idle_ns`` per window (the seeds'
t_step = t_compute + t_comm,exposed + t_idle).  Device totals are sums over its windows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.attribution import Attribution, attribute
from traceq.analyses.chunks import with_columns_like
from traceq.analyses.column_arrays import column_array, known_arrays, selected
from traceq.analyses.comm import comm_kernel_stats, with_comm_flags
from traceq.analyses.deferred import Deferred, run_all
from traceq.analyses.host_calls import steady_call_counts
from traceq.analyses.host_state import compile_ranges, cpu_rows, labelled, sync_calls
from traceq.analyses.idle import launches_by_device
from traceq.analyses.launch_link import (
    NONE,
    as_index,
    device_activity_calls,
    device_activity_slots,
    launch_link,
    launching_calls,
)
from traceq.analyses.model import (
    CAUSES,
    Analysis,
    CommKernelStat,
    DeviceBreakdown,
    Regime,
    SteadyState,
    StepBreakdown,
    zero_by_cause,
)
from traceq.analyses.operator_table import operator_table_of, top_operators
from traceq.analyses.options import Options
from traceq.analyses.phases import activity_phases, phase_breakdowns, phase_ranges, phase_table
from traceq.analyses.regimes import Busy, regimes
from traceq.analyses.steps import device_activity, devices, step_windows, with_dev
from traceq.analyses.top_lists import kernel_totals, longest_gaps, top_kernels
from traceq.analyses.unlaunched import unlaunched_activity
from traceq.analyses.warmup import with_warmup


def analyze(events: pl.DataFrame, options: Options | None = None) -> Analysis:
    """Break every device's time down by step, attribute its idle gaps, rank its kernels
    (``options``: the step pattern, the communication kernels, how many gaps and kernels to list;
    default :class:`Options`).  ``is_comm`` is recomputed first (:func:`~traceq.analyses.comm.with_comm_flags`)."""
    options = options or Options()
    return analyze_flagged(with_comm_flags(events, options), options)


def analyze_flagged(events: pl.DataFrame, options: Options, *, spare: Sequence[Deferred[Any]] = ()) -> Analysis:
    """:func:`analyze` of ``events`` whose ``is_comm`` already follows ``options`` (a job's parts flag
    their table once and read it several times).  ``spare``: the caller's work that does not read the
    analysis, run by whichever of the two threads runs out of its own first (all of it done when this
    returns; :mod:`traceq.analyses.deferred`)."""
    with _worker() as pool:
        # A second thread: first the launch link (it reads only the table), beside the devices, the
        # CPU rows and the step windows; then what does not wait for the idle attribution -- each
        # activity's phase, the operators, the caller's spare work -- beside it (polars' and NumPy's
        # passes let the GIL go).
        linked = pool.submit(launch_link, events)  # (nothing on this thread asks for it before _activity)
        device_table = devices(events)
        cpu = labelled(cpu_rows(events), step_pattern=options.step_pattern, input_pattern=options.input_pattern)
        windows = with_warmup(
            step_windows(events, device_table, options.step_pattern), _by_device(compile_ranges(cpu), device_table)
        )
        link = linked.result()
        activity = _activity(events, device_table)
        keyed = pool.submit(_phase_keys, events, options, cpu, activity)
        operators = pool.submit(_operators, events, options, cpu, device_table)
        # (then the caller's spare work, which reads no analysis: done beside the idle attribution,
        # where the second thread would wait for its input; shared with this thread below)
        pool.submit(run_all, spare)
        launches = launches_by_device(cpu, activity, link)
        unions = _unions(activity, device_table.height)
        busy = {dev: union.every for dev, union in unions.items()}
        attributed = attribute(cpu, activity, busy, windows, launches, step_pattern=options.step_pattern)
        gap_rows = attributed.gaps
        step_rows, gap_in_steps = _measure_windows(windows, attributed, unions, device_table.height)
        gap_rows = gap_rows.with_columns(pl.Series("in_steps_ns", gap_in_steps, dtype=pl.Int64))
        table_args = (keyed, windows, gap_rows, attributed.causes, device_table, unions)
        phased = pool.submit(_phase_table, *table_args)  # (queued: the second thread's if it is free first)
        totals = kernel_totals(events)
        steady = steady_windows(windows, device_table.height, all_steps=options.all_steps)
        regime = regimes(activity, steady, attributed.causes, gap_rows, launches, unions, device_table.height)
        launched, synced = steady_call_counts(launches, sync_calls(cpu), device_table, steady)
        extra = DeviceExtras(
            latency_ns=attributed.latency_ns,
            regime=regime,
            unlaunched=_count_by_dev(with_dev(unlaunched_activity(events), device_table)),
            comm_kernels=comm_kernel_stats(activity, options),
            longest_cpu_ns=_longest_cpu_idle(attributed.causes, steady),
            launches=launched,
            syncs=synced,
        )
        phase_rows = _phase_table(*table_args) if phased.cancel() else None  # (not begun: here)
        run_all(spare)  # (what the second thread has not begun)
        phase_rows = phased.result() if phase_rows is None else phase_rows
        operator_rows = operators.result()
    info = device_table.select("dev", "rank", "pid", "device", "source")
    gap_rows = gap_rows.drop("thread")
    gap_table = (
        gap_rows.join(info, on="dev", how="left")
        .drop("dev")
        .select("rank", "device", "pid", "source", *[c for c in gap_rows.columns if c not in ("dev",)])
    )
    return Analysis(
        step_pattern=options.step_pattern,
        devices=_device_results(device_table, step_rows, gap_rows, extra, all_steps=options.all_steps),
        steps=_step_results(step_rows, device_table),
        gaps=longest_gaps(gap_table, options.max_gaps),
        kernels=top_kernels(totals, options.top_kernels),
        gap_table=gap_table,
        kernel_totals=totals,
        windows=windows.with_columns((pl.lit(options.all_steps) | ~pl.col("warmup")).alias("steady")),
        idle_causes=attributed.causes,
        options=options,
        operator_table=operator_rows,
        phase_table=phase_rows,
        operators=top_operators(operator_rows, options.top_kernels),
        phases=phase_breakdowns(phase_rows),
    )


@contextmanager
def _worker() -> Iterator[ThreadPoolExecutor]:
    """The breakdown's second thread.  On the way out it is waited for, but what it has not begun is
    dropped: an error or an interrupt on the main thread does not wait for queued work."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceq-analysis")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _PhaseKeys:
    """The phase ranges (:func:`~traceq.analyses.phases.phase_ranges`) and the activity with the
    ``phase_key`` of each row (:func:`~traceq.analyses.phases.activity_phases`)."""

    ranges: pl.DataFrame
    activity: pl.DataFrame


def _phase_keys(events: pl.DataFrame, options: Options, cpu: pl.DataFrame, activity: pl.DataFrame) -> _PhaseKeys:
    """The phase ranges, and each activity's phase (neither reads the idle attribution)."""
    ranges = phase_ranges(cpu, options.step_pattern, options.phase_patterns)
    keyed = with_columns_like(activity, activity_phases(launching_calls(events), activity, ranges).alias("phase_key"))
    return _PhaseKeys(ranges=ranges, activity=keyed)


def _operators(events: pl.DataFrame, options: Options, cpu: pl.DataFrame, device_table: pl.DataFrame) -> pl.DataFrame:
    """The operator table (which does not read the idle attribution either)."""
    return operator_table_of(events, device_table, step_pattern=options.step_pattern, cpu=cpu)


def _phase_table(
    keyed: Future[_PhaseKeys],
    windows: pl.DataFrame,
    gap_rows: pl.DataFrame,
    causes: Mapping[int, Mapping[str, iv.Intervals]],
    device_table: pl.DataFrame,
    unions: Mapping[int, Busy],
) -> pl.DataFrame:
    """The phase table, once each activity's phase is known."""
    keys = keyed.result()
    return phase_table(keys.activity, windows, gap_rows, causes, keys.ranges, device_table, merged=unions)


@dataclass(frozen=True)
class DeviceExtras:
    """Per dev, what a device's entry carries besides its window sums."""

    latency_ns: Mapping[int, int]
    regime: Mapping[int, Regime | None]
    unlaunched: Mapping[int, int]
    comm_kernels: Mapping[int, tuple[CommKernelStat, ...]]
    longest_cpu_ns: Mapping[int, int]
    launches: Mapping[int, int]
    """Calls that launched work on the device, in its steady windows (:mod:`traceq.analyses.host_calls`)."""
    syncs: Mapping[int, int]
    """Synchronising calls of its process, in its steady windows."""


def _count_by_dev(rows: pl.DataFrame) -> dict[int, int]:
    if rows.is_empty():
        return {}
    return {int(dev): int(n) for dev, n in rows.group_by("dev").len().iter_rows()}


def _longest_cpu_idle(
    causes: Mapping[int, Mapping[str, iv.Intervals]], steady: Mapping[int, iv.Intervals]
) -> dict[int, int]:
    """Per dev, the longest stretch of ``cpu`` idle inside its steady windows."""
    out = {}
    for dev, windows in steady.items():
        cpu = causes.get(dev, {}).get("cpu")
        if cpu is not None and len(cpu):
            inside = iv.intersect(cpu, windows)
            out[dev] = int(inside.lengths_ns().max()) if len(inside) else 0
    return out


def steady_windows(windows: pl.DataFrame, n_devices: int, *, all_steps: bool = False) -> dict[int, iv.Intervals]:
    """Per dev, its steady step windows (merged): every window but the warm-up ones (all of them
    with ``all_steps``)."""
    kept = windows if all_steps else windows.filter(~pl.col("warmup"))
    by_dev = _by_dev(kept, n_devices) if kept.height else {}
    return {dev: iv.merge(iv.Intervals.from_frame(frame)) for dev, frame in by_dev.items()}


def _by_device(
    per_process: dict[tuple[str, int | None], iv.Intervals], device_table: pl.DataFrame
) -> dict[int, iv.Intervals]:
    """A per-(source, pid) set of intervals, for every device of that process."""
    out = {}
    for dev, source, pid in device_table.select("dev", "source", "pid").iter_rows():
        found = per_process.get((source, pid))
        if found is not None:
            out[int(dev)] = found
    return out


def _activity(events: pl.DataFrame, device_table: pl.DataFrame) -> pl.DataFrame:
    """The GPU activity rows with their ``dev``, in event order (``source`` stays Categorical), and
    their launch key: ``slot`` and ``call`` (the launching call's position in
    :func:`~traceq.analyses.host_state.cpu_rows`, null without one; :mod:`traceq.analyses.launch_link`)."""
    calls = device_activity_calls(events)
    keyed = with_columns_like(
        device_activity(events),
        pl.Series("slot", device_activity_slots(events), dtype=pl.Int64),
        as_index(calls).alias("call"),
    )
    # (read back as arrays by the phases: the calls as they were made, NONE for none)
    return with_dev(known_arrays(keyed, {("call", NONE): calls.astype(np.int64, copy=False)}), device_table)


def _unions(activity: pl.DataFrame, n_devices: int) -> dict[int, Busy]:
    """Per dev, its activity merged: compute, communication and all of it, each merged once (the
    idle intervals, the window measures, the regimes and the phase table read them)."""
    activity_by_dev = _by_dev(selected(activity, "dev", "start_ns", "end_ns", "is_comm"), n_devices)
    unions: dict[int, Busy] = {}
    for dev in range(n_devices):
        acts = activity_by_dev[dev]
        comm_mask = column_array(acts, "is_comm")
        all_iv = iv.Intervals(column_array(acts, "start_ns"), column_array(acts, "end_ns"))
        busy = iv.merge(all_iv)
        if not comm_mask.any():  # (no communication, as on one GPU: the compute is all of it)
            unions[dev] = Busy(compute=busy, comm=iv.Intervals.empty(), every=busy)
            continue
        comm, compute = iv.merge_where(all_iv, comm_mask), iv.merge_where(all_iv, ~comm_mask)
        unions[dev] = Busy(compute=compute, comm=comm, every=busy)
    return unions


def _measure_windows(
    windows: pl.DataFrame, attributed: Attribution, unions: Mapping[int, Busy], n_devices: int
) -> tuple[pl.DataFrame, np.ndarray[Any, np.dtype[np.int64]]]:
    """Per-window measures (vectorised per device) and per gap its ns inside step windows, from
    each dev's merged activity (:func:`_unions`)."""
    gap_rows = attributed.gaps
    window_parts: list[pl.DataFrame] = []
    gap_in_steps = np.zeros(gap_rows.height, np.int64)
    gap_dev = gap_rows.get_column("dev").to_numpy()
    gap_iv = iv.Intervals.from_frame(gap_rows)
    windows_by_dev = _by_dev(windows, n_devices)
    empty = iv.Intervals.empty()
    for dev in range(n_devices):
        win_frame = windows_by_dev[dev]
        win = iv.Intervals.from_frame(win_frame)
        compute, comm, busy = unions[dev].compute, unions[dev].comm, unions[dev].every
        measures: dict[str, Any] = {
            "compute_ns": iv.measure_in_windows(compute, win),
            "comm_ns": iv.measure_in_windows(comm, win),
            "exposed_comm_ns": iv.measure_in_windows(iv.subtract(comm, compute), win),
            "idle_ns": win.lengths_ns() - iv.measure_in_windows(busy, win),
        }
        on_dev = gap_dev == dev
        gap_in_steps[on_dev] = iv.overlap_with_windows(
            iv.Intervals(gap_iv.start_ns[on_dev], gap_iv.end_ns[on_dev]), win
        )
        causes = attributed.causes.get(dev, {})
        for cause in CAUSES:
            measures[f"idle_{cause}_ns"] = iv.measure_in_windows(causes.get(cause, empty), win)
        window_parts.append(win_frame.with_columns(pl.Series(k, v, dtype=pl.Int64) for k, v in measures.items()))
    steps = pl.concat(window_parts) if window_parts else pl.DataFrame()
    return steps, gap_in_steps


def _by_dev(frame: pl.DataFrame, n_devices: int) -> dict[int, pl.DataFrame]:
    """``frame`` split by its ``dev`` column (order kept); no copy when there is one device."""
    if n_devices == 1:
        return {0: frame}
    return {int(dev): part for (dev,), part in frame.partition_by("dev", as_dict=True, maintain_order=True).items()}


def _by_cause(row: dict[str, Any], prefix: str = "idle_", suffix: str = "_ns") -> dict[str, int]:
    return {cause: int(row[f"{prefix}{cause}{suffix}"]) for cause in CAUSES}


def _step_results(step_rows: pl.DataFrame, device_table: pl.DataFrame) -> tuple[StepBreakdown, ...]:
    if step_rows.is_empty():
        return ()
    joined = step_rows.join(device_table.select("dev", "rank", "pid", "device"), on="dev").sort(
        "dev", "start_ns", "end_ns"
    )
    return tuple(
        StepBreakdown(
            rank=row["rank"],
            device=int(row["device"]),
            pid=row["pid"],
            step=row["step"],
            name=row["name"],
            start_ns=int(row["start_ns"]),
            end_ns=int(row["end_ns"]),
            dur_ns=int(row["end_ns"] - row["start_ns"]),
            compute_ns=int(row["compute_ns"]),
            comm_ns=int(row["comm_ns"]),
            exposed_comm_ns=int(row["exposed_comm_ns"]),
            idle_ns=int(row["idle_ns"]),
            idle_by_cause_ns=_by_cause(row),
            warmup=bool(row["warmup"]),
        )
        for row in joined.iter_rows(named=True)
    )


def _device_results(
    device_table: pl.DataFrame,
    step_rows: pl.DataFrame,
    gap_rows: pl.DataFrame,
    extra: DeviceExtras,
    *,
    all_steps: bool,
) -> tuple[DeviceBreakdown, ...]:
    if device_table.is_empty():
        return ()
    measures = ("compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", *(f"idle_{c}_ns" for c in CAUSES))
    steady = (
        step_rows.filter(pl.lit(all_steps) | ~pl.col("warmup"))
        .group_by("dev")
        .agg(
            pl.len().alias("s_windows"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("s_dur_ns"),
            *(pl.col(c).sum().alias(f"s_{c}") for c in measures),
        )
    )
    sums = step_rows.group_by("dev").agg(
        pl.len().alias("steps"),
        pl.col("window").first(),
        pl.col("warmup").sum().alias("warmup_steps"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("dur_ns"),
        *[pl.col(c).sum() for c in ("compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns")],
        *[pl.col(f"idle_{c}_ns").sum() for c in CAUSES],
    )
    counted = (
        gap_rows.filter(pl.col("in_steps_ns") > 0)
        .group_by("dev")
        .agg([(pl.col("cause") == c).sum().alias(f"gaps_{c}") for c in CAUSES])
    )
    joined = (
        device_table.join(sums, on="dev", how="left")
        .join(steady, on="dev", how="left")
        .join(counted, on="dev", how="left")
        .sort("dev")
    )
    out = []
    for row in joined.iter_rows(named=True):
        dev = int(row["dev"])
        gaps_by_cause = zero_by_cause()
        gaps_by_cause.update({c: int(row[f"gaps_{c}"] or 0) for c in CAUSES})
        out.append(
            DeviceBreakdown(
                rank=row["rank"],
                device=int(row["device"]),
                pid=row["pid"],
                source=row["source"],
                window=row["window"],
                steps=int(row["steps"]) if row["window"] == "steps" else 0,
                dur_ns=int(row["dur_ns"]),
                compute_ns=int(row["compute_ns"]),
                comm_ns=int(row["comm_ns"]),
                exposed_comm_ns=int(row["exposed_comm_ns"]),
                idle_ns=int(row["idle_ns"]),
                idle_by_cause_ns=_by_cause(row),
                gaps_by_cause=gaps_by_cause,
                kernels=int(row["kernels"]),
                memcpys=int(row["memcpys"]),
                memsets=int(row["memsets"]),
                warmup_steps=int(row["warmup_steps"] or 0),
                steady=SteadyState(
                    windows=int(row["s_windows"] or 0),
                    dur_ns=int(row["s_dur_ns"] or 0),
                    compute_ns=int(row["s_compute_ns"] or 0),
                    comm_ns=int(row["s_comm_ns"] or 0),
                    exposed_comm_ns=int(row["s_exposed_comm_ns"] or 0),
                    idle_ns=int(row["s_idle_ns"] or 0),
                    idle_by_cause_ns={c: int(row[f"s_idle_{c}_ns"] or 0) for c in CAUSES},
                    longest_cpu_idle_ns=int(extra.longest_cpu_ns.get(dev, 0)),
                    launches=int(extra.launches.get(dev, 0)),
                    syncs=int(extra.syncs.get(dev, 0)),
                ),
                launch_latency_ns=int(extra.latency_ns.get(dev, 0)),
                regime=extra.regime.get(dev),
                unlaunched_activities=int(extra.unlaunched.get(dev, 0)),
                comm_kernels=extra.comm_kernels.get(dev, ()),
            )
        )
    return tuple(out)
