"""The :class:`Trace`: one event table (of one file or a whole job), its statistics and metadata, and its codecs.

A ``Trace`` is written as a traceq Parquet file (:meth:`Trace.to_parquet`; the columnar cache's
entries are the same bytes, :meth:`Trace.to_arrow`) and read back by :func:`read_parquet` /
:func:`decode_table`, unchanged; :meth:`Trace.to_sqlite` writes it for ``sqlite3`` and Datasette
(through :mod:`traceq.sqlite_ingest`).
Turning paths into a ``Trace`` is :mod:`traceq.loading`'s job.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from traceq import schema, sealed_parquet
from traceq.errors import CorruptTraceError, UnsupportedFormatError
from traceq.literal_columns import as_literals
from traceq.meta import GpuInfo, SourceMeta
from traceq.pandas_frames import to_pandas
from traceq.sqlite_ingest import write_sqlite
from traceq.stats import ImportStats

if TYPE_CHECKING:
    import pandas

PARQUET_METADATA_KEY = b"traceq"
"""Key of the Parquet key-value metadata that holds sources and import statistics."""
SEAL_PREFIX = b"traceq"
"""Prefix of the Parquet key-value metadata key of a :meth:`Trace.to_parquet` file's digest of its
own bytes (``traceq.sha256``; ``traceq.blake2b`` in files written before traceq sealed with SHA-256)."""


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

    def _view(self, keep: pl.Expr) -> pl.DataFrame:
        """The rows ``keep`` selects, with ``name`` as String (``.str`` works on it; the event table
        keeps it Categorical, which costs no memory per row) and a ``dur_ns`` column after ``end_ns``."""
        view = self.events.filter(keep).with_columns(pl.col("name").cast(pl.String))
        at = view.columns.index("end_ns") + 1
        return view.insert_column(at, (view.get_column("end_ns") - view.get_column("start_ns")).alias("dur_ns"))

    @property
    def kernels(self) -> pl.DataFrame:
        """Rows of kind ``kernel`` (``name`` String, plus ``dur_ns``)."""
        return self._view(pl.col("kind") == "kernel")

    @property
    def api(self) -> pl.DataFrame:
        """Rows of kind ``cuda_api`` (CUDA/HIP runtime and driver calls; ``name`` String, plus ``dur_ns``)."""
        return self._view(pl.col("kind") == "cuda_api")

    @property
    def gpu_activity(self) -> pl.DataFrame:
        """Kernels, memcpys and memsets: what keeps a GPU busy (``name`` String, plus ``dur_ns``)."""
        return self._view(pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS))

    @property
    def ranges(self) -> pl.DataFrame:
        """NVTX ranges and user annotations on a CPU thread (``ProfilerStep#N`` once: its GPU-side
        copy is in :attr:`gpu_ranges`); ``name`` String, plus ``dur_ns``."""
        return self._view((pl.col("kind") == "range") & pl.col("tid").is_not_null())

    @property
    def gpu_ranges(self) -> pl.DataFrame:
        """The GPU-side copies of ranges (Kineto ``gpu_user_annotation``: ``kind == "range"`` with a
        ``device`` and no ``tid``); ``name`` String, plus ``dur_ns``."""
        return self._view((pl.col("kind") == "range") & pl.col("tid").is_null() & pl.col("device").is_not_null())

    @property
    def ops(self) -> pl.DataFrame:
        """Rows of kind ``cpu_op`` (PyTorch operators); ``name`` String, plus ``dur_ns``."""
        return self._view(pl.col("kind") == "cpu_op")

    def kind_counts(self) -> dict[str, int]:
        """Rows per kind, every kind listed (zero where absent)."""
        counts = self.events.group_by("kind").len()
        found = {str(k): int(n) for k, n in zip(counts["kind"], counts["len"], strict=True)}
        return {k: found.get(k, 0) for k in schema.KINDS}

    def _repr_html_(self) -> str:
        """In a Jupyter cell: the sources, rows per kind and import warnings (what ``traceq info``
        shows), every string from the trace escaped.  ``traceq.report(trace)`` shows the analysis;
        a trace does not analyse itself to be displayed."""
        e = html.escape
        sources = "".join(
            f"<li><code>{e(s.path)}</code> {e(s.format)}"
            + (f" ({e(s.producer)})" if s.producer else "")
            + ("" if s.rank is None else f", rank {int(s.rank)}")
            + "</li>"
            for s in self.meta.sources
        )
        kinds = "".join(
            f"<tr><td>{e(k)}</td><td style='text-align: right'>{n:,}</td></tr>"
            for k, n in self.kind_counts().items()
            if n
        )
        warnings = "".join(f"<li>{e(w)}</li>" for w in self.meta.warnings)
        return (
            f"<div><strong>traceq Trace</strong>: {self.events.height:,} rows from "
            f"{len(self.meta.sources)} source(s)<ul>{sources}</ul>"
            f"<table><thead><tr><th>kind</th><th>rows</th></tr></thead><tbody>{kinds}</tbody></table>"
            + (f"<p>warnings:</p><ul>{warnings}</ul>" if warnings else "")
            + "<p><code>traceq.report(trace)</code> shows where the step time went.</p></div>"
        )

    def to_pandas(self) -> pandas.DataFrame:
        """The event table as a pandas DataFrame (the ``traceq[pandas]`` extra): integer columns as
        pandas' nullable ``Int64``/``Int32`` (null is ``pd.NA``), Categorical columns ``category``
        (:func:`traceq.pandas_frames.to_pandas`)."""
        return to_pandas(self.events)

    def to_parquet(self, path: str | Path) -> Path:
        """Write the table (zstd Parquet) with sources and import statistics in its metadata, sealed
        with a digest of its own bytes (:mod:`traceq.sealed_parquet`) that :func:`read_parquet` checks."""
        out = Path(path)
        table = self.to_arrow()
        metadata = dict(table.schema.metadata or {})
        metadata[sealed_parquet.key(SEAL_PREFIX)] = sealed_parquet.PLACEHOLDER
        with out.open("w+b") as fh:
            # Page checksums too, for readers other than traceq's.
            pq.write_table(table.replace_schema_metadata(metadata), fh, compression="zstd", write_page_checksum=True)
            if sealed_parquet.seal(fh):
                return out
        # (the placeholder's bytes were found twice in the footer: never seen; written unsealed)
        pq.write_table(table, out, compression="zstd", write_page_checksum=True)
        return out

    def to_arrow(self) -> pa.Table:
        """The event table as Arrow, with sources and import statistics under the ``traceq`` metadata key."""
        table = self.events.to_arrow()
        metadata = dict(table.schema.metadata or {})
        metadata.update({k.encode(): v.encode() for k, v in self.file_metadata().items()})
        return table.replace_schema_metadata(metadata)

    def file_metadata(self) -> dict[str, str]:
        """What a traceq Parquet file holds beside the event table: the sources and the import
        statistics, as JSON under the ``traceq`` key."""
        payload = {
            "schema_version": schema.SCHEMA_VERSION,
            "sources": [s.to_dict() for s in self.meta.sources],
            "import_stats": self.import_stats.to_list(),
        }
        return {PARQUET_METADATA_KEY.decode(): json.dumps(payload, sort_keys=True)}

    def to_sqlite(self, path: str | Path) -> Path:
        """Write an SQLite database with tables ``events``, ``import_stats``, ``sources``
        (:mod:`traceq.sqlite_ingest`: one transaction, indexes on ``start_ns``, ``kind``, ``name``).

        Categorical columns become TEXT, booleans INTEGER; the file opens in ``sqlite3`` or
        Datasette.  ``traceq convert -o x.db`` writes the named tables of ``docs/sql.md`` instead."""
        out = Path(path)
        write_sqlite(out, {"events": self.events.to_arrow(), **self.metadata_tables()}, indexes=EVENT_INDEXES)
        return out

    def metadata_tables(self) -> dict[str, pa.Table]:
        """The import statistics (one row per source category; ``skipped`` as JSON text) and the
        sources (one row per file; nested fields as JSON text), as Arrow tables."""
        stats = [
            {**c.to_dict(), "skipped": json.dumps(dict(c.skipped), sort_keys=True)} for c in self.import_stats.counts
        ]
        sources = [
            {k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for k, v in s.to_dict().items()}
            for s in self.meta.sources
        ]
        return {
            "import_stats": pl.DataFrame(stats, schema=_STATS_SCHEMA).to_arrow(),
            "sources": pl.DataFrame(sources, schema=_SOURCES_SCHEMA).to_arrow(),
        }


EVENT_INDEXES: Final = {"events": ("start_ns", "kind", "name")}
"""The indexes of an SQLite file's event table: by time, kind and name."""

