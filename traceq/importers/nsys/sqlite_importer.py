"""The Nsight Systems SQLite importer: ``nsys export --type sqlite`` output -> the traceq event table.

:func:`read_nsys_sqlite` opens the file read-only, introspects which tables and columns this export
has (any table may be missing; columns differ between nsys 2021 and 2026; ``_V<n>`` table names
stand in for missing bare ones), reads whole columns into polars (the large tables in chunks, read
ahead on a few threads: :meth:`~traceq.importers.nsys.export_db.ExportDb.read_chunks`), converts
each chunk (:mod:`traceq.importers.nsys.convert`), makes the event table of the pieces, sorted by
time (:class:`~traceq.importers.event_rows.EventRows`), and accounts for every source row in the
:class:`~traceq.stats.ImportStats`:

==================================== ============ =============================================
table                                kind         rows skipped (reason)
==================================== ============ =============================================
CUPTI_ACTIVITY_KIND_KERNEL           kernel
CUPTI_ACTIVITY_KIND_GRAPH_TRACE      kernel       (one row per whole-graph launch)
CUPTI_ACTIVITY_KIND_MEMCPY           memcpy
CUPTI_ACTIVITY_KIND_MEMSET           memset
CUPTI_ACTIVITY_KIND_SYNCHRONIZATION  gpu_sync
CUPTI_ACTIVITY_KIND_RUNTIME          cuda_api     eventClass other than 0/1 (``eventClass 67 (...)``)
NVTX_EVENTS                          range/instant ``metadata``, ``unterminated range``
:data:`NOT_IMPORTED_TABLES`          --           ``table not imported`` (all rows)
==================================== ============ =============================================

Rows of any table whose start/end is missing or inverted are skipped as ``invalid interval``; a
row equal in every column to an earlier one as ``exact duplicate``
(:mod:`traceq.importers.duplicates`).
``docs/importers-nsys.md`` describes the per-version differences this handles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import polars as pl

from traceq import schema
from traceq.errors import InputNotFoundError, UnsupportedFormatError, UnsupportedVersionError
from traceq.importers.duplicates import count_duplicates, drop_exact_duplicates
from traceq.importers.event_rows import EventRows
from traceq.importers.nsys import export_db
from traceq.importers.nsys import meta as export_meta
from traceq.importers.nsys.convert import (
    GRAPH_TRACE,
    GRAPH_TRACE_COLUMNS,
    KERNEL,
    KERNEL_COLUMNS,
    MEMCPY,
    MEMCPY_COLUMNS,
    MEMSET,
    MEMSET_COLUMNS,
    NVTX,
    NVTX_COLUMNS,
    REQUIRED_COLUMNS,
    RUNTIME,
    RUNTIME_COLUMNS,
    SYNC,
    SYNC_COLUMNS,
    Converted,
    convert_graph_traces,
    convert_kernels,
    convert_memcpys,
    convert_memsets,
    convert_nvtx,
    convert_runtime,
    convert_syncs,
    copy_kinds_from_enum,
)
from traceq.importers.nsys.export_db import ExportDb, open_export
from traceq.importers.nsys.strings import StringLookup
from traceq.importers.result import ImportResult
from traceq.meta import GpuInfo, SourceMeta
from traceq.read_progress import FileReading
from traceq.stats import CategoryCount, ImportStats

NOT_IMPORTED_TABLES: Final[Mapping[str, str]] = {
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": "cudaEventRecord completions (points, and only with event tracing)",
    "CUPTI_ACTIVITY_KIND_OVERHEAD": "CUPTI's own overhead (buffer flush, instrumentation), not user work",
    "CUPTI_ACTIVITY_KIND_MEMCPY2": "peer-to-peer copy records of another layout (no sample to verify it)",
    "CUPTI_ACTIVITY_KIND_OPENACC_DATA": "OpenACC events",
    "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH": "OpenACC events",
    "CUPTI_ACTIVITY_KIND_OPENACC_OTHER": "OpenACC events",
    "CUDA_GRAPH_EVENTS": "graph/node creation and instantiation calls (not executions)",
    "CUDA_GRAPH_NODE_EVENTS": "graph node creation calls (not executions)",
    "CUDA_UM_CPU_PAGE_FAULT_EVENTS": "unified-memory page faults",
    "CUDA_UM_GPU_PAGE_FAULT_EVENTS": "unified-memory page faults",
    "CUDA_GPU_MEMORY_USAGE_EVENTS": "allocation events, not intervals",
    "CUDNN_EVENTS": "cuDNN API ranges (not traced by the analyses yet)",
    "CUBLAS_EVENTS": "cuBLAS API ranges (not traced by the analyses yet)",
    "OSRT_API": "OS runtime calls (pthread, I/O), only above a duration threshold",
    "OSRT_FILE_ACCESS_EVENTS": "file access details of OS runtime calls",
    "PROFILER_OVERHEAD": "nsys's own overhead ranges",
    "DIAGNOSTIC_EVENT": "profiler messages; errors and data-loss warnings go to meta.warnings",
    "SCHED_EVENTS": "CPU thread scheduling",
    "COMPOSITE_EVENTS": "CPU sampling records",
    "MPI_P2P_EVENTS": "MPI calls",
    "MPI_COLLECTIVES_EVENTS": "MPI calls",
    "MPI_START_WAIT_EVENTS": "MPI calls",
    "MPI_OTHER_EVENTS": "MPI calls",
    "GPU_METRICS": "sampled GPU counters, not events",
}
"""Event tables that exist in exports but are not imported: name -> why.  When present with rows
they appear in the stats as ``events=N rows=0 skipped={"table not imported": N}``."""

_GPU_ACTIVITY_TABLES: Final = (KERNEL, GRAPH_TRACE, MEMCPY, MEMSET)
_KIND_OF_TABLE: Final = {
    KERNEL: "kernel",
    GRAPH_TRACE: "kernel",
    MEMCPY: "memcpy",
    MEMSET: "memset",
    RUNTIME: "cuda_api",
    SYNC: "gpu_sync",
}
"""The kind each table's rows become (the import statistics' ``kind``; NVTX's are several)."""
# Converted in this order, which is also the order of ties in the sort (rows of one table keep
# their file order).  These are read and converted in chunks; NVTX is read in chunks and
# converted whole; SYNC is read whole.
_CHUNKED: Final = (
    (KERNEL, KERNEL_COLUMNS),
    (GRAPH_TRACE, GRAPH_TRACE_COLUMNS),
    (MEMCPY, MEMCPY_COLUMNS),
    (MEMSET, MEMSET_COLUMNS),
    (RUNTIME, RUNTIME_COLUMNS),
)


