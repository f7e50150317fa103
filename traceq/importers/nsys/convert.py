"""One converter per nsys event table: raw columns in, event-table rows plus their accounting out.

Each ``convert_*`` function takes a frame :meth:`ExportDb.read` or :meth:`ExportDb.read_chunks`
returned for its table (the ``*_COLUMNS`` spec beside it says which columns it asks for) and the
resolved strings (:mod:`traceq.importers.nsys.strings`), and returns a :class:`Converted`: rows
with columns of :mod:`traceq.schema` (``name`` already Categorical for kernels, API calls, memcpys
and memsets, a plain string elsewhere; ``kind``/``copy_kind``/``sync_kind`` still strings) plus a
helper column ``_proc``, the full process key ``global id >> 24`` (pid with its VM and hardware
bytes) used for joins; and the number of source rows skipped, by reason.  Converters that take
chunks (kernels, graph launches, memcpys, memsets, API calls) see one piece of a table at a time
and keep no state.  Everything is vectorised polars; nothing loops over rows.

Identifier decoding follows NVIDIA's serialized GlobalId: ``pid = (g >> 24) & 0xFFFFFF`` and
``tid = g & 0xFFFFFF``.  GPU tables carry ``globalPid``; API and NVTX tables carry ``globalTid``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import polars as pl

from traceq.importers.nsys.export_db import INT, TEXT
from traceq.importers.nsys.strings import NAME, StringLookup, by_id, row_of

KERNEL: Final = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY: Final = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET: Final = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE: Final = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME: Final = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC: Final = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX: Final = "NVTX_EVENTS"

_ID_SHIFT: Final = 1 << 24
_ID_MASK: Final = 0xFFFFFF

_GPU_COMMON: Final = {
    "start": INT,
    "end": INT,
    "deviceId": INT,
    "contextId": INT,
    "streamId": INT,
    "correlationId": INT,
    "globalPid": INT,
}
KERNEL_COLUMNS: Final = {
    **_GPU_COMMON,
    "demangledName": INT,
    "shortName": INT,
    "gridX": INT,
    "gridY": INT,
    "gridZ": INT,
    "blockX": INT,
    "blockY": INT,
    "blockZ": INT,
    "registersPerThread": INT,
    "staticSharedMemory": INT,
    "dynamicSharedMemory": INT,
    "graphId": INT,  # 2025.5+
}
MEMCPY_COLUMNS: Final = {**_GPU_COMMON, "bytes": INT, "copyKind": INT}
MEMSET_COLUMNS: Final = {**_GPU_COMMON, "bytes": INT}
GRAPH_TRACE_COLUMNS: Final = {**_GPU_COMMON, "graphId": INT}
RUNTIME_COLUMNS: Final = {
    "start": INT,
    "end": INT,
    "eventClass": INT,
    "globalTid": INT,
    "correlationId": INT,
    "nameId": INT,
}
SYNC_COLUMNS: Final = {**_GPU_COMMON, "syncType": INT}
NVTX_COLUMNS: Final = {
    "start": INT,
    "end": INT,
    "eventType": INT,
    "text": TEXT,
    "textId": INT,
    "globalTid": INT,
    "domainId": INT,
}

REQUIRED_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    KERNEL: ("start", "end"),
    MEMCPY: ("start", "end"),
    MEMSET: ("start", "end"),
    GRAPH_TRACE: ("start", "end"),
    RUNTIME: ("start", "end", "nameId"),
    SYNC: ("start", "end"),
    NVTX: ("start", "end", "eventType"),
}
"""Columns without which a table cannot be imported at all (an UnsupportedVersionError)."""

# copyKind (ENUM_CUDA_MEMCPY_OPER) when the export has no ENUM table (≤2022): id -> (direction,
# unified).  Unified-memory migrations (11-13) keep their direction and say "Unified" in the name.
COPY_KIND_BY_ID: Final[Mapping[int, tuple[str, bool]]] = {
    0: ("unknown", False),
    1: ("HtoD", False),
    2: ("DtoH", False),
    3: ("HtoA", False),
    4: ("AtoH", False),
    5: ("AtoA", False),
    6: ("AtoD", False),
    7: ("DtoA", False),
    8: ("DtoD", False),
    9: ("HtoH", False),
    10: ("PtoP", False),
    11: ("HtoD", True),
    12: ("DtoH", True),
    13: ("DtoD", True),
}
_COPY_KIND_BY_ENUM_NAME: Final = {
    "HTOD": "HtoD",
    "DTOH": "DtoH",
    "HTOA": "HtoA",
    "ATOH": "AtoH",
    "ATOA": "AtoA",
    "ATOD": "AtoD",
    "DTOA": "DtoA",
    "DTOD": "DtoD",
    "HTOH": "HtoH",
    "PTOP": "PtoP",
    "UNKNOWN": "unknown",
}

API_EVENT_CLASSES: Final = (0, 1)
"""RUNTIME.eventClass values imported as ``cuda_api``: 0 CUDA runtime, 1 CUDA driver."""
EVENT_CLASS_LABELS: Final[Mapping[int, str]] = {
    13: "CUDA EGL driver",
    67: "CUDA backtrace duplicate",
}
"""Labels for skipped RUNTIME classes; others come from ENUM_NSYS_EVENT_CLASS when the export has it."""

# A sync record is classified by the name of the API call that caused it (same process and
# correlationId); the prefixes cover runtime and driver spellings and _ptsz variants.
SYNC_KIND_BY_API_PREFIX: Final = (
    (("cudaStreamSynchronize", "cuStreamSynchronize"), "stream_synchronize"),
    (("cudaEventSynchronize", "cuEventSynchronize"), "event_synchronize"),
    (("cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize"), "context_synchronize"),
    (("cudaStreamWaitEvent", "cuStreamWaitEvent"), "stream_wait_event"),
    (("cudaEventQuery", "cuEventQuery"), "event_query"),
)

# Fallback when no API row matches: syncType by nsys release, from joining every sample's sync rows
# to their API calls.  The stored numbers changed twice; values that meant two things in one era
# (3 in ≤2024.5 was both stream sync and stream-wait-event) are left out and become "unknown".
_SYNC_TYPE_ERAS: Final[tuple[tuple[tuple[int, int], Mapping[int, str]], ...]] = (
    ((2026, 2), {1: "event_query", 2: "stream_wait_event", 3: "stream_synchronize"}),
    ((2024, 6), {2: "stream_synchronize", 4: "context_synchronize"}),
    ((0, 0), {1: "context_synchronize", 2: "event_synchronize"}),
)

NVTX_RANGE_TYPES: Final = (59, 60)
"""NVTX eventType: 59 push/pop range, 60 start/end range."""
NVTX_MARK: Final = 34
NVTX_DOMAIN_CREATE: Final = 75
NVTX_METADATA_TYPES: Final = (33, 39, 64, 72, 73, 74, 75, 76)
"""Category names, thread names, NVTXT category/meta rows, domain create/destroy: not events."""


@dataclass
class Converted:
    """Rows made from one table, and the source rows skipped (reason -> count)."""

    frame: pl.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unresolved: int = 0
    """Rows whose name was not in StringIds (kernels and API calls); the importer warns about them."""


def lookup(column: str, strings: pl.DataFrame) -> pl.Expr:
    """``column`` (StringIds ids) as strings; null where the id is null or not in ``strings``."""
    return by_id(column, strings, "value")


def convert_kernels(raw: pl.DataFrame, strings: StringLookup) -> Converted:
    strings.require(raw["demangledName"], raw["shortName"])
    names = strings.kernel_names()
    # Each id is looked up once, as its row of ``names``; the name and the flag are read there.
    ids = raw.with_columns(_demangled=row_of("demangledName", names), _short=row_of("shortName", names))
    name, comm = pl.lit(names["name"]), pl.lit(names["comm"])
    frame = ids.select(
        *_gpu_columns(),
        kind=pl.lit("kernel"),
        name=pl.coalesce(name.gather(pl.col("_demangled")), name.gather(pl.col("_short"))),
        # Communication kernels (traceq.comm_kernels): shortName never carries a return type
        # (ncclDevKernel_SendRecv), the demangled name carries the namespace (deep_ep::intranode::...),
        # so either may be the one a pattern matches.
        is_comm=(comm.gather(pl.col("_short")).fill_null(False) | comm.gather(pl.col("_demangled")).fill_null(False)),
        grid_x="gridX",
        grid_y="gridY",
        grid_z="gridZ",
        block_x="blockX",
        block_y="blockY",
        block_z="blockZ",
        registers_per_thread="registersPerThread",
        shared_memory_bytes=pl.sum_horizontal("staticSharedMemory", "dynamicSharedMemory").cast(pl.Int64),
        graph_id="graphId",
    )
    unresolved = frame["name"].null_count()
    if unresolved:
        frame = frame.with_columns(pl.col("name").fill_null(pl.lit("[unresolved kernel name]", dtype=NAME)))
    return Converted(frame, unresolved=unresolved)


def convert_memcpys(raw: pl.DataFrame, copy_kinds: Mapping[int, tuple[str, bool]]) -> Converted:
    ids = list(copy_kinds)
    directions = [copy_kinds[i][0] for i in ids]
    names = [f"[CUDA memcpy {'Unified ' if copy_kinds[i][1] else ''}{copy_kinds[i][0]}]" for i in ids]
    frame = raw.select(
        *_gpu_columns(),
        kind=pl.lit("memcpy"),
        bytes="bytes",
        copy_kind=pl.col("copyKind").replace_strict(ids, directions, default="unknown", return_dtype=pl.String),
        name=pl.col("copyKind").replace_strict(
            pl.Series(ids, dtype=pl.Int64),
            pl.Series(names, dtype=NAME),
            default=pl.lit("[CUDA memcpy unknown]", dtype=NAME),
            return_dtype=NAME,
        ),
    )
    return Converted(frame)


def copy_kinds_from_enum(enum_rows: list[dict[str, object]]) -> dict[int, tuple[str, bool]]:
    """copyKind ids from ``ENUM_CUDA_MEMCPY_OPER`` rows (``CUDA_MEMCPY_KIND_UVM_HTOD`` ...), over the constants."""
    out = dict(COPY_KIND_BY_ID)
    for row in enum_rows:
        ident, name = row.get("id"), str(row.get("name") or "").upper()
        if not isinstance(ident, int):
            continue
        suffix = name.removeprefix("CUDA_MEMCPY_KIND_")
        unified = suffix.startswith("UVM_")
        out[ident] = (_COPY_KIND_BY_ENUM_NAME.get(suffix.removeprefix("UVM_"), "unknown"), unified)
    return out


def convert_memsets(raw: pl.DataFrame) -> Converted:
    frame = raw.select(*_gpu_columns(), kind=pl.lit("memset"), bytes="bytes", name=pl.lit("[CUDA memset]", dtype=NAME))
    return Converted(frame)


def convert_graph_traces(raw: pl.DataFrame) -> Converted:
    """Whole-graph launches (``--cuda-graph-trace=graph``): one GPU interval per launch, as a kernel."""
    frame = raw.select(
        *_gpu_columns(),
        kind=pl.lit("kernel"),
        graph_id="graphId",
        name=pl.format("[CUDA graph {}]", pl.col("graphId")).fill_null("[CUDA graph]"),
    )
    return Converted(frame)


def convert_runtime(raw: pl.DataFrame, strings: StringLookup, class_labels: Mapping[int, str]) -> Converted:
    """CUDA runtime (eventClass 0) and driver (1) calls; other classes are skipped by class."""
    event_class = pl.col("eventClass")
    # A missing eventClass column (all null) can only mean an export that had nothing but API rows.
    is_api = event_class.is_null() | event_class.is_in(API_EVENT_CLASSES)
    skipped: dict[str, int] = {}
    others = raw.filter(~is_api)
    if others.height:
        for cls, n in others.group_by("eventClass").len().sort("eventClass").iter_rows():
            label = EVENT_CLASS_LABELS.get(cls) or class_labels.get(cls) or "not a CUDA API call"
            skipped[f"eventClass {cls} ({label})"] = n
        raw = raw.filter(is_api)
    strings.require(raw["nameId"])
    frame = raw.select(
        *_cpu_columns(),
        kind=pl.lit("cuda_api"),
        correlation="correlationId",
        name=by_id("nameId", strings.api_names(), "name"),
    )
    unresolved = frame["name"].null_count()
    if unresolved:
        frame = frame.with_columns(pl.col("name").fill_null(pl.lit("[unresolved API name]", dtype=NAME)))
    return Converted(frame, skipped, unresolved=unresolved)


def convert_syncs(raw: pl.DataFrame, api: pl.DataFrame, release: tuple[int, int] | None) -> Converted:
    """GPU-side sync records, classified by the correlated API call's name (syncType only as fallback).

    ``api`` holds the converted RUNTIME rows (at least those whose correlation id a sync row has),
    in file order; the match is on (process, correlationId), never on correlationId alone, because
    ids repeat across processes.
    """
    calls = (
        api.select("_proc", "correlation", _api=pl.col("name").cast(pl.String))
        .drop_nulls(["_proc", "correlation"])
        .unique(["_proc", "correlation"], keep="first")
    )
    frame = (
        raw.select(*_gpu_columns(), kind=pl.lit("gpu_sync"), _sync_type="syncType")
        .join(calls, on=["_proc", "correlation"], how="left", nulls_equal=False)
        .with_columns(sync_kind=_sync_kind_from_api(pl.col("_api")).fill_null(_sync_kind_from_type(release)))
        .with_columns(name=pl.col("_api").fill_null("[CUDA synchronization]"))
        .drop("_api", "_sync_type")
    )
    return Converted(frame)


def convert_nvtx(raw: pl.DataFrame, strings: StringLookup) -> Converted:
    """Ranges (59/60) and marks (34); domain names come from the process's eventType-75 rows."""
    event_type = pl.col("eventType")
    is_range = event_type.is_in(NVTX_RANGE_TYPES)
    strings.require(raw["textId"])
    events = raw.with_columns(
        _text=pl.coalesce(pl.col("text"), lookup("textId", strings.values)),
        _proc=pl.col("globalTid") // _ID_SHIFT,
    )
    domains = (
        events.filter(event_type == NVTX_DOMAIN_CREATE)
        .select("_proc", "domainId", domain="_text")
        .drop_nulls()
        .unique(["_proc", "domainId"], keep="first")
    )
    keep = (is_range & pl.col("end").is_not_null()) | (event_type == NVTX_MARK)
    kept = events.filter(keep).join(domains, on=["_proc", "domainId"], how="left", nulls_equal=False)
    is_mark = event_type == NVTX_MARK
    frame = kept.with_columns(
        # Marks are instants: their end is NULL (or, in some versions, equal to start).
        end=pl.when(is_mark).then(pl.col("start")).otherwise(pl.col("end")),
    ).select(
        *_cpu_columns(),
        kind=pl.when(is_mark).then(pl.lit("instant")).otherwise(pl.lit("range")),
        name=pl.col("_text").fill_null(
            pl.when(is_mark).then(pl.lit("[unnamed NVTX mark]")).otherwise(pl.lit("[unnamed NVTX range]"))
        ),
        domain="domain",
        _domain_id="domainId",
    )
    skipped = _nvtx_skips(raw)
    orphan = frame.filter(pl.col("domain").is_null() & (pl.col("_domain_id").fill_null(0) != 0))
    warnings = []
    if orphan.height:
        ids = ", ".join(str(d) for d in orphan["_domain_id"].unique().sort().to_list())
        warnings.append(
            f"{orphan.height} NVTX events are in domains whose names the export lacks (domainId {ids}); "
            "their domain is left empty"
        )
    return Converted(frame.drop("_domain_id"), skipped, warnings)


