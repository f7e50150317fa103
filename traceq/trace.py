"""The :class:`Trace`: one event table (of one file or a whole job), its statistics and metadata.

:func:`load` turns paths (files, directories, several files, a traceq Parquet file) into a
``Trace``.  Several sources are concatenated in rank order; every row keeps its ``source`` and
``rank``.  A Kineto file's rank comes from its ``distributedInfo``; otherwise from a rank number
in the file name (``rank3``, ``rank-3``, ``rank_3``), otherwise from the file's position, with a
warning.  Two files that claim one rank are an error naming both.

Each source file's imported table goes through the columnar cache (:mod:`traceq.cache`) unless
``load`` is told otherwise; a cache entry is a traceq Parquet file, encoded and decoded here by the
same functions as :meth:`Trace.to_parquet` and :func:`read_parquet`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from traceq import schema
from traceq.cache import Cache, CachedTable
from traceq.errors import DuplicateRankError, InputNotFoundError, TraceqError, UnsupportedFormatError
from traceq.importers import Format, ImportResult, detect_format, read_file
from traceq.meta import GpuInfo, SourceMeta
from traceq.stats import ImportStats

PARQUET_METADATA_KEY = b"traceq"
"""Key of the Parquet key-value metadata that holds sources and import statistics."""

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".qdrep", ".parquet")
"""File names a directory scan picks up (case-insensitive)."""

_SQLITE_TYPES: dict[pl.DataType, type] = {
    pl.String(): str,
    pl.Int64(): int,
    pl.Int32(): int,
    pl.Boolean(): bool,
}

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class TraceMeta:
    """What the sources say about themselves, merged: formats, GPUs, ranks, warnings."""

    sources: tuple[SourceMeta, ...]

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(sorted({s.format for s in self.sources}))

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({s.rank for s in self.sources if s.rank is not None}))

    @property
    def gpus(self) -> tuple[GpuInfo, ...]:
        """Distinct GPUs described by the sources (by device index and name)."""
        seen: dict[tuple[int, str | None], GpuInfo] = {}
        for src in self.sources:
            for gpu in src.gpus:
                seen.setdefault((gpu.device, gpu.name), gpu)
        return tuple(seen[k] for k in sorted(seen, key=lambda k: (k[0], k[1] or "")))

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(f"{s.path}: {w}" for s in self.sources for w in s.warnings)

    def to_dict(self) -> dict[str, Any]:
        return {"sources": [s.to_dict() for s in self.sources]}


@dataclass(frozen=True)
class Trace:
    """An imported trace.

    ``events`` is the unified event table (columns in :mod:`traceq.schema`), sorted by source (in
    rank order), then ``start_ns``, then ``end_ns``.
    """

    events: pl.DataFrame
    import_stats: ImportStats
    meta: TraceMeta

    @property
    def kernels(self) -> pl.DataFrame:
        """Rows of kind ``kernel``."""
        return self.events.filter(pl.col("kind") == "kernel")

    @property
    def api(self) -> pl.DataFrame:
        """Rows of kind ``cuda_api`` (CUDA/HIP runtime and driver calls)."""
        return self.events.filter(pl.col("kind") == "cuda_api")

    @property
    def gpu_activity(self) -> pl.DataFrame:
        """Kernels, memcpys and memsets: what keeps a GPU busy."""
        return self.events.filter(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS))

    @property
    def ranges(self) -> pl.DataFrame:
        """NVTX ranges and user annotations."""
        return self.events.filter(pl.col("kind") == "range")

    def kind_counts(self) -> dict[str, int]:
        """Rows per kind, every kind listed (zero where absent)."""
        counts = self.events.group_by("kind").len()
        found = {str(k): int(n) for k, n in zip(counts["kind"], counts["len"], strict=True)}
        return {k: found.get(k, 0) for k in schema.KINDS}

    def to_parquet(self, path: str | Path) -> Path:
        """Write the table (zstd Parquet) with sources and import statistics in its metadata."""
        out = Path(path)
        pq.write_table(self.to_arrow(), out, compression="zstd")
        return out

    def to_arrow(self) -> pa.Table:
        """The event table as Arrow, with sources and import statistics under the ``traceq`` metadata key."""
        table = self.events.to_arrow()
        payload = {
            "schema_version": schema.SCHEMA_VERSION,
            "sources": [s.to_dict() for s in self.meta.sources],
            "import_stats": self.import_stats.to_list(),
        }
        metadata = dict(table.schema.metadata or {})
        metadata[PARQUET_METADATA_KEY] = json.dumps(payload, sort_keys=True).encode()
        return table.replace_schema_metadata(metadata)

    def to_sqlite(self, path: str | Path) -> Path:
        """Write an SQLite database (sqlite-utils) with tables ``events``, ``import_stats``, ``sources``.

        Categorical columns become TEXT; the file opens in ``sqlite3`` or Datasette.
        """
        import sqlite_utils

        out = Path(path)
        db = sqlite_utils.Database(out)
        try:
            events = self.events.with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String))
            columns = {name: _SQLITE_TYPES[dtype] for name, dtype in events.schema.items()}
            table = db.table("events")
            table.create(columns)
            for batch in events.iter_slices(50_000):
                table.insert_all(batch.iter_rows(named=True), batch_size=50_000)
            db.table("import_stats").insert_all(
                {**c.to_dict(), "skipped": json.dumps(dict(c.skipped), sort_keys=True)}
                for c in self.import_stats.counts
            )
            db.table("sources").insert_all(
                {k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for k, v in s.to_dict().items()}
                for s in self.meta.sources
            )
        finally:
            db.close()
        return out


def load(
    paths: str | Path | Sequence[str | Path],
    *,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    jobs: int | None = None,
    client: Any = None,
    scheduler: str | None = None,
) -> Trace:
    """Import a trace file, a directory of traces, several files, or a traceq Parquet file.

    ``fmt`` forces the format of every file instead of sniffing it.  ``cache``: ``True`` uses the
    columnar cache in ``$TRACEQ_CACHE_DIR`` or the user cache directory (see
    :func:`traceq.cache.default_cache_dir`), a :class:`~traceq.cache.Cache` uses that one, and
    ``False`` imports every source afresh and stores nothing.  Several files import in parallel
    (:mod:`traceq.parallel`): ``jobs`` processes (``None``: one per core; ``1``: in this
    process), or on a Dask cluster (a ``distributed.Client`` as ``client``, or its address as
    ``scheduler``).  The result is the same either way.
    """
    files = expand_paths(paths)
    if len(files) == 1 and client is None and scheduler is None:
        store = Cache.default() if cache is True else cache if isinstance(cache, Cache) else None
        return _read_one(files[0], fmt, store)  # must stay direct: each parallel task calls load([file])
    from traceq.parallel import import_sources  # lazy: traceq.parallel imports this module

    parts = import_sources(files, fmt=fmt, jobs=jobs, client=client, scheduler=scheduler, load_kwargs={"cache": cache})
    if len(parts) == 1:
        return parts[0]
    return _combine(parts)


def expand_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """The trace files named by ``paths``: files as given, directories by :func:`iter_trace_files`.

    Raises ``InputNotFoundError`` for no input, a missing path or a directory without traces.
    """
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise InputNotFoundError("no input given", hint="pass a trace file or a directory of traces")
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = list(iter_trace_files(path))
            if not found:
                raise InputNotFoundError(
                    "directory holds no trace files",
                    path=path,
                    hint=f"expected files ending in {', '.join(TRACE_SUFFIXES)}",
                )
            files.extend(found)
        elif not path.exists():
            raise InputNotFoundError("no such file or directory", path=path, hint="check the path")
        else:
            files.append(path)
    return files


def _is_trace_name(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(TRACE_SUFFIXES)


def _read_one(path: Path, fmt: Format | None, cache: Cache | None) -> Trace:
    fmt = fmt or detect_format(path)
    if fmt == "parquet":
        return read_parquet(path)
    if cache is None or (key := cache.key(path, fmt)) is None:
        return _from_result(read_file(path, fmt))
    hit = cache.get(key)
    cached = None if hit is None else _from_cached(hit, path)
    if cached is not None:
        return cached
    trace = _from_result(read_file(path, fmt))
    cache.put(key, trace.to_arrow())
    return trace


def _from_result(result: ImportResult) -> Trace:
    events = schema.validate(schema.to_polars(result.events))
    return Trace(events=events, import_stats=result.stats, meta=TraceMeta((result.meta,)))


def _from_cached(hit: CachedTable, path: Path) -> Trace | None:
    """The trace in a cache entry, labelled with ``path`` as given now; ``None`` if it does not decode."""
    try:
        trace = _decode(hit.events, hit.metadata, path)
    except (TraceqError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError, pl.exceptions.PanicException):
        return None  # a damaged entry is only a miss
    if len(trace.meta.sources) != 1:
        return None
    return _relabelled(trace, trace.meta.sources[0].path, str(path))


def _relabelled(trace: Trace, old: str, new: str) -> Trace | None:
    """``trace`` with the source path ``old`` (as given when the entry was made) renamed ``new``.

    ``None`` when the rows do not all name ``old`` (then the entry is not used).
    """
    if old == new:
        return trace
    events = trace.events
    if events.height:
        labels = events.get_column("source").unique()
        if labels.len() != 1 or labels[0] != old:
            return None
        events = events.with_columns(pl.lit(new, dtype=pl.Categorical).alias("source"))
    stats = ImportStats(tuple(replace(c, source=new) if c.source == old else c for c in trace.import_stats.counts))
    sources = tuple(replace(s, path=new) if s.path == old else s for s in trace.meta.sources)
    return Trace(events=events, import_stats=stats, meta=TraceMeta(sources))


def read_parquet(path: Path) -> Trace:
    """Load a Parquet file written by :meth:`Trace.to_parquet`, unchanged."""
    try:
        metadata = pq.read_metadata(path).metadata or {}
        events = pl.read_parquet(path)
    except (pa.ArrowException, pl.exceptions.PolarsError, OSError) as exc:
        raise UnsupportedFormatError(
            f"Parquet file cannot be read ({exc})", path=path, hint="write it again with traceq convert"
        ) from exc
    return _decode(events, {k.decode(): v.decode() for k, v in metadata.items()}, path)


def _decode(events: pl.DataFrame, metadata: Mapping[str, str], path: Path) -> Trace:
    """A trace from a traceq Parquet table and its key-value metadata (the format of :meth:`Trace.to_arrow`)."""
    raw = metadata.get(PARQUET_METADATA_KEY.decode())
    if raw is None:
        raise UnsupportedFormatError(
            "Parquet file was not written by traceq", path=path, hint="convert the original trace with traceq convert"
        )
    payload = json.loads(raw)
    if payload.get("schema_version") != schema.SCHEMA_VERSION:
        raise UnsupportedFormatError(
            f"Parquet file has event-table schema version {payload.get('schema_version')}, "
            f"this traceq reads {schema.SCHEMA_VERSION}",
            path=path,
            hint="convert the original trace again with this traceq",
        )
    if events.schema != schema.POLARS_SCHEMA:
        events = schema.conform(events)
    events = schema.validate(events)
    sources = tuple(SourceMeta.from_dict(s) for s in payload["sources"])
    return Trace(events=events, import_stats=ImportStats.from_list(payload["import_stats"]), meta=TraceMeta(sources))


def _combine(parts: list[Trace]) -> Trace:
    """Concatenate per-file traces, assigning ranks to single-rank files that do not state one."""
    assigned = [assign_rank(part, position) for position, part in enumerate(parts)]
    assigned = [assigned[i] for i in job_order([t.meta.sources for t in assigned])]
    events = pl.concat([t.events for t in assigned], how="vertical")
    stats = ImportStats.of(c for t in assigned for c in t.import_stats.counts)
    sources = tuple(s for t in assigned for s in t.meta.sources)
    return Trace(events=events, import_stats=stats, meta=TraceMeta(sources))


def job_order(sources: Sequence[Sequence[SourceMeta]]) -> list[int]:
    """The order in which the parts of a job (one file each, its sources' metadata given, ranks
    already assigned) are concatenated: by their lowest rank, files without a rank last, ties in
    input order.  Raises ``DuplicateRankError`` naming the first two files, in input order, that
    claim one rank."""
    claimed: dict[int, str] = {}
    for part in sources:
        for src in part:
            if src.rank is None:
                continue
            if src.rank in claimed and claimed[src.rank] != src.path:
                raise DuplicateRankError(
                    f"rank {src.rank} is claimed by both {claimed[src.rank]} and {src.path}",
                    hint="pass the files of one job only, once each",
                )
            claimed[src.rank] = src.path
    lowest = [min((s.rank for s in part if s.rank is not None), default=1 << 31) for part in sources]
    return sorted(range(len(sources)), key=lambda i: lowest[i])


def assign_rank(part: Trace, position: int) -> Trace:
    """Give a single-source trace without a rank one from its file name, else its ``position``
    among the job's files (with a warning in its metadata); other traces are returned as they are."""
    if len(part.meta.sources) != 1 or part.meta.sources[0].rank is not None:
        return part
    src = part.meta.sources[0]
    pids = part.events.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())["pid"].unique()
    if pids.len() > 1 and src.format.startswith("nsys"):
        return part  # a multi-process nsys export: ranks are per process, not per file
    match = _RANK_IN_NAME.search(Path(src.path).name)
    if match:
        rank = int(match.group(1))
        src = replace(src, rank=rank)
    else:
        rank = position
        src = replace(
            src,
            rank=rank,
            warnings=(*src.warnings, f"no rank in the trace or its file name; assumed rank {rank} from its position"),
        )
    events = part.events.with_columns(pl.lit(rank, dtype=pl.Int32).alias("rank"))
    return Trace(events=events, import_stats=part.import_stats, meta=TraceMeta((src,)))


def iter_trace_files(directory: Path) -> Iterable[Path]:
    """Trace files directly inside ``directory``, sorted by name."""
    return sorted(p for p in directory.iterdir() if p.is_file() and _is_trace_name(p.name))