_STATS_SCHEMA: Final = {
    "source": pl.String,
    "category": pl.String,
    "kind": pl.String,
    "events": pl.Int64,
    "rows": pl.Int64,
    "skipped": pl.String,
}
_SOURCES_SCHEMA: Final = {
    "path": pl.String,
    "format": pl.String,
    "format_version": pl.String,
    "producer": pl.String,
    "rank": pl.Int64,
    "world_size": pl.Int64,
    "clock_offset_ns": pl.Int64,
    "gpus": pl.String,
    "properties": pl.String,
    "warnings": pl.String,
}


def read_parquet(path: Path) -> Trace:
    """Load a Parquet file written by :meth:`Trace.to_parquet`, unchanged.

    A file that is not Parquet, or that is damaged, is a :class:`~traceq.errors.CorruptTraceError`
    naming it: the digest :meth:`Trace.to_parquet` seals it with is checked against every byte (a
    file written before the seal has only its pages' checksums, which are verified too); one that
    traceq did not write, or of another schema version, an :class:`~traceq.errors.UnsupportedFormatError`.
    """
    try:
        data = path.read_bytes()
        stored = pq.read_metadata(pa.BufferReader(data)).metadata or {}
        if sealed_parquet.check(data, stored, SEAL_PREFIX) is False:
            raise ValueError("its content does not match its digest")
        # pyarrow's reader, which verifies page checksums (of files written before the seal) and
        # reports damage as errors (polars' may panic on a damaged page).
        table = pq.read_table(pa.BufferReader(data), page_checksum_verification=True)
        # The file's key-value metadata (a polars-written file, as the cache's entries are, keeps
        # it there and not in the Arrow schema that pyarrow's reader returns).
        seals = sealed_parquet.keys(SEAL_PREFIX)
        metadata = {k.decode(): v.decode() for k, v in stored.items() if k not in seals}
        events = pl.from_arrow(table.replace_schema_metadata(None))
        assert isinstance(events, pl.DataFrame)
        events = as_literals(events)  # as an import makes them (the file stores every row)
    except (pa.ArrowException, pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError, ValueError) as exc:
        raise _damaged(path, exc) from exc
    return decode_table(events, metadata, path)


