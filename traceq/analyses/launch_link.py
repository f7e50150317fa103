"""Which API call launched each GPU activity: the launch link, computed once per event table.

A GPU activity (kernel, memcpy, memset) and the ``cuda_api`` calls of its process that carry its
correlation id share a **launch key**, (source, pid, correlation) (``docs/analyses.md``, "Idle time
by cause": L, the launching call; :mod:`traceq.analyses.unlaunched`).  Rows without a pid or a
correlation id have no key and match nothing, as in a join whose nulls are unequal.  The
**launching call** of an activity is the earliest call of its key that
:func:`~traceq.analyses.host_state.cpu_rows` holds (the call rows with a thread); of two that start
together, the first in table order.

Several analyses pair every activity with its call (the operators, the phases, the idle intervals'
launches, the calls that launched work on a device, the unlaunched work, the unrecorded
launches).  On a 20 M-row table a three-column join (one a String) costs seconds each, so the key is
turned into one dense integer, the key's **slot**, once per table (:func:`launch_link`), and those
analyses look their answers up by slot.  Slots are dense where correlation ids are (every profiler
this project reads numbers them from a counter per process): ``base(source, pid) + correlation −
min``; a table whose ids are sparse gets slots from a sort instead, with the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import schema
from traceq.analyses.host_state import CPU_ROW, cpu_rows
from traceq.analyses.memo import per_frame
from traceq.analyses.steps import ON_GPU

NONE: Final = -1
"""The slot of a row without a launch key, and the call of an activity without a launching call."""

_DENSE_FACTOR: Final = 4
"""Slots by offset while the slot space is at most this many times the keyed rows (plus a little);
beyond that, by sort."""
_MAX_GROUPS: Final = 1 << 22
"""At most this many (source, pid) groups (sources × distinct pids) for the offset slots."""

Index = np.ndarray[Any, np.dtype[np.int64]]
Mask = np.ndarray[Any, np.dtype[np.bool_]]
Slots = np.ndarray[Any, np.dtype[np.signedinteger[Any]]]
"""Slots per row: Int32 while they fit (the per-row array of a 20 M-row table is 80 MB), else Int64."""


@dataclass(frozen=True)
class LaunchLink:
    """The launch keys of an event table.

    ``slot``: per row of the table, its key's slot (:data:`NONE` for a row that is neither a
    ``cuda_api`` call nor GPU activity, or has no pid or correlation); ``first_call``: per slot, the
    position in :func:`~traceq.analyses.host_state.cpu_rows` of the key's launching call
    (:data:`NONE`: none); ``has_call``: per slot, whether any ``cuda_api`` row has the key (with a
    thread or not); ``has_activity``: per slot, whether any GPU activity row has it (on a device or
    not); ``cpu_slot``: per row of ``cpu_rows``, its slot."""

    slot: Slots
    cpu_slot: Slots
    first_call: Index
    has_call: Mask
    has_activity: Mask

    def calls_of(self, rows: Index) -> Index:
        """The launching call (its position in ``cpu_rows``) of each table row of ``rows``;
        :data:`NONE` where it has none."""
        return self.calls_at(self.slot[rows])

    def calls_at(self, slots: Slots) -> Index:
        """The launching call of the key of each of ``slots`` (:data:`NONE` for a slot NONE)."""
        return _read_at(self.first_call, slots)

    def launched(self, rows: Index) -> Mask:
        """Whether each table row of ``rows`` has a ``cuda_api`` call with its key."""
        return self._flag(rows, self.has_call)

    def with_activity(self, rows: Index) -> Mask:
        """Whether each table row of ``rows`` has GPU activity with its key."""
        return self._flag(rows, self.has_activity)

    def _flag(self, rows: Index, per_slot: Mask) -> Mask:
        if len(per_slot) == 0:
            return np.zeros(len(rows), np.bool_)
        slots = self.slot[rows]
        out = per_slot[slots]  # (a row without a key, slot NONE, reads the last slot's flag: cleared here)
        out &= slots >= 0
        return out


ON_DEVICE: Final = ON_GPU
"""The GPU activity rows on a device (what :func:`~traceq.analyses.steps.gpu_rows` keeps)."""


@per_frame
def device_activity_rows(events: pl.DataFrame) -> Index:
    """The table rows of the GPU activity on a device, in table order (computed once per table: the
    breakdown and the operators both read them)."""
    return rows_where(events, ON_DEVICE)


@per_frame
def device_activity_slots(events: pl.DataFrame) -> Slots:
    """Per row of :func:`device_activity_rows`, its launch key's slot (:data:`NONE`: no key),
    computed once per table."""
    slots: Slots = launch_link(events).slot[device_activity_rows(events)]
    return slots


@per_frame
def device_activity_calls(events: pl.DataFrame) -> Index:
    """Per row of :func:`device_activity_rows`, its launching call (its position in
    :func:`~traceq.analyses.host_state.cpu_rows`; :data:`NONE`: none), computed once per table: the
    breakdown's activity and :func:`launching_calls` both read them."""
    return launch_link(events).calls_at(device_activity_slots(events))