def _nvtx_skips(raw: pl.DataFrame) -> dict[str, int]:
    event_type = pl.col("eventType")
    reason = (
        pl.when(event_type.is_in(NVTX_RANGE_TYPES) & pl.col("end").is_null())
        .then(pl.lit("unterminated range"))
        .when(event_type.is_in(NVTX_METADATA_TYPES))
        .then(pl.lit("metadata"))
        .otherwise(pl.format("eventType {} not imported", event_type))
    )
    kept = (event_type.is_in(NVTX_RANGE_TYPES) & pl.col("end").is_not_null()) | (event_type == NVTX_MARK)
    counts = raw.filter(~kept).group_by(reason.alias("reason")).len()
    return {str(r): int(n) for r, n in counts.iter_rows()}


def _gpu_columns() -> list[pl.Expr]:
    proc = pl.col("globalPid") // _ID_SHIFT
    return [
        pl.col("start").alias("start_ns"),
        pl.col("end").alias("end_ns"),
        (proc & _ID_MASK).alias("pid"),
        pl.lit(None, dtype=pl.Int64).alias("tid"),
        pl.col("deviceId").alias("device"),
        pl.col("streamId").alias("stream"),
        pl.col("contextId").alias("context"),
        pl.col("correlationId").alias("correlation"),
        proc.alias("_proc"),
    ]


def _cpu_columns() -> list[pl.Expr]:
    proc = pl.col("globalTid") // _ID_SHIFT
    return [
        pl.col("start").alias("start_ns"),
        pl.col("end").alias("end_ns"),
        (proc & _ID_MASK).alias("pid"),
        (pl.col("globalTid") & _ID_MASK).alias("tid"),
        proc.alias("_proc"),
    ]


def _sync_kind_from_api(name: pl.Expr) -> pl.Expr:
    expr: pl.Expr = pl.lit(None, dtype=pl.String)
    for prefixes, kind in reversed(SYNC_KIND_BY_API_PREFIX):
        hit = pl.any_horizontal(*(name.str.starts_with(p) for p in prefixes))
        expr = pl.when(hit).then(pl.lit(kind)).otherwise(expr)
    # A matched API call whose name is none of the sync calls is still a known call: say unknown.
    return pl.when(name.is_not_null()).then(expr.fill_null("unknown"))


def _sync_kind_from_type(release: tuple[int, int] | None) -> pl.Expr:
    table = next(m for since, m in _SYNC_TYPE_ERAS if (release or (0, 0)) >= since)
    return pl.col("_sync_type").replace_strict(
        list(table), list(table.values()), default="unknown", return_dtype=pl.String
    )
