"""The annotated Chrome trace: a trace's events and traceq's answers, for Perfetto and chrome://tracing.

:func:`annotated_events` turns an event table, its analysis and the report's findings into one
Chrome Trace Event Format document (``docs/perfetto.md``); :func:`write_annotated` writes it
(``.json``, or gzip for ``.json.gz``).  What it holds:

* **every row of the event table** as a Chrome event in the PyTorch profiler's dialect (kernels,
  copies, syncs and GPU ranges on ``pid`` = GPU, ``tid`` = stream; CPU rows on their own pid/tid;
  ``cat`` the row's Kineto category, ids and sizes in ``args``), so that traceq reads the file
  back as the same rows;
* per device, a thread **"traceq: idle by cause"** in the GPU's process: one slice per idle
  interval (its dominant cause, every cause's ns in ``args``), and nested in it one slice per
  stretch of one cause, so that each idle ns shows what the host was doing;
* per device, a thread **"traceq: steps"** with the step windows;
* the **findings** as instant events: one per piece of evidence that has a time, on its device's
  idle track (the first one global where no evidence has a time).

Times are the trace's own ns, written as µs (``ts = start_ns / 1000``): a double holds them to
the ns below 2^43 µs (about 100 days of clock), and integral µs exactly up to 2^53; other times
are written relative to the first event, the offset in ``baseTimeNanoseconds``.  traceq's own
events have categories of their own (``traceq_idle``, ``traceq_idle_cause``, ``traceq_step``,
``traceq_finding``), which read back as ``other`` and ``instant`` rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import polars as pl

from traceq.analyses import CAUSES, Analysis
from traceq.analyses.model import Finding
from traceq.analyses.steps import devices as device_table
from traceq.errors import InvalidArgumentError
from traceq.importers.kineto.normalise import kind_of_category
from traceq.meta import SourceMeta
from traceq.sorted_search import distinct

IDLE_TID: Final = 2_000_000_001
"""The thread (in each GPU's process) of the idle track; Kineto's own tids stay below."""
STEPS_TID: Final = 2_000_000_000
"""The thread of the step-window track."""
CATEGORIES: Final = ("traceq_idle", "traceq_idle_cause", "traceq_step", "traceq_finding")
"""The categories of traceq's own events in the file."""

_CANONICAL_CATEGORY: Final = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_sync": "cuda_sync",
    "cuda_api": "cuda_runtime",
    "range": "user_annotation",
    "cpu_op": "cpu_op",
    "python": "python_function",
    "instant": "cpu_instant_event",
    "other": "traceq_other",
}
_GPU_KINDS: Final = ("kernel", "memcpy", "memset", "gpu_sync")
_EXACT_US: Final = 1 << 43
_INTEGRAL_US: Final = 1 << 53


def annotated_events(
    events: pl.DataFrame, sources: Sequence[SourceMeta], analysis: Analysis, findings: Sequence[Finding]
) -> str:
    """The annotated trace of one source's ``events`` as a JSON document (see the module docstring)."""
    if len(sources) != 1:
        raise InvalidArgumentError(
            f"an annotated Chrome trace holds one source; this trace has {len(sources)}",
            hint="convert each rank's file on its own: traceq convert RANK_FILE -o RANK.annotated.json.gz",
        )
    source = sources[0]
    base_ns = _base_ns(events)
    keys = device_table(events).select("dev", "source", "pid", "device", "rank")
    parts = [
        _event_rows(events, base_ns),
        _idle_rows(analysis, keys, base_ns),
        _step_rows(analysis, keys, base_ns),
        _finding_rows(findings, events, base_ns),
        _names(events),
    ]
    body = pl.concat([p for p in parts if p.height], how="vertical").get_column("json").str.join(",\n").item()
    top: dict[str, Any] = {"schemaVersion": 1, "traceq": {"annotated": True, "source": source.path}}
    offset = (source.clock_offset_ns or 0) + base_ns if (source.clock_offset_ns is not None or base_ns) else None
    if offset is not None:
        top["baseTimeNanoseconds"] = offset
    if source.rank is not None:
        top["distributedInfo"] = {
            "rank": source.rank,
            **({} if source.world_size is None else {"world_size": source.world_size}),
        }
    if source.gpus:
        top["deviceProperties"] = [_device_properties(g) for g in source.gpus]
    head = json.dumps(top, sort_keys=True)
    return head[:-1] + ', "traceEvents": [\n' + (body or "") + "\n]}\n"