def rows_where(events: pl.DataFrame, keep: pl.Expr) -> Index:
    """The table rows (positions) that ``keep`` selects, in table order: the rows a
    ``filter(keep)`` of ``events`` returns."""
    return rows_of(mask_where(events, keep))


def mask_where(events: pl.DataFrame, keep: pl.Expr) -> pl.Series:
    """Per row of ``events``, whether ``keep`` selects it (null: not)."""
    return events.select(keep.fill_null(False)).to_series()


def rows_of(mask: pl.Series) -> Index:
    """The positions of the rows a Boolean ``mask`` selects, in order."""
    return np.flatnonzero(mask.to_numpy()).astype(np.int64, copy=False)  # (intp: int64 already, not copied)


def as_index(values: Index) -> pl.Series:
    """Positions (:data:`NONE` for none) as an Int64 Series with nulls, for ``gather``."""
    series = pl.Series("", values, dtype=pl.Int64)
    return pl.select(pl.when(series >= 0).then(series)).to_series()


LAUNCHING_CALL_COLUMNS: Final = ("source", "pid", "tid", "start_ns")
"""What :func:`launching_calls` holds of each call (the columns of
:func:`~traceq.analyses.host_state.cpu_rows` that the operators and the phases both read; the
others are gathered where they are asked for, :meth:`LaunchingCalls.gather`)."""


@dataclass(frozen=True)
class LaunchingCalls:
    """The distinct calls that launched a table's GPU activity on a device, each once.

    ``rows``: their :data:`LAUNCHING_CALL_COLUMNS` and ``_point`` (UInt32: the row's place), in
    :func:`~traceq.analyses.host_state.cpu_rows` order; ``point_at``: per row of ``cpu_rows``, its
    point (:data:`NONE` for a row that launched no such activity); ``points``: per row of
    :func:`device_activity_rows`, its launching call's point (:data:`NONE`: none); ``at``: per
    point, its row of ``cpu``, the table's ``cpu_rows``."""

    rows: pl.DataFrame
    point_at: Index
    points: Index
    at: Index
    cpu: pl.DataFrame

    def gather(self, *columns: str | pl.Expr) -> pl.DataFrame:
        """More columns of the calls (of ``cpu_rows``, or expressions of them), in _point order:
        the rows ``at``, taken by a filter of the rows that have a point (a third of a gather's time)."""
        return self.cpu.select(_read_by(columns)).filter(pl.Series(self.point_at >= 0)).select(*columns)

    def points_of(self, calls: Index) -> Index:
        """The point of each of ``calls`` (positions in ``cpu_rows``; :data:`NONE` for none), each
        one a launching call of the table's GPU activity on a device."""
        out = _read_at(self.point_at, calls)
        if ((out < 0) & (calls >= 0)).any():  # (masks, not a copy of the points of the calls)
            raise ValueError("a call that launched no GPU activity on a device")
        return out


def _read_at(values: Index, at: Index) -> Index:
    """``values`` read at each of ``at`` (:data:`NONE` where a place is :data:`NONE`): one look-up per
    place, a place NONE reading the last value, then set to NONE (no mask before, no copy of
    ``values``)."""
    if len(values) == 0:
        return np.full(len(at), NONE, np.int64)
    out = values[at]
    out[at < 0] = NONE
    return out


@per_frame
def launching_calls(events: pl.DataFrame) -> LaunchingCalls:
    """The :class:`LaunchingCalls` of ``events``, computed once per table: the operators and the
    phases both look up what was open at each launch (on 20 M rows, ten million calls)."""
    cpu = cpu_rows(events)
    calls = device_activity_calls(events)
    valid = calls >= 0
    launching = np.zeros(cpu.height, np.bool_)
    launching[calls[valid]] = True
    point_at = np.where(launching, np.cumsum(launching) - 1, NONE)
    at = np.flatnonzero(launching)
    rows = cpu.select(LAUNCHING_CALL_COLUMNS).filter(pl.Series(launching)).with_row_index("_point")  # (rows `at`)
    return LaunchingCalls(rows, point_at, _read_at(point_at, calls), at, cpu)


def gathered(frame: pl.DataFrame, positions: Index, *columns: str | pl.Expr) -> pl.DataFrame:
    """``frame.select(*columns)`` of the rows at ``positions``: the rows are taken first, so a cast
    or a rename costs per row taken, not per row of ``frame``."""
    return frame.select(_read_by(columns))[positions].select(*columns)


