"""Per-event normalisation for the Kineto importer: :func:`compact` and what it needs.

:func:`compact` runs on each block of the raw frame
(:data:`~traceq.importers.kineto.raw_frame.RAW_SCHEMA`) as it is parsed and keeps only typed,
narrow columns (:data:`COMPACT_SCHEMA`): times in ns, the phase outcome, ids parsed from text.
Whatever needs only the event itself is done here, so the raw string columns of a whole file
never coexist; what needs the whole trace is in :mod:`traceq.importers.kineto.normalise`.  The
importer compacts through :class:`FlowSplit`, which keeps the flow events apart and narrow.  Also
here: the time conversion, the parsing of ids written as text, and the skip reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import polars as pl

from traceq.importers.lookups import by_int_key

_ROW_PHASES: Final = frozenset({"X", "B", "E", "i", "I"})
"""Phases that can become rows: complete events, begin/end pairs, instants (and the old ``I``)."""

MAX_ABS_US: Final = 4e15
"""|ts| and dur at or beyond this (year 2096 as epoch µs) are out of range, so that ts + dur fits int64 ns."""

ROW: Final = "row"
"""The outcome of an event that becomes a row; every other outcome is a skip reason (stats)."""
SKIP_NO_PHASE: Final = "no ph"
SKIP_METADATA: Final = "metadata"
SKIP_FLOW: Final = "flow"
SKIP_NO_TS: Final = "no ts"
SKIP_OUT_OF_RANGE: Final = "ts or dur out of range"
SKIP_PAIR_END: Final = "E merged into its B row"
SKIP_UNPAIRED_E: Final = "unpaired E"
SKIP_UNCLOSED_B: Final = "B never closed"
SKIP_NOT_OBJECT: Final = "not a JSON object"

COMPACT_SCHEMA: Final = pl.Schema(
    {
        "idx": pl.UInt32(),
        "ph": pl.Categorical(),
        "cat": pl.Categorical(),
        "name": pl.Categorical(),
        "pid_text": pl.Categorical(),
        "tid_key": pl.Categorical(),
        "stream_tid": pl.Boolean(),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
        "outcome": pl.Categorical(),
        "no_dur": pl.Boolean(),
        "negative_dur": pl.Boolean(),
        "flow_id": pl.Int64(),
        "bp_e": pl.Boolean(),
        "correlation": pl.Int64(),
        "external_id": pl.Int64(),
        "bytes": pl.Int64(),
        "context": pl.Int64(),
        "registers_per_thread": pl.Int32(),
        "shared_memory_bytes": pl.Int64(),
        "graph_id": pl.Int64(),
        "device_arg": pl.Int64(),
        "stream_arg": pl.Int64(),
        "has_collective": pl.Boolean(),
        "meta_name": pl.Categorical(),
        "grid_x": pl.Int32(),
        "grid_y": pl.Int32(),
        "grid_z": pl.Int32(),
        "block_x": pl.Int32(),
        "block_y": pl.Int32(),
        "block_z": pl.Int32(),
    }
)
"""One row per event, as :func:`compact` leaves it.  ``pid_text``/``tid_key`` are the raw pid and
tid text (tid without its ``"stream "`` prefix), ``stream_tid`` says the tid had that prefix;
``outcome`` is ``row`` or the skip reason; ``*_arg`` are ``args.device``/``args.stream``;
``meta_name`` is ``args.name`` (the payload of ``M`` events)."""

TRIPLE_COLUMNS: Final = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
"""A kernel's grid and block, as both parsers read them
(:data:`~traceq.importers.kineto.raw_frame.TRIPLE_FIELDS`)."""

PER_EVENT_ARG_COLUMNS: Final = (
    "correlation",
    "external_id",
    "bytes",
    "context",
    "registers_per_thread",
    "shared_memory_bytes",
    "graph_id",
    "device_arg",
    "stream_arg",
    "has_collective",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
"""Columns from ``args`` that a ``B`` row takes from its ``E`` where it lacks them (the format merges
the args of the two)."""


FLOW_COLUMNS: Final = ("cat", "ph", "bp_e", "pid_text", "tid_key", "stream_tid", "flow_id", "start_ns")
"""What is kept of a flow event (``s``/``t``/``f``): its category and phase (the statistics, the
launch flows' categories), its binding and track, its id and time (the launch flows that fill
missing correlation ids), whether its tid was ``"stream N"`` (the file's era)."""


class FlowSplit:
    """A :data:`~traceq.importers.kineto.raw_frame.Compact` callback: :func:`compact` of each block,
    with its flow events kept apart (:meth:`flows`, :data:`FLOW_COLUMNS` only).  Flows never
    become rows, and in a Kineto trace they are a third of the events (one ``s`` and one ``f``
    per launch): kept narrow, the events of a 1 GB trace take 200 MB less while the whole
    trace is read.  One per parse of a file (a parse that declines leaves its flows behind)."""

    def __init__(self) -> None:
        self._flows: list[pl.DataFrame] = []

    def __call__(self, raw: pl.DataFrame) -> pl.DataFrame:
        block = compact(raw)
        is_flow = block.get_column("outcome") == SKIP_FLOW
        if not is_flow.any():
            return block
        self._flows.append(block.filter(is_flow).select(FLOW_COLUMNS))
        return block.filter(~is_flow)

    def flows(self) -> pl.DataFrame:
        """Every flow event of the blocks compacted, in file order."""
        if not self._flows:
            return pl.DataFrame(schema={c: COMPACT_SCHEMA[c] for c in FLOW_COLUMNS})
        return pl.concat(self._flows) if len(self._flows) > 1 else self._flows[0]


def us_to_ns(us: pl.Expr) -> pl.Expr:
    """Microseconds (a double) to int64 ns, rounded half to even.

    Computed as ``floor(us) * 1000 + round(frac(us) * 1000)`` rather than ``round(us * 1000)``:
    the product of an epoch-µs integer (~1.7e15) and 1000 is not exact in a double, the split is.
    For Kineto's three-decimal output this is the exact ns value the writer started from.
    Values outside ``MAX_ABS_US`` are the caller's to mask (``pl.when``); they come out null or
    meaningless here rather than raising, as the lazy engine may evaluate this for every row.
    """
    whole = us.floor()
    return whole.cast(pl.Int64, strict=False) * 1000 + ((us - whole) * 1000).round().cast(pl.Int64, strict=False)


def int_from_text(text: pl.Expr) -> pl.Expr:
    """Text read as int64: decimal, ``0x`` hex, ``stream N``, or integral like ``7.0``; else null."""
    t = text.str.strip_chars().str.strip_prefix("stream ")
    as_float = t.cast(pl.Float64, strict=False)
    integral = pl.when(as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2**53)).then(
        as_float.cast(pl.Int64, strict=False)
    )
    hexadecimal = pl.when(t.str.starts_with("0x") | t.str.starts_with("0X")).then(
        t.str.slice(2).str.to_integer(base=16, strict=False)
    )
    return pl.coalesce(t.str.to_integer(base=10, strict=False), hexadecimal, integral)