def write_annotated(path: Path, document: str, *, compress: bool) -> None:
    """Write ``document`` to ``path``, gzip-compressed where ``compress`` (the output's name ends in
    ``.gz``; ``path`` itself may be a temporary file)."""
    data = document.encode("utf-8")
    if compress:
        from isal import igzip

        with igzip.open(path, "wb", compresslevel=2) as out:  # type: ignore[no-untyped-call]
            out.write(data)
    else:
        path.write_bytes(data)


def _base_ns(events: pl.DataFrame) -> int:
    """0 where every time can be written as it is (see the module docstring), else the first start."""
    if events.is_empty():
        return 0
    lo, hi = events.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    if max(abs(lo), abs(hi)) < _EXACT_US * 1000:
        return 0
    integral = events.select(((pl.col("start_ns") % 1000 == 0) & (pl.col("end_ns") % 1000 == 0)).all()).item()
    if integral and max(abs(lo), abs(hi)) < _INTEGRAL_US * 1000:
        return 0
    return int(lo)


def _us(column: str | pl.Expr, base_ns: int) -> pl.Expr:
    expr = pl.col(column) if isinstance(column, str) else column
    return ((expr - base_ns).cast(pl.Float64) / 1000.0).alias("ts")


def _category(events: pl.DataFrame) -> pl.Expr:
    """The row's own ``category`` where traceq's Kineto importer maps it to the row's kind (and,
    for ranges, to the same side: CPU or GPU), else the kind's canonical Kineto category."""
    canonical = pl.col("kind").cast(pl.String).replace_strict(_CANONICAL_CATEGORY, return_dtype=pl.String)
    gpu_range = (pl.col("kind") == "range") & pl.col("device").is_not_null()
    canonical = pl.when(gpu_range).then(pl.lit("gpu_user_annotation")).otherwise(canonical)
    present = events.get_column("category").drop_nulls().unique().cast(pl.String).to_list()
    kinds = {c: kind_of_category(c) for c in present}
    gpu_side = [c for c in present if c.lower() in ("gpu_user_annotation", "cuda_event")]
    own = pl.col("category").cast(pl.String)
    fits = (pl.col("kind") == "instant") | (
        own.replace_strict(kinds, default=None, return_dtype=pl.String) == pl.col("kind").cast(pl.String)
    )
    side = pl.when(pl.col("kind") == "range").then(own.is_in(gpu_side) == gpu_range).otherwise(True)
    return pl.when(fits.fill_null(False) & side.fill_null(False)).then(own).otherwise(canonical)