def decode_table(events: pl.DataFrame, metadata: Mapping[str, str], path: Path) -> Trace:
    """A trace from a traceq Parquet table and its key-value metadata (the format of :meth:`Trace.to_arrow`).

    Raises :class:`~traceq.errors.UnsupportedFormatError` for a table traceq did not write or of
    another schema version, :class:`~traceq.errors.CorruptTraceError` (naming ``path``) for one whose
    metadata or rows are damaged (they break the event-table contract)."""
    raw = metadata.get(PARQUET_METADATA_KEY.decode())
    if raw is None:
        raise UnsupportedFormatError(
            "Parquet file was not written by traceq", path=path, hint="convert the original trace with traceq convert"
        )
    try:
        payload = json.loads(raw)
        version = payload.get("schema_version")
    except (ValueError, AttributeError) as exc:
        raise _damaged(path, exc) from exc
    if version != schema.SCHEMA_VERSION:
        raise UnsupportedFormatError(
            f"Parquet file has event-table schema version {version}, this traceq reads {schema.SCHEMA_VERSION}",
            path=path,
            hint="convert the original trace again with this traceq",
        )
    try:
        if events.schema != schema.POLARS_SCHEMA:
            events = schema.conform(events)
        events = schema.validate(events)
        sources = tuple(SourceMeta.from_dict(s) for s in payload["sources"])
        stats = ImportStats.from_list(payload["import_stats"])
    except (
        schema.SchemaViolation,
        pl.exceptions.PolarsError,
        pl.exceptions.PanicException,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
    ) as exc:
        raise _damaged(path, exc) from exc
    return Trace(events=events, import_stats=stats, meta=TraceMeta(sources))


def _damaged(path: Path, exc: BaseException) -> CorruptTraceError:
    what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CorruptTraceError(
        f"traceq Parquet file is damaged ({what[:200]})",
        path=path,
        hint="convert the original trace again with traceq convert",
    )