def lookup(events: pl.DataFrame, column: str, fn: Callable[[pl.Expr], pl.Expr], dtype: pl.DataType) -> pl.Expr:
    """``fn`` of a Categorical column, computed on its distinct values and looked up per row by the
    categorical code (see :func:`~traceq.importers.lookups.by_int_key`)."""
    table = codes_and_texts(events, column).select("code", value=fn(pl.col("text")))
    return by_int_key(pl.col(column).to_physical(), table["code"], table["value"], dtype)


def codes_and_texts(events: pl.DataFrame, column: str) -> pl.DataFrame:
    """The distinct non-null values of a Categorical column: ``code`` (its physical code) and ``text``."""
    return (
        events.lazy()
        .select(pl.col(column).unique().drop_nulls())
        .select(code=pl.col(column).to_physical(), text=pl.col(column).cast(pl.String))
        .collect()
    )


def _phase_outcome(ph: str) -> str:
    if ph == "M":
        return SKIP_METADATA
    if ph in ("s", "t", "f"):
        return SKIP_FLOW
    return ROW if ph in _ROW_PHASES else f"unsupported phase {ph}"


def _in_range(us: pl.Expr) -> pl.Expr:
    return us.is_finite() & (us.abs() < MAX_ABS_US)


def compact(raw: pl.DataFrame) -> pl.DataFrame:
    """Per-event normalisation of a block of the raw frame (``raw_frame.RAW_SCHEMA``).

    Returns :data:`COMPACT_SCHEMA`: what each event says by itself, typed and narrow.  One lazy
    query, so that the sub-expressions shared by several columns (the times in ns, the phase's
    outcome) are computed once.
    """
    phases = [p for p in raw["ph"].unique().to_list() if p is not None]
    by_phase = (
        pl.col("ph")
        .replace_strict({p: _phase_outcome(p) for p in phases}, default=None, return_dtype=pl.Categorical())
        .fill_null(_category(SKIP_NO_PHASE))
    )
    ph, ts, dur = pl.col("ph"), pl.col("ts"), pl.col("dur")
    start_ns = pl.when(_in_range(ts)).then(us_to_ns(ts))
    dur_ns = pl.when(_in_range(dur)).then(us_to_ns(dur))
    is_x = (ph == "X").fill_null(False)
    ids = _ints_of_text(raw, ("id", "args.device", "args.stream"))
    return (
        raw.lazy()
        .select(
            "idx",
            "ph",
            "cat",
            "name",
            *TRIPLE_COLUMNS,
            pid_text="pid",  # read as Categorical already
            tid_key=pl.col("tid").str.strip_prefix("stream ").cast(pl.Categorical),
            stream_tid=pl.col("tid").str.starts_with("stream ").fill_null(False),
            start_ns=start_ns,
            end_ns=pl.when(is_x).then(start_ns + dur_ns.fill_null(0).clip(lower_bound=0)).otherwise(start_ns),
            outcome=pl.when(by_phase != ROW)
            .then(by_phase)
            .when(ts.is_null())
            .then(_category(SKIP_NO_TS))
            .when(~_in_range(ts) | (dur.is_not_null() & ~_in_range(dur)))
            .then(_category(SKIP_OUT_OF_RANGE))
            .otherwise(_category(ROW)),
            no_dur=is_x & dur.is_null(),
            negative_dur=is_x & (dur_ns < 0).fill_null(False),
            flow_id=pl.when(ph.is_in(["s", "t", "f"])).then(ids["id"]),
            bp_e=(pl.col("bp") == "e").fill_null(False),
            correlation=pl.col("args.correlation"),
            external_id=pl.coalesce("args.External id", "args.external id"),
            bytes=pl.col("args.bytes"),
            context=pl.col("args.context"),
            registers_per_thread=pl.col("args.registers per thread").cast(pl.Int32, strict=False),
            shared_memory_bytes=pl.col("args.shared memory"),
            graph_id=pl.col("args.graph id"),
            device_arg=ids["args.device"],
            stream_arg=ids["args.stream"],
            has_collective=pl.col("args.Collective name").is_not_null(),
            meta_name=pl.col("args.name"),
        )
        # A block is small and the query wide: the in-memory engine plans and runs it in about
        # half the streaming engine's time on 2 cores (the whole-trace queries of normalise are
        # the other way round: faster and smaller on the streaming engine, polars' default).
        .collect(engine="in-memory")
    )


def _category(text: str) -> pl.Expr:
    return pl.lit(text, dtype=pl.Categorical())


def _ints_of_text(raw: pl.DataFrame, columns: tuple[str, ...]) -> dict[str, pl.Expr]:
    """:func:`int_from_text` of each text column, as plain decimal parsing where that reads every
    value of the block (flow ids, devices and streams nearly always are decimal integers): parsed
    once for all the columns, and the full parse (hex, ``stream N``, ``7.0``) only where it misses.

    Where decimal parsing reads a value, :func:`int_from_text` reads the same integer (its first
    attempt is that parse, after stripping what a decimal integer cannot hold)."""
    decimal = raw.select(pl.col(c).str.to_integer(base=10, strict=False) for c in columns)
    missed = [bool((raw.get_column(c).is_not_null() & decimal.get_column(c).is_null()).any()) for c in columns]
    return {
        c: int_from_text(pl.col(c)) if miss else pl.lit(decimal.get_column(c))
        for c, miss in zip(columns, missed, strict=True)
    }