def read_nsys_sqlite(path: Path) -> ImportResult:
    """Import an nsys SQLite export (``nsys export --type sqlite``).

    Returns the event table (columns of :mod:`traceq.schema`, times in ns on the export's own
    clock, sorted by ``start_ns`` then ``end_ns``), per-table stats, and the export's metadata.
    Raises :class:`~traceq.errors.CorruptTraceError` (not readable as SQLite),
    :class:`~traceq.errors.UnsupportedFormatError` (SQLite, but not an nsys export) or
    :class:`~traceq.errors.UnsupportedVersionError` (an nsys layout without required columns).
    """
    return load_nsys_export(path, source=path, fmt="nsys-sqlite")


def load_nsys_export(path: Path, *, source: Path, fmt: str) -> ImportResult:
    """:func:`read_nsys_sqlite` for ``path``, labelling rows, stats and meta with ``source``/``fmt``.

    Used by the ``.nsys-rep`` importer, whose rows come from a cached export but belong to the report.
    """
    if not path.is_file():
        raise InputNotFoundError("no such file", path=path, hint="check the path")
    db = open_export(path)
    try:
        return _Import(db, source=str(source), fmt=fmt).run()
    finally:
        db.close()


class _Import:
    """One import: the open export and what has been learnt from it so far."""

    def __init__(self, db: ExportDb, *, source: str, fmt: str) -> None:
        self.db = db
        self.source = source
        self.fmt = fmt
        self.counts: list[CategoryCount] = []
        self.rows = EventRows()
        self.warnings: list[str] = []
        self.ranks = pl.DataFrame()
        self.strings = StringLookup(db)
        self.gpu_rows = 0
        self.reading = FileReading.of(Path(source))
        self.rows_expected = 0
        self.rows_seen = 0

    def run(self) -> ImportResult:
        self._check_is_nsys()
        info = export_meta.read_export_info(self.db)
        self.ranks = export_meta.rank_map(self.db)
        tables = {name: self.db.table(name) for name in (*_GPU_ACTIVITY_TABLES, RUNTIME, SYNC, NVTX)}
        self._check_columns(tables, info)
        self.rows_expected = sum(self.db.row_span(t) for t in tables.values() if t is not None)

        # Sync rows are named after the API call with their process and correlation id: read them
        # first, so that the API chunks keep just the calls that some sync row refers to.
        sync_table = tables[SYNC]
        sync_raw = self.db.read(sync_table, SYNC_COLUMNS) if sync_table is not None else None
        sync_keys = _sync_correlations(sync_raw)
        api_calls: list[pl.DataFrame] = []

        copy_kinds = self._copy_kinds() if tables[MEMCPY] is not None else {}
        class_labels = self._event_class_labels() if tables[RUNTIME] is not None else {}
        convert: dict[str, Callable[[pl.DataFrame], Converted]] = {
            KERNEL: lambda f: convert_kernels(f, self.strings),
            GRAPH_TRACE: convert_graph_traces,
            MEMCPY: lambda f: convert_memcpys(f, copy_kinds),
            MEMSET: convert_memsets,
            RUNTIME: lambda f: convert_runtime(f, self.strings, class_labels),
        }
        for name, spec in _CHUNKED:
            table = tables[name]
            if table is None:
                continue
            with _TableCounts(self, name) as counts:
                for raw in self.db.read_chunks(table, spec):
                    frame = counts.add(raw.height, convert[name](raw))
                    if name == RUNTIME and sync_keys is not None:
                        api_calls.append(
                            frame.filter(pl.col("correlation").is_in(sync_keys)).select("_proc", "correlation", "name")
                        )
                    self._keep(frame, name)
        if sync_raw is not None:
            calls = pl.concat(api_calls) if api_calls else _NO_CALLS
            with _TableCounts(self, SYNC) as counts:
                self._keep(counts.add(sync_raw.height, convert_syncs(sync_raw, calls, info.release)), SYNC)
        if tables[NVTX] is not None:
            # Read in chunks on the read-ahead threads, converted whole: a domain's name is in its
            # own row (eventType 75), which any later range may refer to.
            nvtx_raw = pl.concat(list(self.db.read_chunks(tables[NVTX], NVTX_COLUMNS)))
            with _TableCounts(self, NVTX) as counts:
                self._keep(counts.add(nvtx_raw.height, convert_nvtx(nvtx_raw, self.strings)), NVTX)
        self.reading.finish()
        self._count_not_imported()
        self.db.done_reading()  # before the sort: the raw chunks' memory goes back as it is freed
        if self.db.lossy.replaced:
            self.warnings.append(
                f"{self.db.lossy.replaced} text values were not valid UTF-8; each invalid byte reads as U+FFFD"
            )
        if self.db.copy is not None:
            self.warnings.append("the export is in WAL mode with transactions not yet checkpointed; they were read")

        if self.gpu_rows == 0:
            self.warnings.insert(0, "no GPU activity in this capture (no kernels, memcpys or memsets)")
        events, dropped = drop_exact_duplicates(self._events())
        if dropped.height:  # each row's category is its table: the stats category
            tally = dropped.group_by("category").len().iter_rows()
            self.counts = list(count_duplicates(self.counts, {str(c): n for c, n in tally}))
        env = export_meta.launch_env(self.db)
        env_rank = self._env_rank(env, events)
        if env_rank is not None:
            events = events.with_columns(pl.lit(env_rank, dtype=pl.Int32).alias("rank"))
        meta = self._meta(info, events, env, env_rank)
        return ImportResult(frame=events, stats=ImportStats.of(self.counts), meta=meta)

    def _check_is_nsys(self) -> None:
        markers = ("StringIds", KERNEL, RUNTIME, NVTX, MEMCPY, MEMSET, SYNC, GRAPH_TRACE)
        if any(self.db.table(t) for t in markers):
            return
        if any(t.upper().startswith(("CUPTI_", "NVTX_")) for t in self.db.tables):
            return
        raise UnsupportedFormatError(
            "SQLite database is not an Nsight Systems export (no StringIds, CUPTI or NVTX tables)",
            path=self.db.path,
            hint="pass the output of nsys export --type sqlite, or the .nsys-rep report itself",
        )

    def _check_columns(self, tables: Mapping[str, str | None], info: export_meta.ExportInfo) -> None:
        for name, table in tables.items():
            if table is None:
                continue
            present = set(self.db.columns(table))
            missing = [c for c in REQUIRED_COLUMNS[name] if c not in present]
            if name == KERNEL and not {"demangledName", "shortName"} & present:
                missing.append("demangledName/shortName")
            if missing:
                raise UnsupportedVersionError(
                    f"{table} lacks required columns {', '.join(missing)}; this layout, from "
                    f"{info.version_label}, cannot be read",
                    path=self.db.path,
                    hint="export the .nsys-rep again with a current nsys (nsys export --type sqlite)",
                )

    def _keep(self, frame: pl.DataFrame, name: str) -> None:
        """Give converted rows of table ``name`` the event table's columns and types, and keep them."""
        if name in _GPU_ACTIVITY_TABLES:
            self.gpu_rows += frame.height
        extra = {"category": pl.lit(name, dtype=pl.Categorical), "source": pl.lit(self.source, dtype=pl.Categorical)}
        if self.ranks.height:
            extra["rank"] = pl.col("_proc").replace_strict(
                self.ranks["proc"], self.ranks["rank"], default=None, return_dtype=pl.Int32
            )
        self.rows.add(frame.with_columns(**extra))

    def _count_not_imported(self) -> None:
        for name in NOT_IMPORTED_TABLES:
            table = self.db.table(name)
            n = self.db.count(table) if table is not None else 0
            if n:
                self.counts.append(
                    CategoryCount(
                        source=self.source, category=name, events=n, rows=0, skipped={"table not imported": n}
                    )
                )

    def _copy_kinds(self) -> dict[int, tuple[str, bool]]:
        table = self.db.table("ENUM_CUDA_MEMCPY_OPER")
        return copy_kinds_from_enum(self.db.rows(table, ("id", "name")) if table else [])

    def _event_class_labels(self) -> dict[int, str]:
        table = self.db.table("ENUM_NSYS_EVENT_CLASS")
        rows = self.db.rows(table, ("id", "label")) if table else []
        return {int(r["id"]): str(r["label"]) for r in rows if isinstance(r.get("id"), int) and r.get("label")}

    def _events(self) -> pl.DataFrame:
        """Every kept row, sorted by start then end (ties in table and file order), validated."""
        return self.rows.sorted_table(chunk_rows=export_db.CHUNK_ROWS)

    def _env_rank(self, env: export_meta.LaunchEnv, events: pl.DataFrame) -> int | None:
        """The captured environment's ``RANK``, where it speaks for the whole export: no MPI rank
        table, and GPU work from at most one process (``nsys profile torchrun ...`` captures
        torchrun's environment, whose variables say nothing of the ranks it starts)."""
        if env.rank is None or self.ranks.height:
            return None
        gpu_pids = (
            events.lazy().filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS)).select(pl.col("pid").n_unique())
        )
        return env.rank if gpu_pids.collect().item() <= 1 else None  # lazily: no copy of the GPU rows

    def _meta(
        self, info: export_meta.ExportInfo, events: pl.DataFrame, env: export_meta.LaunchEnv, env_rank: int | None
    ) -> SourceMeta:
        properties = export_meta.properties(self.db, info)
        if env.rank is not None and env_rank is None:
            properties["env_rank"] = f"{env.rank} (not used: the export holds several processes or MPI ranks)"
        if env.local_rank is not None:
            properties["local_rank"] = str(env.local_rank)
        if self.db.resolved:
            properties["resolved_tables"] = ", ".join(f"{k} -> {v}" for k, v in sorted(self.db.resolved.items()))
        offset, why_unknown = export_meta.clock_offset_ns(self.db, info)
        if why_unknown:
            properties["clock_offset"] = f"unknown: {why_unknown}"
        gpus = export_meta.gpus(self.db)
        if not gpus:
            # No GPU table (trimmed exports lack it): list the devices the activity rows name, so
            # that consumers still know how many GPUs there were.
            devices = events["device"].drop_nulls().unique().sort().to_list()
            gpus = tuple(GpuInfo(device=int(d)) for d in devices)
            if devices:
                properties["gpu_info"] = "not in export; devices taken from activity rows"
        ranks = self.ranks["rank"].unique().to_list()
        return SourceMeta(
            path=self.source,
            format=self.fmt,
            format_version=info.product_version,
            producer="Nsight Systems",
            rank=int(ranks[0]) if len(ranks) == 1 else env_rank,
            world_size=env.world_size if env_rank is not None else None,
            clock_offset_ns=offset,
            gpus=gpus,
            properties=properties,
            warnings=tuple(dict.fromkeys([*self.warnings, *export_meta.diagnostics(self.db)])),
        )


