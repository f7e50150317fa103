"""Devices and their step windows.

A *device* is a (source, process, GPU) triple: the GPU activity one process put on one GPU.  A
*step window* is a CPU-side range (``kind == "range"`` with a ``tid``) whose name matches the step
pattern; it belongs to the process whose thread recorded it and applies to every device that
process launched work on.  A device whose process recorded no step range gets one window from
its first activity's start to its last activity's end.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceq import schema
from traceq.errors import InvalidArgumentError

DEFAULT_STEP_PATTERN: Final = r"^(ProfilerStep#\d+|step[ _#]?\d+|iteration[ _#]?\d+)$"
"""Default step-range pattern, matched case-insensitively against the whole range name."""

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


def devices(events: pl.DataFrame) -> pl.DataFrame:
    """One row per device, with a dense ``dev`` id.

    Columns: dev (UInt32), source (String), pid (Int64), device (Int32), rank (Int32),
    first_ns, last_ns (first activity start, last activity end), kernels, memcpys, memsets.
    Sorted by rank (nulls first), source, pid, device.
    """
    activity = events.filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS) & pl.col("device").is_not_null())
    out = (
        activity.group_by(pl.col("source").cast(pl.String), "pid", "device")
        .agg(
            pl.col("rank").drop_nulls().first().alias("rank"),
            pl.col("start_ns").min().alias("first_ns"),
            pl.col("end_ns").max().alias("last_ns"),
            (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels"),
            (pl.col("kind") == "memcpy").sum().cast(pl.Int64).alias("memcpys"),
            (pl.col("kind") == "memset").sum().cast(pl.Int64).alias("memsets"),
        )
        .sort("rank", "source", "pid", "device", nulls_last=False)
    )
    return out.with_row_index("dev").select(
        "dev", "source", "pid", "device", "rank", "first_ns", "last_ns", "kernels", "memcpys", "memsets"
    )


def step_windows(events: pl.DataFrame, device_table: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """The step windows of every device.

    Columns: dev, window ("steps" | "activity"), step (Int64, the last number in the range name,
    null if none), name (String), start_ns, end_ns.  Identical windows recorded twice by one
    process (same name and times) count once.  Sorted by dev, start_ns, end_ns.
    """
    regex = compile_step_pattern(pattern)
    ranges = (
        events.filter((pl.col("kind") == "range") & pl.col("tid").is_not_null())
        .select(pl.col("source").cast(pl.String), "pid", pl.col("name").cast(pl.String), "start_ns", "end_ns")
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
