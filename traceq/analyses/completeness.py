"""What a trace lacks of the GPU rows its numbers are made of, and what that does to the findings.

A device's compute, communication and idle are measured on the GPU activities the trace holds.
Two things leave work out of them (``docs/findings.md``, "Incomplete data"):

* **rows skipped on import**: GPU activities (kernels, memcpys, memsets) the importer could not
  keep, an interval that ends before it starts, a timestamp out of range; the import statistics
  count them by reason (:class:`~traceq.stats.CategoryCount`, ``kind``);
* **work launched and never recorded**: a kernel-launching call (:data:`KERNEL_LAUNCH_PATTERN`)
  whose correlation id matches no GPU activity of its process, issued before the process's last
  recorded GPU activity started (a call after it is the capture's end: its work would run after
  the trace, outside what the report measures).  An export without its kernel table is the
  extreme: every launch is unrecorded.  A kernel skipped on import leaves its launch without work
  too; it is counted once, as skipped (the source's skipped GPU rows are taken off its processes'
  unrecorded launches, in pid order).

Either way the missing work's time counts as idle, and the idle's causes as what the host did
then, so a finding can claim a cause for time the GPU was busy.  A device with any missing work
gets a :class:`~traceq.analyses.model.DataCaveat` that the report prints beside its numbers, and
every finding measured on it carries the caveat's text; where the missing share reaches
:data:`WITHHOLD_SHARE` the finding is withheld, listed with the reason instead of a fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final

import polars as pl

from traceq import schema
from traceq.analyses.host_state import matching
from traceq.analyses.launch_link import gathered, launch_link, mask_where, rows_of
from traceq.analyses.model import DataCaveat, DeviceBreakdown, Finding, WithheldFinding
from traceq.stats import ImportStats
from traceq.units import device_label, pct

KERNEL_LAUNCH_PATTERN: Final = r"(?i)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch)"
"""Calls that put kernels on a stream: ``cudaLaunchKernel(ExC)``, ``cuLaunchKernel(Ex)``,
``cudaLaunchCooperativeKernel``, ``hipLaunchKernel``, ``hipModuleLaunchKernel``,
``hipExtLaunchKernelGGL``, and the graph launches ``cudaGraphLaunch`` / ``cuGraphLaunch`` /
``hipGraphLaunch`` (``cudaLaunchHostFunc`` queues host work, no kernel)."""

WITHHOLD_SHARE: Final = 0.25
"""A device missing this share of its GPU work or more has its findings withheld: with a quarter of
the work unmeasured, the idle a rule weighs may be mostly time the GPU was busy (issue 14's case, a
third of the kernels skipped, reads 37% idle where the trace's real idle is 2.6%)."""

COVERAGE_COLUMNS: Final = ("source", "pid", "activities", "launches", "unrecorded")
""":func:`work_coverage`'s columns: per process, its GPU activities, its kernel-launching calls,
and those of the calls whose work the trace does not hold."""

CoverageRow = tuple[str, int | None, int, int, int]
"""One row of :func:`work_coverage`, in :data:`COVERAGE_COLUMNS` order."""


def work_coverage(events: pl.DataFrame) -> pl.DataFrame:
    """Per (source, pid) with kernel launches or GPU activity: :data:`COVERAGE_COLUMNS`."""
    # (grouped by the Categorical source, which is cheap per row; the few result rows get Strings)
    last = (
        events.lazy()
        .filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS))
        .group_by("source", "pid")
        .agg(pl.len().cast(pl.Int64).alias("activities"), pl.col("start_ns").max().alias("last_ns"))
        .collect()
    )
    is_api = pl.col("kind") == "cuda_api"
    # (the API calls' names alone: a third of the time of every row's)
    api_names = events.lazy().select(pl.col("name").filter(is_api).unique()).collect().to_series()
    is_call = (
        is_api
        & pl.col("correlation").is_not_null()
        & pl.col("name").is_in(matching(api_names, KERNEL_LAUNCH_PATTERN).implode())
    )
    calling = mask_where(events, is_call)  # (kept: the launches are counted by it below)
    call_rows = rows_of(calling)
    # Only the calls with no activity are taken out of the table (few); the launches are counted in it.
    alone = call_rows[~launch_link(events).with_activity(call_rows)]
    unrecorded = (
        gathered(events, alone, "source", "pid", "start_ns")
        .join(last, on=["source", "pid"], how="left")
        .filter(pl.col("last_ns").is_null() | (pl.col("start_ns") <= pl.col("last_ns")))
        .group_by("source", "pid")
        .agg(pl.len().cast(pl.Int64).alias("unrecorded"))
    )
    launches = (
        events.lazy()
        .select("source", "pid")
        .filter(calling)
        .group_by("source", "pid")
        .agg(pl.len().cast(pl.Int64).alias("launches"))
        .collect()
    )
    return (
        last.drop("last_ns")
        .join(launches, on=["source", "pid"], how="full", coalesce=True)
        .join(unrecorded, on=["source", "pid"], how="left")
        .with_columns(pl.col("activities", "launches", "unrecorded").fill_null(0), pl.col("source").cast(pl.String))
        .select(COVERAGE_COLUMNS)
        .sort("source", "pid")
    )


def coverage_rows(events: pl.DataFrame) -> tuple[CoverageRow, ...]:
    """:func:`work_coverage` as plain rows: what a part's summary carries to the driver."""
    return tuple(work_coverage(events).iter_rows())


