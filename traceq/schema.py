"""The unified event table: its columns, written once.

Every importer produces a table with exactly these columns, in this order, and calls
:func:`conform` (which casts) and :func:`validate` (which checks the invariants) on it.  The Arrow
schema, the polars schema and ``schemas/events.schema.json`` are all derived from :data:`COLUMNS`;
``docs/event-table.md`` documents the same list and a test keeps them in step.

Conventions
-----------
* Times are int64 nanoseconds on the trace's own clock (``*_ns``); intervals are half-open
  ``[start_ns, end_ns)`` with ``start_ns <= end_ns``.
* ``pid``/``tid`` identify the CPU process and thread.  GPU rows carry the ``pid`` of the process
  that owns the work and a null ``tid``; they carry ``device`` and ``stream`` instead.
* Guaranteed columns are meaningful for every source; extra columns are always present but may be
  entirely null when a source does not record them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import polars as pl
import pyarrow as pa

from traceq.errors import ExitCode, TraceqError

SCHEMA_VERSION: Final = 1
"""Bumped whenever a column is added, removed, renamed or retyped (invalidates caches)."""

KINDS: Final = (
    "kernel",
    "memcpy",
    "memset",
    "gpu_sync",
    "cuda_api",
    "range",
    "cpu_op",
    "python",
    "instant",
    "other",
)
"""Values of ``kind``.  ``kernel``/``memcpy``/``memset`` are GPU activity; ``gpu_sync`` is the
GPU-side record of a synchronisation; ``cuda_api`` are CUDA/HIP runtime and driver calls on the CPU;
``range`` are NVTX ranges and user annotations (``ProfilerStep#N``), CPU-side when ``tid`` is set
and GPU-side projections when ``device`` is set instead."""

GPU_ACTIVITY_KINDS: Final = ("kernel", "memcpy", "memset")

COPY_KINDS: Final = (
    "HtoD",
    "DtoH",
    "DtoD",
    "HtoH",
    "PtoP",
    "HtoA",
    "AtoH",
    "AtoA",
    "AtoD",
    "DtoA",
    "unknown",
)
"""Values of ``copy_kind`` (memcpy rows only): CUPTI's copy directions.  Unified-memory
migrations map onto the direction they move data in."""

SYNC_KINDS: Final = (
    "stream_synchronize",
    "event_synchronize",
    "context_synchronize",
    "stream_wait_event",
    "event_query",
    "unknown",
)
"""Values of ``sync_kind`` (``gpu_sync`` rows): what the synchronisation waited for."""

KIND_DTYPE: Final = pl.Enum(list(KINDS))
COPY_KIND_DTYPE: Final = pl.Enum(list(COPY_KINDS))
SYNC_KIND_DTYPE: Final = pl.Enum(list(SYNC_KINDS))


@dataclass(frozen=True)
class Column:
    """One column of the event table."""

    name: str
    dtype: pl.DataType
    nullable: bool
    guaranteed: bool
    doc: str


COLUMNS: Final[tuple[Column, ...]] = (
    Column("kind", KIND_DTYPE, False, True, "What the row is; one of `KINDS`."),
    Column("start_ns", pl.Int64(), False, True, "Start, ns on the trace's own clock."),
    Column("end_ns", pl.Int64(), False, True, "End (exclusive), ns; equals `start_ns` for instants."),
    Column(
        "name",
        pl.Categorical(),
        False,
        True,
        "Demangled kernel name, API name without nsys's `_v3020` suffix, range text, op name.",
    ),
    Column("pid", pl.Int64(), True, True, "Process id; for GPU rows the process that owns the work."),
    Column("tid", pl.Int64(), True, True, "CPU thread id; null for GPU rows."),
    Column("device", pl.Int32(), True, True, "GPU index; null for CPU rows."),
    Column("stream", pl.Int64(), True, True, "CUDA stream id (unique within a process); null on CPU."),
    Column(
        "correlation",
        pl.Int64(),
        True,
        True,
        "Links a `cuda_api` row to the GPU rows it launched; unique per (source, pid) only.",
    ),
    Column(
        "is_comm",
        pl.Boolean(),
        False,
        True,
        "Communication kernel (`traceq.comm_kernels` patterns: NCCL, RCCL, DeepEP, ...; or the trace's collective "
        "metadata).",
    ),
    Column("bytes", pl.Int64(), True, True, "Bytes copied or set (memcpy/memset rows)."),
    Column("copy_kind", COPY_KIND_DTYPE, True, True, "Copy direction (memcpy rows); `COPY_KINDS`."),
    Column("rank", pl.Int32(), True, True, "Distributed rank where the trace says it, else null."),
    Column("source", pl.Categorical(), False, True, "The file the row came from."),
    Column(
        "category",
        pl.Categorical(),
        True,
        False,
        "The source's own class: the Kineto `cat`, or the nsys table/event class.",
    ),
    Column("context", pl.Int64(), True, False, "CUDA context id (GPU rows, where recorded)."),
    Column("external_id", pl.Int64(), True, False, "Kineto `External id`: links ops to launches."),
    Column("domain", pl.Categorical(), True, False, "NVTX domain name (nsys ranges)."),
    Column("sync_kind", SYNC_KIND_DTYPE, True, False, "What a `gpu_sync` row waited on."),
    Column("graph_id", pl.Int64(), True, False, "CUDA graph id, for work run as part of a graph."),
    Column("grid_x", pl.Int32(), True, False, "Kernel grid size, x."),
    Column("grid_y", pl.Int32(), True, False, "Kernel grid size, y."),
    Column("grid_z", pl.Int32(), True, False, "Kernel grid size, z."),
    Column("block_x", pl.Int32(), True, False, "Kernel block size, x."),
    Column("block_y", pl.Int32(), True, False, "Kernel block size, y."),
    Column("block_z", pl.Int32(), True, False, "Kernel block size, z."),
    Column("registers_per_thread", pl.Int32(), True, False, "Registers per thread (kernels)."),
    Column("shared_memory_bytes", pl.Int64(), True, False, "Static + dynamic shared memory."),
)

COLUMN_NAMES: Final = tuple(c.name for c in COLUMNS)
POLARS_SCHEMA: Final = pl.Schema({c.name: c.dtype for c in COLUMNS})
GUARANTEED: Final = tuple(c.name for c in COLUMNS if c.guaranteed)


class SchemaViolation(TraceqError):
    """An importer produced a table that breaks the event-table contract (a traceq bug)."""

    exit_code = ExitCode.INTERNAL


def empty_frame() -> pl.DataFrame:
    """A zero-row event table with the full schema."""
    return pl.DataFrame(schema=POLARS_SCHEMA)


def conform(frame: pl.DataFrame | pa.Table) -> pl.DataFrame:
    """Return ``frame`` with every column of the schema, in order, cast to its declared type.

    Missing extra columns are added as nulls; missing guaranteed columns are an error, except
    the nullable ones, which are added as nulls too.  Unknown columns are dropped.

    No column already of its type is copied.  A frame of one chunk per column goes through a
    ``select``, where a missing column costs nothing (a literal column); but polars' eager
    ``select`` first copies the columns of a frame of many chunks into one chunk each, which on a
    1 GB Kineto trace's rows is 0.3 GB beside them at the import's peak, so such a frame's columns
    are taken as they are, chunks and all, and a missing one is an array of nulls.
    """
    df = frame if isinstance(frame, pl.DataFrame) else _from_arrow(frame)
    present = set(df.columns)
    for col in COLUMNS:
        if col.name not in present and not col.nullable and col.name != "is_comm":
            raise SchemaViolation(f"event table lacks required column {col.name!r}")
    if max(df.n_chunks("all"), default=1) == 1:
        return df.select(
            pl.col(c.name).cast(c.dtype, strict=True)
            if c.name in present
            else pl.lit(_filler(c), c.dtype).alias(c.name)
            for c in COLUMNS
        )
    return pl.DataFrame(
        _declared(df.get_column(c.name), c.dtype)
        if c.name in present
        else pl.repeat(_filler(c), df.height, dtype=c.dtype, eager=True).alias(c.name)
        for c in COLUMNS
    )


def _filler(col: Column) -> bool | None:
    """The value of a missing column: null, or False for a missing ``is_comm`` that may not be null."""
    return None if col.nullable else False


def _declared(column: pl.Series, dtype: pl.DataType) -> pl.Series:
    """``column`` in ``dtype``: itself where it is of that type already."""
    return column if column.dtype == dtype else column.cast(dtype, strict=True)


def _from_arrow(table: pa.Table) -> pl.DataFrame:
    overrides = {c.name: c.dtype for c in COLUMNS if isinstance(c.dtype, pl.Enum) and c.name in table.column_names}
    out = pl.from_arrow(table, schema_overrides=overrides)
    assert isinstance(out, pl.DataFrame)
    return out


def to_polars(table: pa.Table) -> pl.DataFrame:
    """An Arrow event table as a polars frame with the declared dtypes (enums restored)."""
    return conform(table)


def validate(df: pl.DataFrame) -> pl.DataFrame:
    """Check the contract; return ``df`` unchanged or raise :class:`SchemaViolation`."""
    if df.schema != POLARS_SCHEMA:
        raise SchemaViolation(f"event table schema differs from traceq.schema: {df.schema} != {POLARS_SCHEMA}")
    required = [c.name for c in COLUMNS if not c.nullable]
    nulls = df.select(pl.col(required).null_count())
    bad = [name for name in required if nulls[name][0]]
    if bad:
        raise SchemaViolation(f"null values in non-nullable columns {bad}")
    inverted = df.filter(pl.col("end_ns") < pl.col("start_ns")).height
    if inverted:
        raise SchemaViolation(f"{inverted} rows have end_ns < start_ns")
    return df


_ARROW_JSON_TYPES: Final[dict[type[pl.DataType], dict[str, Any]]] = {
    pl.Int64: {"type": "integer", "format": "int64"},
    pl.Int32: {"type": "integer", "format": "int32"},
    pl.Boolean: {"type": "boolean"},
    pl.Categorical: {"type": "string", "x-encoding": "dictionary"},
}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one event row (``schemas/events.schema.json`` is this, serialised)."""
    properties: dict[str, Any] = {}
    for col in COLUMNS:
        if isinstance(col.dtype, pl.Enum):
            spec: dict[str, Any] = {"type": "string", "enum": list(col.dtype.categories), "x-encoding": "dictionary"}
        else:
            spec = dict(_ARROW_JSON_TYPES[type(col.dtype)])
        if col.nullable:
            spec["type"] = [spec["type"], "null"]
            if "enum" in spec:
                spec["enum"] = [*spec["enum"], None]
        spec["description"] = col.doc
        spec["x-guaranteed"] = col.guaranteed
        spec["x-arrow-type"] = str(arrow_schema().field(col.name).type)
        properties[col.name] = spec
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://traceq.dev/schemas/events.schema.json",
        "title": "traceq event row",
        "description": f"One row of the traceq unified event table (schema version {SCHEMA_VERSION}).",
        "type": "object",
        "x-schema-version": SCHEMA_VERSION,
        "properties": properties,
        "required": list(COLUMN_NAMES),
        "additionalProperties": False,
    }


def arrow_schema() -> pa.Schema:
    """The Arrow schema polars produces for the event table."""
    return empty_frame().to_arrow().schema


def json_schema_text() -> str:
    """:func:`json_schema` serialised deterministically, as written to ``schemas/``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
