"""Loading: paths in, a :class:`~traceq.trace.Trace` out.

:func:`load` turns paths (files, directories, several files, a traceq Parquet file) into one
``Trace``: it expands directories (:func:`expand_paths`), sniffs each file's format (or takes the one
it is told), reads each file through the columnar cache (:mod:`traceq.cache`) unless told otherwise,
and puts several files together as one job.  Several files are read where :mod:`traceq.executors`
says (in this process, a process pool, a Dask cluster); each read is :func:`load_file` of one file,
which never starts an executor of its own.

An input that is not a regular file (a FIFO, ``/dev/stdin``, a device) is refused before it is
opened, unless asked for (``special_files=True``, or ``$TRACEQ_READ_SPECIAL_FILES=1``): then it is
copied, up to :data:`SPECIAL_FILE_MAX_BYTES`, into a temporary file that is read instead (and not
cached), its rows and errors still naming the path given.

A job's files are concatenated in rank order; every row keeps its ``source`` and ``rank``.  A
Kineto file's rank comes from its ``distributedInfo``; otherwise from a rank number in the file
name (``rank3``, ``rank-3``, ``rank_3``), otherwise from the file's position, with a warning
(:func:`assign_rank`).  Two files that claim one rank are an error naming both (:func:`job_order`).

:class:`JobFile` is one file of a job as a worker reads it (its position among the job's files
decides its rank where nothing else does); the report pipeline reads a job file by file with it.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import polars as pl

from traceq import schema
from traceq.cache import Cache, CachedTable
from traceq.errors import DuplicateRankError, InputNotFoundError, LimitExceededError, TraceqError
from traceq.executors import ExecutorSpec, on_cluster, open_executor
from traceq.importers import (
    SPECIAL_FILES_ENV,
    Format,
    ImportResult,
    check_regular_file,
    detect_format,
    read_file,
    reads_other_files,
    special_file_kind,
)
from traceq.literal_columns import one_valued
from traceq.meta import SourceMeta
from traceq.stats import ImportStats
from traceq.trace import Trace, TraceMeta, decode_table, read_parquet

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".qdrep", ".parquet")
"""File names a directory scan picks up (case-insensitive)."""

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)

SPECIAL_FILE_MAX_BYTES: Final = 64 << 30
"""The most bytes read from an input that is not a regular file (a stream may never end)."""
_COPY_STEP_BYTES: Final = 1 << 20


def load(
    paths: str | Path | Sequence[str | Path],
    *,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
    special_files: bool | None = None,
    max_inflate_ratio: float | None = None,
) -> Trace:
    """Import a trace file, a directory of traces, several files, or a traceq Parquet file.

    ``fmt`` forces the format of every file instead of sniffing it.  ``cache``: ``True`` uses the
    columnar cache in ``$TRACEQ_CACHE_DIR`` or the user cache directory (see
    :func:`traceq.cache.default_cache_dir`), a :class:`~traceq.cache.Cache` uses that one, and
    ``False`` imports every source afresh and stores nothing.  ``executor`` says where several
    files are imported (:data:`traceq.executors.ExecutorSpec`: ``None`` one process per core,
    ``1`` this process, ``N`` processes, a Dask scheduler address or ``distributed.Client``).  The
    result is the same either way.  ``special_files`` reads inputs that are not regular files (see
    the module docstring; default ``$TRACEQ_READ_SPECIAL_FILES``); ``max_inflate_ratio`` bounds what a
    gzip file may inflate to (default ``$TRACEQ_MAX_INFLATE_RATIO``, else 100 times its size; see
    ``docs/importers.md``).
    """
    files = expand_paths(paths)
    if len(files) == 1 and not on_cluster(executor):
        return load_file(
            files[0], fmt=fmt, cache=cache, special_files=special_files, max_inflate_ratio=max_inflate_ratio
        )
    with open_executor(executor, files) as tasks:
        parts = tasks.map(_load_task, [(f, (fmt, cache, special_files, max_inflate_ratio)) for f in files])
    if len(parts) == 1:
        return parts[0]
    return combine(parts)


def _load_task(
    path: Path,
    fmt: Format | None,
    cache: Cache | bool,
    special_files: bool | None = None,
    max_inflate_ratio: float | None = None,
) -> Trace:
    """The import task of :func:`load`: one file, on whichever worker."""
    return load_file(path, fmt=fmt, cache=cache, special_files=special_files, max_inflate_ratio=max_inflate_ratio)


@dataclass(frozen=True)
class JobFile:
    """One file of a job of ``files`` files, as a worker reads it: loaded like :func:`load` of one
    file, and given a rank from its name or its ``position`` where the trace states none (only when
    the job has several files, as :func:`load` does)."""

    path: Path
    position: int
    files: int
    fmt: Format | None = None
    cache: Cache | bool = True
    special_files: bool | None = None
    max_inflate_ratio: float | None = None

    def read(self) -> Trace:
        trace = load_file(
            self.path,
            fmt=self.fmt,
            cache=self.cache,
            special_files=self.special_files,
            max_inflate_ratio=self.max_inflate_ratio,
        )
        return assign_rank(trace, self.position) if self.files > 1 else trace


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
            if path.is_symlink():
                raise InputNotFoundError(
                    "is a symbolic link that leads nowhere (its target is missing, or links loop)",
                    path=path,
                    hint="check where the link points",
                )
            raise InputNotFoundError("no such file or directory", path=path, hint="check the path")
        else:
            files.append(path)
    return files


def iter_trace_files(directory: Path) -> Iterable[Path]:
    """Trace files directly inside ``directory``, sorted by name."""
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.lower().endswith(TRACE_SUFFIXES))


def load_file(
    path: Path,
    *,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    special_files: bool | None = None,
    max_inflate_ratio: float | None = None,
) -> Trace:
    """One file as a ``Trace``: a traceq Parquet file read back, any other format imported through
    the cache (``cache``, ``special_files`` and ``max_inflate_ratio`` as in :func:`load`)."""
    if special_file_kind(path) is not None:
        if not _reads_special_files(special_files):
            check_regular_file(path)  # raises, naming what it is and how to read it anyway
        return _load_special_file(path, fmt, max_inflate_ratio)
    store = Cache.default() if cache is True else cache if isinstance(cache, Cache) else None
    if fmt is not None:
        _check_readable(path)  # detect_format, skipped, would have said so; an importer may not
    fmt = fmt or detect_format(path)
    if fmt == "parquet":
        return read_parquet(path)
    if store is None or reads_other_files(path, fmt) or (key := store.key(path, fmt)) is None:
        # (a file read with others beside it, an SQLite -wal, is not cached: its key would not cover them)
        return _from_result(read_file(path, fmt, max_inflate_ratio=max_inflate_ratio))
    hit = store.get(key)
    cached = None if hit is None else _from_cached(hit, path)
    if cached is not None:
        return cached
    trace = _from_result(read_file(path, fmt, max_inflate_ratio=max_inflate_ratio))
    if store.write_behind:
        store.put_behind(key, trace.events, trace.file_metadata())  # written by store.wait(), after the output
    else:
        store.put(key, trace.events, trace.file_metadata())
    return trace


def _check_readable(path: Path) -> None:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))  # O_NONBLOCK: a FIFO does not block here
    except FileNotFoundError as exc:
        raise InputNotFoundError("no such file or directory", path=path, hint="check the path") from exc
    except IsADirectoryError as exc:
        raise InputNotFoundError("is a directory", path=path, hint="pass the trace files inside it") from exc
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path, hint="check permissions") from exc


def _reads_special_files(asked: bool | None) -> bool:
    if asked is not None:
        return asked
    return os.environ.get(SPECIAL_FILES_ENV, "").strip().lower() in ("1", "true", "yes")


def _load_special_file(path: Path, fmt: Format | None, max_inflate_ratio: float | None) -> Trace:
    """An input that is not a regular file, copied into a temporary file (of the same name, for the
    suffix rules) and read from there, uncached; rows, statistics and errors name ``path``."""
    with tempfile.TemporaryDirectory(prefix="traceq-special-") as folder:
        copy_path = Path(folder) / (path.name or "input")
        try:
            _copy_bounded(path, copy_path)
            kind = fmt or detect_format(copy_path)
            if kind == "parquet":
                return read_parquet(copy_path)
            trace = _from_result(read_file(copy_path, kind, max_inflate_ratio=max_inflate_ratio))
        except TraceqError as exc:
            if exc.path != str(copy_path):
                raise
            raise type(exc)(exc.message, path=path, hint=exc.hint) from exc
    labelled = _relabelled(trace, str(copy_path), str(path))
    assert labelled is not None  # every row of a fresh import names the file it came from
    return labelled


def _copy_bounded(source: Path, target: Path) -> None:
    """Copy ``source`` (a stream) to ``target``, at most :data:`SPECIAL_FILE_MAX_BYTES` of it."""
    copied = 0
    try:
        with source.open("rb") as reader, target.open("wb") as writer:
            while piece := reader.read(_COPY_STEP_BYTES):
                copied += len(piece)
                if copied > SPECIAL_FILE_MAX_BYTES:
                    raise LimitExceededError(
                        f"holds more than {SPECIAL_FILE_MAX_BYTES >> 30} GiB, the most traceq reads from a stream",
                        path=source,
                        hint="save the trace to a regular file and pass that",
                    )
                writer.write(piece)
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=source, hint="check the path") from exc


def _from_result(result: ImportResult) -> Trace:
    events = schema.validate(result.frame)
    return Trace(events=events, import_stats=result.stats, meta=TraceMeta((result.meta,)))


def _from_cached(hit: CachedTable, path: Path) -> Trace | None:
    """The trace in a cache entry, labelled with ``path`` as given now; ``None`` if it does not decode."""
    try:
        trace = decode_table(hit.events, hit.metadata, path)
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
        # (one query, where reading the column would write a literal source out row by row)
        if one_valued(events, ("source",)).get("source") != old:
            return None
        events = events.with_columns(pl.lit(new, dtype=pl.Categorical).alias("source"))
    stats = ImportStats(tuple(replace(c, source=new) if c.source == old else c for c in trace.import_stats.counts))
    sources = tuple(replace(s, path=new) if s.path == old else s for s in trace.meta.sources)
    return Trace(events=events, import_stats=stats, meta=TraceMeta(sources))


def combine(parts: list[Trace]) -> Trace:
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