def _read_by(columns: tuple[str | pl.Expr, ...]) -> list[str]:
    """The columns of a frame that ``columns`` (names, expressions) read, each once."""
    return list(dict.fromkeys(n for c in columns for n in ([c] if isinstance(c, str) else c.meta.root_names())))


_IS_API: Final = pl.col("kind") == "cuda_api"
_IS_ACTIVITY: Final = pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS)
KEYED: Final = (_IS_API | _IS_ACTIVITY) & pl.col("pid").is_not_null() & pl.col("correlation").is_not_null()
"""The rows that have a launch key (a runtime call or GPU activity with a pid and a correlation id)."""


@per_frame
def launch_link(events: pl.DataFrame) -> LaunchLink:
    """The :class:`LaunchLink` of ``events`` (computed once per table)."""
    one = _one_process_link(events)
    return one if one is not None else _link(events)


def _one_process_link(events: pl.DataFrame) -> LaunchLink | None:
    """The link where every keyed row has one source and one pid (a one-rank part, the common
    case) and the ids span few enough slots: the slot is the correlation id's offset, computed in
    the query with the row flags, so that only those few columns leave polars (the general way
    copies eight 20 M-row columns out).  ``None`` for any other table."""
    source = pl.col("source").to_physical()
    span = (
        events.lazy()
        .filter(KEYED)
        .select(
            pl.len().alias("n"),
            ((source.min() == source.max()) & (source.null_count() == 0)).alias("one_source"),
            (pl.col("pid").min() == pl.col("pid").max()).alias("one_pid"),
            pl.col("correlation").min().alias("low"),
            pl.col("correlation").max().alias("high"),
        )
        .collect()
        .row(0, named=True)
    )
    if not span["n"] or not (span["one_source"] and span["one_pid"]):
        return None
    low, n_slots = int(span["low"]), int(span["high"]) - int(span["low"]) + 1
    if n_slots > _DENSE_FACTOR * span["n"] + 65_536:
        return None
    kind = pl.Int64 if n_slots >= 1 << 31 else pl.Int32
    # Every row's slot, and the slots of the calls, of the activity and of the CPU rows, in one
    # query of four plans (polars shares their common part): no flag of ten million rows leaves
    # polars to be combined by NumPy, which took twice the time in masks and their copies.
    rows = events.lazy().select(
        pl.when(KEYED).then(pl.col("correlation") - low).otherwise(NONE).cast(kind).alias("slot"),
        _IS_API.fill_null(False).alias("api"),
        _IS_ACTIVITY.fill_null(False).alias("activity"),
        CPU_ROW.fill_null(False).alias("cpu"),
    )
    keyed = pl.col("slot") >= 0
    slot, of_calls, of_activity, cpu_slot = (
        frame.to_series().to_numpy()
        for frame in pl.collect_all(
            [
                rows.select("slot"),
                rows.filter(pl.col("api") & keyed).select("slot"),
                rows.filter(pl.col("activity") & keyed).select("slot"),
                rows.filter("cpu").select("slot"),  # (a keyed CPU row is a call)
            ]
        )
    )
    has_call = np.zeros(n_slots, np.bool_)
    has_call[of_calls] = True
    has_activity = np.zeros(n_slots, np.bool_)
    has_activity[of_activity] = True
    calls = np.flatnonzero(cpu_slot >= 0)  # the calling rows' places in cpu_rows, in table order
    call_slots = cpu_slot[calls]
    in_order = events.get_column("start_ns").is_sorted()  # (the importers' order: then so are the calls)
    return LaunchLink(
        slot=slot,
        cpu_slot=cpu_slot,
        first_call=_first_calls(call_slots, calls, n_slots, None if in_order else _call_starts(events)),
        has_call=has_call,
        has_activity=has_activity,
    )


def _first_calls(call_slots: Slots, calls: Index, n_slots: int, start: Index | None) -> Index:
    """Per slot, the launching call (its place in cpu_rows; :data:`NONE`: none) among the calling
    rows (``calls``: their places in cpu_rows, in table order, with their slots): the earliest to
    start, of two at once the first in table order.  ``start``: the rows' starts, or ``None`` where
    the rows are in start order already (then the earliest is the first)."""
    first_call = np.full(n_slots, NONE, np.int64)
    if start is None and len(call_slots):
        seen = np.zeros(n_slots, np.bool_)
        seen[call_slots] = True
        if int(np.count_nonzero(seen)) == len(call_slots):  # one call per key: placed as they are
            first_call[call_slots] = calls
            return first_call
    earliest = np.full(n_slots, len(calls), np.int64)
    if start is None:
        np.minimum.at(earliest, call_slots, np.arange(len(calls)))
        by_rank = calls
    else:
        order = np.argsort(start, kind="stable")
        rank = np.empty(len(calls), np.int64)
        rank[order] = np.arange(len(calls))
        np.minimum.at(earliest, call_slots, rank)
        by_rank = calls[order]
    found = earliest < len(calls)
    first_call[found] = by_rank[earliest[found]]
    return first_call