def _event_rows(events: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    on_gpu = pl.col("kind").is_in(_GPU_KINDS) | ((pl.col("kind") == "range") & pl.col("device").is_not_null())
    instant = pl.col("kind") == "instant"

    def triple(prefix: str) -> pl.Expr:
        parts = [pl.col(f"{prefix}_{axis}") for axis in "xyz"]
        whole = pl.all_horizontal(p.is_not_null() for p in parts)
        return pl.when(whole).then(pl.concat_list(parts)).alias(prefix)

    args = pl.struct(
        pl.col("device"),
        pl.col("stream"),
        pl.col("correlation"),
        pl.col("external_id").alias("External id"),
        pl.col("bytes"),
        pl.col("context"),
        pl.col("graph_id").alias("graph id"),
        triple("grid"),
        triple("block"),
        pl.col("registers_per_thread").alias("registers per thread"),
        pl.col("shared_memory_bytes").alias("shared memory"),
        # Kineto marks collectives so; traceq reads the mark as is_comm whatever the name.
        pl.when(pl.col("is_comm")).then(pl.col("name").cast(pl.String)).alias("Collective name"),
    )
    event = pl.struct(
        pl.when(instant).then(pl.lit("i")).otherwise(pl.lit("X")).alias("ph"),
        _category(events).alias("cat"),
        pl.col("name").cast(pl.String),
        pl.when(on_gpu).then(pl.col("device").cast(pl.Int64)).otherwise(pl.col("pid")).alias("pid"),
        pl.when(on_gpu).then(pl.col("stream")).otherwise(pl.col("tid")).alias("tid"),
        _us("start_ns", base_ns),
        pl.when(~instant).then(_us(pl.col("end_ns") - pl.col("start_ns"), 0)).alias("dur"),
        pl.when(instant).then(pl.lit("t")).alias("s"),
        args.alias("args"),
    )
    return events.select(event.struct.json_encode().alias("json"))


def _slices(frame: pl.DataFrame, base_ns: int, cat: str, tid: int, args: pl.Expr) -> pl.DataFrame:
    """Chrome ``X`` events of ``frame`` (device, start_ns, end_ns, name) on ``tid`` of its GPU."""
    event = pl.struct(
        pl.lit("X").alias("ph"),
        pl.lit(cat).alias("cat"),
        pl.col("name"),
        pl.col("device").cast(pl.Int64).alias("pid"),
        pl.lit(tid, dtype=pl.Int64).alias("tid"),
        _us("start_ns", base_ns),
        _us(pl.col("end_ns") - pl.col("start_ns"), 0).alias("dur"),
        args.alias("args"),
    )
    return frame.select(event.struct.json_encode().alias("json"))


def _idle_rows(analysis: Analysis, keys: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    """Per idle interval a slice named by its dominant cause, and inside it one per cause stretch."""
    gaps = analysis.gap_table.filter(pl.col("dur_ns") > 0)
    if gaps.is_empty():
        return pl.DataFrame(schema={"json": pl.String})
    cause_ns = {c: pl.col(f"{c}_ns") for c in CAUSES}
    outer = _slices(
        gaps.with_columns(pl.concat_str(pl.lit("idle: "), pl.col("cause")).alias("name")),
        base_ns,
        "traceq_idle",
        IDLE_TID,
        pl.struct(
            pl.col("cause"),
            pl.col("kind").alias("gap"),
            *(v.alias(f"{c}_ns") for c, v in cause_ns.items()),
            pl.col("next_name").alias("next"),
            pl.col("launch_name").alias("launch"),
            pl.col("sync_name").alias("sync"),
        ),
    )
    return pl.concat(
        [
            outer,
            _slices(
                _cause_stretches(analysis, gaps, keys),
                base_ns,
                "traceq_idle_cause",
                IDLE_TID,
                pl.struct(pl.col("name").alias("cause")),
            ),
        ]
    )


def _cause_stretches(analysis: Analysis, gaps: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """Each device's idle ns of each cause (``Analysis.idle_causes``), cut at the idle intervals'
    bounds so that every stretch nests inside its interval: device, start_ns, end_ns, name."""
    device_of = {int(dev): int(device) for dev, device in keys.select("dev", "device").iter_rows()}
    key_of = {
        (str(s), p, d): int(dev)
        for dev, s, p, d in keys.select("dev", pl.col("source").cast(pl.String), "pid", "device").iter_rows()
    }
    frames = []
    for (source, pid, device), rows in gaps.partition_by(["source", "pid", "device"], as_dict=True).items():
        dev = key_of.get((str(source), pid, device))
        if dev is None:
            continue
        lo = rows.get_column("start_ns").to_numpy()
        hi = rows.get_column("end_ns").to_numpy()
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        for cause, spans in analysis.idle_causes.get(dev, {}).items():
            if not len(spans):
                continue
            # Cut every stretch at each interval bound it crosses, then keep the pieces inside one.
            bounds = distinct(np.concatenate([lo, hi]))
            cuts = np.concatenate(
                [spans.start_ns, spans.end_ns, bounds[(bounds > spans.start_ns.min()) & (bounds < spans.end_ns.max())]]
            )
            cuts = distinct(cuts)
            a, b = cuts[:-1], cuts[1:]
            mid_in_span = _covered(spans.start_ns, spans.end_ns, a)
            at = np.searchsorted(lo, a, side="right") - 1
            in_gap = (at >= 0) & (b <= hi[np.clip(at, 0, None)])
            keep = mid_in_span & in_gap
            a, b, g = a[keep], b[keep], at[keep]
            # Rejoin the pieces of one stretch inside one interval.
            joins = np.flatnonzero((a[1:] != b[:-1]) | (g[1:] != g[:-1])) + 1
            starts = a[np.concatenate([[0], joins])] if len(a) else a
            ends = b[np.concatenate([joins - 1, [len(b) - 1]])] if len(b) else b
            frames.append(
                pl.DataFrame(
                    {"device": device_of[dev], "start_ns": starts, "end_ns": ends, "name": cause},
                    schema={"device": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String},
                )
            )
    if not frames:
        return pl.DataFrame(schema={"device": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String})
    return pl.concat(frames)


def _covered(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each ``t`` lies in one of the disjoint, sorted ``[start, end)``."""
    at = np.searchsorted(start, t, side="right") - 1
    return (at >= 0) & (t < end[np.clip(at, 0, None)])


def _step_rows(analysis: Analysis, keys: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    windows = analysis.windows
    if windows.is_empty():
        return pl.DataFrame(schema={"json": pl.String})
    windows = windows.join(keys.select("dev", "device"), on="dev").with_columns(
        pl.when(pl.col("step").is_not_null())
        .then(pl.concat_str(pl.lit("step "), pl.col("step").cast(pl.String)))
        .otherwise(pl.col("name"))
        .alias("label")
    )
    return _slices(
        windows.select(
            "device", "start_ns", "end_ns", pl.col("label").alias("name"), pl.col("name").alias("range"), "warmup"
        ),
        base_ns,
        "traceq_step",
        STEPS_TID,
        pl.struct(pl.col("range"), pl.col("warmup")),
    )


def _finding_rows(findings: Sequence[Finding], events: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for finding in findings:
        located = [e for e in finding.evidence if e.start_ns is not None]
        for ev in located:
            rows.append(
                {
                    "name": f"{finding.id}: {ev.text}",
                    "pid": ev.device,
                    "tid": None if ev.device is None else IDLE_TID,
                    "s": "g" if ev.device is None else "t",
                    "start_ns": ev.start_ns,
                    "finding": finding.id,
                    "severity": finding.severity,
                    "title": finding.title,
                    "fix": finding.fix,
                }
            )
        if not located:
            first = events.get_column("start_ns").min() if events.height else 0
            rows.append(
                {
                    "name": f"{finding.id}: {finding.title}",
                    "pid": None,
                    "tid": None,
                    "s": "g",
                    "start_ns": first,
                    "finding": finding.id,
                    "severity": finding.severity,
                    "title": finding.title,
                    "fix": finding.fix,
                }
            )
    if not rows:
        return pl.DataFrame(schema={"json": pl.String})
    frame = pl.DataFrame(rows, schema=_FINDING_SCHEMA)
    event = pl.struct(
        pl.lit("i").alias("ph"),
        pl.lit("traceq_finding").alias("cat"),
        pl.col("name"),
        pl.col("pid"),
        pl.col("tid"),
        _us("start_ns", base_ns),
        pl.col("s"),
        pl.struct("finding", "severity", "title", "fix").alias("args"),
    )
    return frame.select(event.struct.json_encode().alias("json"))


_FINDING_SCHEMA: Final = {
    "name": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "s": pl.String,
    "start_ns": pl.Int64,
    "finding": pl.String,
    "severity": pl.String,
    "title": pl.String,
    "fix": pl.String,
}


def _names(events: pl.DataFrame) -> pl.DataFrame:
    """``M`` events naming each GPU's process and traceq's two threads in it."""
    devices = events.filter(pl.col("device").is_not_null()).get_column("device").unique().sort().to_list()
    meta = []
    for device in devices:
        meta.append({"ph": "M", "name": "process_name", "pid": device, "args": {"name": f"GPU {device}"}})
        for tid, label in ((IDLE_TID, "traceq: idle by cause"), (STEPS_TID, "traceq: steps")):
            meta.append({"ph": "M", "name": "thread_name", "pid": device, "tid": tid, "args": {"name": label}})
    return pl.DataFrame({"json": [json.dumps(m, sort_keys=True) for m in meta]}, schema={"json": pl.String})


def _device_properties(gpu: Any) -> dict[str, Any]:
    props: dict[str, Any] = {"id": gpu.device}
    if gpu.name is not None:
        props["name"] = gpu.name
    if gpu.sm_count is not None:
        props["numSms"] = gpu.sm_count
    if gpu.memory_bytes is not None:
        props["totalGlobalMem"] = gpu.memory_bytes
    if gpu.compute_capability:
        major, _, minor = gpu.compute_capability.partition(".")
        if major.isdigit() and minor.isdigit():
            props["computeMajor"], props["computeMinor"] = int(major), int(minor)
    return props