def data_caveats(
    devices: Sequence[DeviceBreakdown], coverage: Iterable[CoverageRow], import_stats: ImportStats
) -> tuple[DataCaveat, ...]:
    """The caveats of a report: one per source that lost GPU rows on import, one per process with
    unrecorded launched work, in source then pid order."""
    by_source: dict[str, list[DeviceBreakdown]] = {}
    for d in devices:
        by_source.setdefault(d.source, []).append(d)
    caveats: list[DataCaveat] = []
    skipped = import_stats.skipped_of_kinds(schema.GPU_ACTIVITY_KINDS)
    read = import_stats.events_of_kinds(schema.GPU_ACTIVITY_KINDS)
    for source in sorted(skipped):
        reasons = skipped[source]
        missing = sum(reasons.values())
        expected = read.get(source, missing)
        on = by_source.get(source, [])
        caveats.append(
            DataCaveat(
                id="gpu_rows_skipped",
                source=source,
                pid=None,
                rank=_one({d.rank for d in on}),
                devices=tuple(d.device for d in on),
                missing=missing,
                expected=expected,
                reasons=dict(sorted(reasons.items())),
                withholds=missing >= WITHHOLD_SHARE * expected,
                text=(
                    f"{missing:,} of {expected:,} GPU activities of {_file(source)} ({pct(missing, expected)}) were "
                    f"skipped on import ({_reasons(reasons)}): compute, communication and idle are measured "
                    "without them"
                ),
            )
        )
    # A kernel skipped on import leaves its launch without work too: count it once, as skipped.
    skipped_left = {source: sum(reasons.values()) for source, reasons in skipped.items()}
    for source, pid, activities, _launches, launched in sorted(coverage, key=lambda r: (r[0], r[1] or 0)):
        if launched == 0:
            continue
        counted = min(launched, skipped_left.get(source, 0))
        skipped_left[source] = skipped_left.get(source, 0) - counted
        unrecorded = launched - counted
        if unrecorded == 0:
            continue
        on = [d for d in by_source.get(source, []) if d.pid == pid]
        expected = activities + unrecorded
        who = ", ".join(device_label(d.rank, d.device, pid=pid) for d in on) or f"pid {pid}"
        launches = f"{unrecorded:,} kernel launch{'es' if unrecorded != 1 else ''}"
        if sum(d.kernels for d in on) == 0:
            held = "none of its GPU work" if activities == 0 else "none of its kernels"
            text = (
                f"{who} made {launches} and the trace holds {held}: the export lacks its kernel table (profile "
                "with CUDA tracing on: nsys --trace=cuda, or the PyTorch profiler's ProfilerActivity.CUDA)"
            )
        else:
            text = (
                f"{launches} of {who} ({pct(unrecorded, expected)} of its GPU work) "
                f"{'have' if unrecorded != 1 else 'has'} no GPU activity in the trace (the profiler lost the "
                "records): the time that work ran is counted as idle"
            )
        caveats.append(
            DataCaveat(
                id="launched_work_unrecorded",
                source=source,
                pid=pid,
                rank=_one({d.rank for d in on}),
                devices=tuple(d.device for d in on),
                missing=unrecorded,
                expected=expected,
                reasons={},
                withholds=unrecorded >= WITHHOLD_SHARE * expected,
                text=text,
            )
        )
    return tuple(caveats)


def device_caveats(caveats: Iterable[DataCaveat], device: DeviceBreakdown) -> tuple[DataCaveat, ...]:
    """The caveats that apply to ``device``: its source's skipped rows, its process's unrecorded work."""
    return tuple(
        c
        for c in caveats
        if c.source == device.source and (c.pid is None or c.pid == device.pid) and device.device in c.devices
    )


def with_caveats(
    findings: Sequence[Finding], caveats: Sequence[DataCaveat], devices: Sequence[DeviceBreakdown]
) -> tuple[tuple[Finding, ...], tuple[WithheldFinding, ...]]:
    """``findings`` with the caveats of the devices they were measured on, and those withheld.

    A finding's caveats are those of the device it was measured on (``measured_on``: its worst
    device; the straggler's, the slow one); a withholding one moves it to the withheld list."""
    if not caveats:
        return tuple(findings), ()
    kept: list[Finding] = []
    withheld: list[WithheldFinding] = []
    for finding in findings:
        ref = finding.measured_on
        on = [
            c
            for d in devices
            if ref is not None and (d.source, d.pid, d.device) == (ref.source, ref.pid, ref.device)
            for c in device_caveats(caveats, d)
        ]
        texts = tuple(dict.fromkeys(c.text for c in on))
        blocking = [c for c in on if c.withholds]
        if blocking:
            withheld.append(WithheldFinding(id=finding.id, title=finding.title, reason=blocking[0].text))
        else:
            kept.append(replace(finding, caveats=texts) if texts else finding)
    return tuple(kept), tuple(withheld)


def _reasons(reasons: Mapping[str, int]) -> str:
    return ", ".join(f"{reason}: {n:,}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def _file(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1]


def _one(values: set[int | None]) -> int | None:
    return next(iter(values)) if len(values) == 1 else None


__all__ = [
    "COVERAGE_COLUMNS",
    "KERNEL_LAUNCH_PATTERN",
    "WITHHOLD_SHARE",
    "CoverageRow",
    "coverage_rows",
    "data_caveats",
    "device_caveats",
    "with_caveats",
    "work_coverage",
]