def _call_starts(events: pl.DataFrame) -> Index:
    """The starts of the calling rows (keyed calls that cpu_rows holds), in table order."""
    return events.lazy().filter(CPU_ROW & _IS_API & KEYED).select("start_ns").collect().to_series().to_numpy()


def _link(events: pl.DataFrame) -> LaunchLink:
    """The link of any table: its keyed rows copied out, slots by offset per (source, pid) or by sort."""
    in_cpu, is_api = CPU_ROW, _IS_API
    # One pass: the keyed rows (calls and GPU activity with a pid and an id), with their place in
    # the table and, for those cpu_rows holds, in cpu_rows.
    keys = (
        events.lazy()
        .with_row_index("row")
        .with_columns(in_cpu.alias("_cpu"))
        .with_columns((pl.col("_cpu").cast(pl.Int64).cum_sum() - 1).alias("_cpu_pos"))
        .filter(KEYED)
        .select(
            "row",
            pl.col("source").to_physical().cast(pl.Int64),
            "pid",
            "correlation",
            "start_ns",
            is_api.alias("_api"),
            (is_api & pl.col("_cpu")).alias("_calling"),
            "_cpu_pos",
        )
        .collect()
    )
    n_cpu = int(events.select(in_cpu.sum()).item())

    def column(name: str) -> np.ndarray[Any, Any]:
        return keys.get_column(name).to_numpy()

    source = column("source")
    slots_of_keyed, n_slots = _slots(source, column("pid"), column("correlation"))
    kind = np.int64 if n_slots >= 1 << 31 else np.int32
    slot: Slots = np.full(events.height, NONE, kind)
    keyed_rows = column("row")
    slot[keyed_rows] = slots_of_keyed

    api = column("_api")
    has_call = np.zeros(n_slots, np.bool_)
    has_call[slots_of_keyed[api]] = True
    has_activity = np.zeros(n_slots, np.bool_)
    has_activity[slots_of_keyed[~api]] = True

    calling = column("_calling")
    cpu_position = column("_cpu_pos")[calling]
    cpu_slot: Slots = np.full(n_cpu, NONE, kind)
    cpu_slot[cpu_position] = slots_of_keyed[calling]

    # The launching call: of the key's calls that cpu_rows holds, the earliest (ties: table order).
    call_slots = slots_of_keyed[calling]
    call_source = source[calling]
    call_start = column("start_ns")[calling]
    in_order = bool(
        np.all(
            (call_source[1:] > call_source[:-1])
            | ((call_source[1:] == call_source[:-1]) & (call_start[1:] >= call_start[:-1]))
        )
    )
    first_call = _first_calls(call_slots, cpu_position, n_slots, None if in_order else call_start)
    return LaunchLink(slot=slot, cpu_slot=cpu_slot, first_call=first_call, has_call=has_call, has_activity=has_activity)


def _slots(source: Index, pid: Index, correlation: Index) -> tuple[Index, int]:
    """A dense integer per distinct (source, pid, correlation), and how many there can be."""
    n = len(correlation)
    if n == 0:
        return np.zeros(0, np.int64), 0
    limit = _DENSE_FACTOR * n + 65_536  # the most slots that offsets may use
    pids = np.sort(pl.Series(pid).unique().to_numpy())
    group = source * len(pids) + np.searchsorted(pids, pid)
    n_groups = (int(source.max()) + 1) * len(pids)
    if n_groups <= _MAX_GROUPS:
        low = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
        high = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
        np.minimum.at(low, group, correlation)
        np.maximum.at(high, group, correlation)
        present = low <= high
        wide = present & (high.astype(np.float64) - low.astype(np.float64) >= float(limit))
        span = np.where(present & ~wide, high - low + 1, 0)
        total = int(span.sum())
        if not wide.any() and total <= limit:
            base = np.cumsum(span) - span
            return base[group] + correlation - low[group], total
    order = np.lexsort((correlation, group))
    g, c = group[order], correlation[order]
    new = np.ones(n, np.bool_)
    new[1:] = (g[1:] != g[:-1]) | (c[1:] != c[:-1])
    ids = np.cumsum(new) - 1
    out = np.empty(n, np.int64)
    out[order] = ids
    return out, int(ids[-1]) + 1


__all__ = [
    "KEYED",
    "LAUNCHING_CALL_COLUMNS",
    "NONE",
    "ON_DEVICE",
    "LaunchLink",
    "LaunchingCalls",
    "as_index",
    "device_activity_calls",
    "device_activity_rows",
    "device_activity_slots",
    "gathered",
    "launch_link",
    "launching_calls",
    "mask_where",
    "rows_of",
    "rows_where",
]
