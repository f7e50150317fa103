"""Devices and their step windows.

A *device* is a (source, process, GPU) triple: the GPU activity one process put on one GPU.  A
*step window* is a CPU-side range (``kind == "range"`` with a ``tid``) whose name matches the step
pattern; it belongs to the process whose thread recorded it and applies to every device that
process launched work on.  A device whose process recorded no step range gets one window from
its first activity's start to its last activity's end.
"""

from __future__ import annotations

import weakref
from typing import Final

import polars as pl

from traceq import schema
from traceq.analyses.column_arrays import derived_from
from traceq.analyses.memo import per_frame
from traceq.errors import InvalidArgumentError
from traceq.literal_columns import one_valued, with_literals

DEVICE_KEY: Final = ("source", "pid", "device")
_LAST_NUMBER = r"(\d+)\D*$"


def compile_step_pattern(pattern: str) -> str:
    """Check ``pattern`` and return it in the case-insensitive form polars matches with.

    Patterns use the Rust ``regex`` syntax polars matches with: Python's syntax minus
    look-around and backreferences.
    """
    regex = pattern if pattern.startswith("(?i)") else f"(?i){pattern}"
    try:
        pl.Series([""], dtype=pl.String).str.contains(regex)
    except pl.exceptions.ComputeError as exc:
        lines = [line.strip() for line in str(exc).splitlines()]
        reason = next((line[len("error: ") :] for line in lines if line.startswith("error: ")), lines[0])
        raise InvalidArgumentError(
            f"step pattern {pattern!r} is not a valid regular expression ({reason})",
            hint="pass --step-pattern a regex such as '^ProfilerStep#\\d+$' (no look-around)",
        ) from exc
    return regex


ON_GPU: Final = pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS) & pl.col("device").is_not_null()
"""The GPU activity rows on a device: what :func:`gpu_rows` keeps."""


def devices(events: pl.DataFrame) -> pl.DataFrame:
    """One row per device, with a dense ``dev`` id.

    Columns: dev (UInt32), source (String), pid (Int64), device (Int32), rank (Int32),
    first_ns, last_ns (first activity start, last activity end), kernels, memcpys, memsets.
    Sorted by rank (nulls first), source, pid, device.

    The analysis, the findings, the timeline and the job analysis each ask for the table of the
    same event table; it is computed once per event table object (which, like every polars frame
    traceq passes around, is never modified in place) and kept while that object lives.
    """
    key = id(events)
    cached = _DEVICE_TABLES.get(key)
    if cached is not None and cached[0]() is events:
        return cached[1]
    table = _device_table(events)
    _DEVICE_TABLES[key] = (weakref.ref(events, lambda _: _DEVICE_TABLES.pop(key, None)), table)
    return table


_DEVICE_TABLES: dict[int, tuple[weakref.ref[pl.DataFrame], pl.DataFrame]] = {}