class _TableCounts:
    """Accounts for the rows of one table, chunk by chunk, and records the totals on exit."""

    def __init__(self, owner: _Import, name: str) -> None:
        self.owner = owner
        self.name = name
        self.events = 0
        self.rows = 0
        self.unresolved = 0
        self.skipped: dict[str, int] = {}
        self.warnings: list[str] = []

    def __enter__(self) -> _TableCounts:
        return self

    def add(self, source_rows: int, converted: Converted) -> pl.DataFrame:
        """Drop the converted rows with an invalid interval, count them all; the rows kept."""
        frame = converted.frame.filter(_VALID)
        for reason, n in (*converted.skipped.items(), ("invalid interval", converted.frame.height - frame.height)):
            if n:
                self.skipped[reason] = self.skipped.get(reason, 0) + n
        self.events += source_rows
        self.rows += frame.height
        self.owner.rows_seen += source_rows  # the progress line's share of the file: rows read of all
        self.owner.reading.to_share(self.owner.rows_seen / max(self.owner.rows_expected, 1))
        self.unresolved += converted.unresolved
        self.warnings.extend(converted.warnings)
        return frame

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return
        skipped = dict(self.skipped)
        if "invalid interval" in skipped:  # listed last, as a single-read import lists it
            skipped["invalid interval"] = skipped.pop("invalid interval")
        self.owner.counts.append(
            CategoryCount(
                source=self.owner.source,
                category=self.name,
                events=self.events,
                rows=self.rows,
                skipped=skipped,
                kind=_KIND_OF_TABLE.get(self.name),
            )
        )
        if self.unresolved:
            what = "kernels" if self.name == KERNEL else "CUDA API calls"
            self.owner.warnings.append(f"{self.unresolved} {what} have no name in StringIds")
        self.owner.warnings.extend(self.warnings)


_VALID: Final = (
    pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
)
_NO_CALLS: Final = pl.DataFrame(schema={"_proc": pl.Int64, "correlation": pl.Int64, "name": pl.Categorical})


def _sync_correlations(sync_raw: pl.DataFrame | None) -> pl.Series | None:
    """The correlation ids of the sync rows (None without a sync table)."""
    if sync_raw is None:
        return None
    return sync_raw["correlationId"].drop_nulls().unique().implode()