def _device_table(events: pl.DataFrame) -> pl.DataFrame:
    per_device = (
        pl.col("rank").drop_nulls().first().alias("rank"),
        pl.col("start_ns").min().alias("first_ns"),
        pl.col("end_ns").max().alias("last_ns"),
        (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels"),
        (pl.col("kind") == "memcpy").sum().cast(pl.Int64).alias("memcpys"),
        (pl.col("kind") == "memset").sum().cast(pl.Int64).alias("memsets"),
    )
    rows = events.lazy().filter(ON_GPU)
    if _one_device(rows):  # the common single-GPU trace: aggregated as it is read, no rows copied out
        grouped = rows.select(*(pl.col(k).first() for k in DEVICE_KEY), *per_device).collect()
    else:
        wanted = (*DEVICE_KEY, "rank", "kind", "start_ns", "end_ns")  # (not gpu_rows: it asks for this table)
        activity = rows.select(wanted).collect()
        code = _device_code(activity)
        if code is not None:  # one Int64 key groups faster than three columns
            keyed = activity.with_columns(code.alias("_code"))
            grouped = keyed.group_by("_code").agg(*(pl.col(k).first() for k in DEVICE_KEY), *per_device)
        else:  # (source stays Categorical: no string per row)
            grouped = activity.group_by(*DEVICE_KEY).agg(*per_device)
    out = grouped.with_columns(pl.col("source").cast(pl.String)).sort(
        "rank", "source", "pid", "device", nulls_last=False
    )
    return out.with_row_index("dev").select(
        "dev", "source", "pid", "device", "rank", "first_ns", "last_ns", "kernels", "memcpys", "memsets"
    )


def _one_device(rows: pl.LazyFrame) -> bool:
    """Whether every row of ``rows`` (at least one) has the same device key."""
    return len(one_valued(rows, DEVICE_KEY)) == len(DEVICE_KEY)


def gpu_rows(events: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """The GPU activity rows (kernels, memcpys, memsets on a device): the device key
    (``source`` still Categorical) and ``columns``, in event order.

    Only the wanted columns are copied, which on a large table is most of the cost of a filter.
    """
    wanted = list(dict.fromkeys((*DEVICE_KEY, *columns)))
    rows = events.lazy().filter(ON_GPU)
    if not set(wanted) - set(DEVICE_KEY):
        return rows.select(wanted).collect()
    table = devices(events)
    if table.height != 1:
        return rows.select(wanted).collect()
    # One device (a one-GPU trace, one rank's part): its key is the same in every row, so it is a
    # literal column each (a fifth of the bytes of ten million kernels' rows, never copied).
    key = table.row(0, named=True)
    picked = rows.select([c for c in wanted if c not in DEVICE_KEY]).collect()
    return with_literals(picked, {k: key[k] for k in DEVICE_KEY}, events.schema, wanted)


ACTIVITY_COLUMNS: Final = ("start_ns", "end_ns", "name", "kind", "stream", "correlation", "copy_kind", "is_comm")
"""What :func:`device_activity` holds of each GPU activity row besides its device key: what the
breakdown and the gap attribution, the operators and the kernel classes read."""


@per_frame
def device_activity(events: pl.DataFrame) -> pl.DataFrame:
    """:func:`gpu_rows` with :data:`ACTIVITY_COLUMNS`, taken out of the table once per table: the
    breakdown, the operators and the kernel classes each read the activity (ten million rows of a
    20 M-row table: each filter of the table copies them)."""
    return gpu_rows(events, *ACTIVITY_COLUMNS)


def only_dev(rows: pl.DataFrame) -> int | None:
    """The dev of every row of ``rows``, where there is at least one and all have the same (no
    null); else None.  (The common one-GPU part: its rows need no split by dev.)  Read by a query,
    so that a ``dev`` that is a literal column -- as it is in the rows of one device -- is not made
    an array of the rows' height to be read (:mod:`traceq.literal_columns`)."""
    if rows.is_empty():
        return None
    dev = pl.col("dev")
    nulls, low, high = rows.select(dev.null_count().alias("n"), dev.min().alias("lo"), dev.max().alias("hi")).row(0)
    return None if nulls or low != high else int(low)


def with_dev(rows: pl.DataFrame, device_table: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with the device key, ``source`` String or Categorical) that belong to a device of
    ``device_table``, with its ``dev`` in front; the order of ``rows`` is kept."""
    keys = device_table.select("dev", "source", "pid", "device")
    if rows.schema["source"] != pl.String:
        keys = keys.with_columns(pl.col("source").cast(rows.schema["source"]))
    if keys.height == 1:  # one device: a filter (mostly of nothing), not a join
        only = keys.row(0, named=True)
        on_it = (
            (pl.col("source") == only["source"])
            & pl.col("pid").eq_missing(only["pid"])
            & pl.col("device").eq_missing(only["device"])
        )
        every = rows.select(on_it.all()).item()
        chosen = rows if every else rows.filter(on_it)
        # (a literal column: one value, never written out row by row, and lined up with any chunks)
        out = chosen.select(pl.lit(only["dev"], dtype=pl.UInt32).alias("dev"), pl.all())
        return derived_from(out, rows, rows.columns) if every else out  # (the same columns: same arrays)
    code = _device_code(keys) if rows.schema["source"] == pl.Categorical else None
    if code is None:
        joined = rows.join(keys, on=list(DEVICE_KEY), how="inner", nulls_equal=True, maintain_order="left")
        return joined.select("dev", *rows.columns)
    # Number the keys, then look each row's number up: a replace on one column, not a 3-key join.
    dev = code.replace_strict(keys.select(code).to_series(), keys.get_column("dev"), default=None)
    return rows.select(dev.alias("dev"), pl.all()).filter(pl.col("dev").is_not_null())


def _device_code(frame: pl.DataFrame) -> pl.Expr | None:
    """An Int64 expression that numbers the device keys (source as a Categorical) one to one for
    every key whose parts lie within the ranges of ``frame``'s (null outside them); None when those
    ranges are too wide to pack into one integer."""
    code: pl.Expr = pl.lit(0, dtype=pl.Int64)
    size = 1
    for name in DEVICE_KEY:
        part = pl.col(name).to_physical().cast(pl.Int64)  # a Categorical's codes; integers as they are
        lo, hi = frame.select(part.min().alias("lo"), part.max().alias("hi")).row(0)
        lo, hi = (0, 0) if lo is None else (int(lo), int(hi))
        width = hi - lo + 2  # the last slot stands for null
        size *= width
        if size >= 1 << 62:
            return None
        index = pl.when(part.is_null()).then(width - 1).when(part.is_between(lo, hi)).then(part - lo)
        code = code * width + index
    return code


def step_windows(events: pl.DataFrame, device_table: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """The step windows of every device.

    Columns: dev, window ("steps" | "activity"), step (Int64, the last number in the range name,
    null if none), name (String), start_ns, end_ns.  Identical windows recorded twice by one
    process (same name and times) count once.  Sorted by dev, start_ns, end_ns.
    """
    regex = compile_step_pattern(pattern)
    ranges = (
        events.select("kind", "tid", "source", "pid", "name", "start_ns", "end_ns")
        .filter((pl.col("kind") == "range") & pl.col("tid").is_not_null())
        .select(
            pl.col("source").cast(pl.String),
            pl.col("pid").cast(pl.Int64),
            pl.col("name").cast(pl.String),
            "start_ns",
            "end_ns",
        )
        .filter(pl.col("name").str.contains(regex))
        .unique(maintain_order=True)
    )
    stepped = device_table.select("dev", "source", "pid").join(
        ranges, on=["source", "pid"], how="inner", nulls_equal=True
    )
    stepped = stepped.select(
        "dev",
        pl.lit("steps").alias("window"),
        pl.col("name").str.extract(_LAST_NUMBER).cast(pl.Int64).alias("step"),
        "name",
        "start_ns",
        "end_ns",
    )
    without = device_table.join(stepped.select("dev").unique(), on="dev", how="anti")
    fallback = without.select(
        "dev",
        pl.lit("activity").alias("window"),
        pl.lit(None, dtype=pl.Int64).alias("step"),
        pl.lit("(whole trace)").alias("name"),
        pl.col("first_ns").alias("start_ns"),
        pl.col("last_ns").alias("end_ns"),
    )
    return pl.concat([stepped, fallback], how="vertical_relaxed").sort("dev", "start_ns", "end_ns")


def step_index(events: pl.DataFrame, pattern: str, rows: pl.DataFrame | None = None) -> pl.Series:
    """Per row of ``events`` (or of ``rows``: any frame with ``source``, ``pid`` and ``start_ns``,
    such as the gap table), in order, the ``step`` (Int64: the last number in the range name) of the
    step window its start lies in (``start_ns <= row.start_ns < end_ns``): CPU rows by their
    process's step ranges, GPU rows by their device's, which are their process's (a step belongs to
    the process that recorded it and applies to every device it launched work on).  Null outside
    every window and for a step range without a number; of overlapping windows, the latest-starting.
    """
    placed = events if rows is None else rows
    regex = compile_step_pattern(pattern)
    ranges = (
        events.lazy()
        .filter((pl.col("kind") == "range") & pl.col("tid").is_not_null())
        .select(pl.col("source").cast(pl.String), "pid", pl.col("name").cast(pl.String), "start_ns", "end_ns")
        .filter(pl.col("name").str.contains(regex))
        .select(
            "source",
            "pid",
            pl.col("start_ns").alias("_t"),
            pl.col("end_ns").alias("_end"),
            pl.col("name").str.extract(_LAST_NUMBER).cast(pl.Int64).alias("step"),
        )
        .unique()
        .sort("_t")
        .collect()
    )
    starts = placed.lazy().select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
        pl.col("source").cast(pl.String),
        pl.col("pid").cast(pl.Int64),  # (the gap table's pid may be another integer type)
        pl.col("start_ns").alias("_t"),
    )
    if ranges.is_empty():
        return pl.Series("step", [None] * placed.height, dtype=pl.Int64)
    found = (
        starts.sort("_t")
        .join_asof(ranges.lazy(), on="_t", by=["source", "pid"], strategy="backward", check_sortedness=False)
        .select("_row", pl.when(pl.col("_t") < pl.col("_end")).then(pl.col("step")).alias("step"))
        .sort("_row")
        .collect()
    )
    return found.get_column("step")
