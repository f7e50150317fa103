"""Kernel → operator: the CPU operator (and module) that launched every GPU activity.

Definitions in ``docs/analyses.md`` ("Operators").  For a GPU activity (kernel, memcpy, memset on
a device) with a launching call L (the earliest ``cuda_api`` row of its source, process and
correlation id; a CUDA-graph launch launches every kernel of its graph):

* its **operator** is the innermost *operator range* on L's thread open at ``L.start``
  (:mod:`traceq.analyses.nesting`); the operator ranges of a process are its ``cpu_op`` rows
  (Kineto), or, in a process that recorded none (nsys), its CPU-side ranges that name operators
  (:data:`OPERATOR_RANGE_PATTERN`: ``emit_nvtx`` writes ops as NVTX ranges) where it has some,
  else all its ranges other than its step and module ranges (nsys's projection onto the
  innermost NVTX range).  Kineto's ``External id`` wins where
  L carries one that names a ``cpu_op`` of the process open at ``L.start`` on L's thread: it is the
  profiler's own record of the op that was current at the launch, which survives the µs rounding
  that makes an outer and an inner op start and end on the same µs (an id naming an op elsewhere,
  as some traces reuse ids, is ignored);
* ``op_path`` is the chain of operator ranges around it, outermost first, joined by ``/``;
* its **module** is the chain of module ranges (:data:`DEFAULT_MODULE_PATTERN`: ``with_modules``'
  ``nn.Module: <name>`` ranges, Kineto ``python_function`` or user annotation, NVTX in nsys) open
  on L's thread at ``L.start``, outermost first, without the prefix, joined by ``/``.

Work with no launching call, or launched where no operator range is open, has a null operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from traceq.analyses.asof import join_by
from traceq.analyses.chunks import with_columns_like
from traceq.analyses.host_state import cpu_rows, matching
from traceq.analyses.launch_link import LaunchingCalls, as_index, device_activity_rows, launching_calls
from traceq.analyses.memo import per_frame
from traceq.analyses.nesting import innermost_at, innermost_of, paths, prepared
from traceq.analyses.options import DEFAULT_STEP_PATTERN
from traceq.analyses.steps import compile_step_pattern, device_activity

NVTX_OP_ARGUMENTS: Final = r",\s*(?:seq|op_id|sizes|input_op_ids|stashed seq|stashed_seq)\s*=.*$"
"""What ``emit_nvtx`` appends to an op's NVTX range name (``aten::add, seq = 12, sizes = [[2, 3]]``,
``aten::copy_, op_id = 317175``): cut from ``op_name``, so that one operator is one name."""

OPERATOR_RANGE_PATTERN: Final = rf"^[A-Za-z_][\w.]*::|{NVTX_OP_ARGUMENTS}"
"""Ranges that name an operator: ``aten::mm``, ``c10d::allreduce_``, ``emit_nvtx``'s ``aten::add, seq = 12``."""

DEFAULT_MODULE_PATTERN: Final = r"^nn\.Module: "
"""CPU ranges of a module's forward: PyTorch's ``with_modules=True`` names them ``nn.Module: Linear_0``."""

_THREAD: Final = ("source", "pid", "tid")
RANGE: Final = "_range"
"""The column that numbers the operator ranges (:func:`~traceq.analyses.nesting.prepared`'s index)."""

ACTIVITY_OPERATOR_COLUMNS: Final = (
    "row",
    "source",
    "pid",
    "device",
    "stream",
    "kind",
    "name",
    "start_ns",
    "end_ns",
    "dur_ns",
    "correlation",
    "launch_name",
    "launch_tid",
    "launch_start_ns",
    "op_name",
    "op_path",
    "op_start_ns",
    "op_end_ns",
    "op_linked_by",
    "module",
)
"""The columns of :func:`activity_operators`."""


def activity_operators(
    events: pl.DataFrame, *, step_pattern: str = DEFAULT_STEP_PATTERN, cpu: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per GPU activity of ``events`` (kernel, memcpy, memset on a device), in event order,
    with the call that launched it and the operator and module it was launched from.

    Computed once per event frame and step pattern (the breakdown and the launch-bound finding both
    ask).  ``cpu``: :func:`~traceq.analyses.host_state.cpu_rows` of ``events`` (with or without
    :func:`~traceq.analyses.host_state.labelled`'s columns) where the caller holds it already, so
    that each launch's first call is looked up once per report; it does not change the result.

    Columns: row (UInt32, its row in ``events``), source, pid, device, stream, kind, name (String),
    start_ns, end_ns, dur_ns, correlation; launch_name, launch_tid, launch_start_ns (its launching
    call; null without one); op_name, op_path (String), op_start_ns, op_end_ns (the operator range;
    null where none), op_linked_by (``external_id`` | ``enclosing``; null without an operator);
    module (String, null outside module ranges).  ``step_pattern`` names the step ranges, which are
    never operators."""
    coded = operator_links(events, step_pattern=step_pattern, cpu=cpu)
    return coded.with_columns(pl.col(c).cast(pl.String) for c in NAME_COLUMNS)


def operator_links(
    events: pl.DataFrame, *, step_pattern: str = DEFAULT_STEP_PATTERN, cpu: pl.DataFrame | None = None
) -> pl.DataFrame:
    """:func:`activity_operators` with its :data:`NAME_COLUMNS` as codes (Categorical; ``kind`` and
    ``op_linked_by`` Enum), not Strings, where a 20 M-row trace's ten million names per column
    would cost seconds to write out as Strings.  Memoized per frame.  (The report reads neither:
    it sums the activities per operator range, :func:`operator_table_of`, and looks up the few
    operators its findings name, :func:`operator_names_of`.)"""
    return _activity_operators(events, step_pattern, _Hint(cpu))


NAME_COLUMNS: Final = ("source", "kind", "name", "launch_name", "op_name", "op_path", "op_linked_by", "module")
"""The columns of :func:`activity_operators` that are Strings there and codes in :func:`operator_links`."""

LINKED_BY: Final = pl.Enum(["external_id", "enclosing"])
"""How an activity's operator was found (``op_linked_by``)."""


class _Hint:
    """An argument the memo does not key on (equal to every other hint)."""

    def __init__(self, value: pl.DataFrame | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Hint)

    def __hash__(self) -> int:
        return 0


_ACTIVITY_COLUMNS: Final = ACTIVITY_OPERATOR_COLUMNS[:11]
"""The columns of :func:`activity_operators` that are the activity's own (the rest are its call's)."""


@per_frame
def _activity_operators(events: pl.DataFrame, step_pattern: str, hint: _Hint) -> pl.DataFrame:
    on_device = (
        device_activity(events)
        .select(c for c in _ACTIVITY_COLUMNS if c not in ("row", "dur_ns"))
        # (cast chunk by chunk, as every column added below: see chunks.py)
        .with_columns(
            pl.col("source", "name").cast(pl.Categorical), (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
        )
    )
    activity = with_columns_like(on_device, pl.Series("row", device_activity_rows(events), dtype=pl.UInt32))
    per_call = _per_call(events, step_pattern, hint)
    gathered = per_call.select(pl.all().gather(as_index(launching_calls(events).points)))
    return with_columns_like(activity, *gathered.get_columns()).select(ACTIVITY_OPERATOR_COLUMNS)


def _per_call(events: pl.DataFrame, step_pattern: str, hint: _Hint) -> pl.DataFrame:
    """Per launching call, in _point order (every part below is: no join by _point), its own
    columns of :data:`ACTIVITY_OPERATOR_COLUMNS`, its operator's and its module."""
    calls = launching_calls(events)
    launched = _launched(calls)
    cpu = cpu_rows(events) if hint.value is None else hint.value
    return pl.concat(
        [
            calls.gather(pl.col("name").cast(pl.Categorical).alias("launch_name")),
            launched.select("launch_tid", "launch_start_ns"),
            _operators_of_calls(_call_operators(events, step_pattern, hint, True)),
            _module_paths(cpu, launched),
        ],
        how="horizontal",
    )


def _launched(calls: LaunchingCalls) -> pl.DataFrame:
    """The launching calls (in _point order) as the operators read them."""
    return calls.rows.select(
        "_point", "source", "pid", pl.col("tid").alias("launch_tid"), pl.col("start_ns").alias("launch_start_ns")
    )


@dataclass(frozen=True)
class CallOperators:
    """The operator ranges (:func:`_operator_ranges`) and, per launching call in _point order, the
    ``_range`` of its operator (null: none) and ``op_linked_by``."""

    ops: pl.DataFrame
    chosen: pl.DataFrame


def call_operators(
    events: pl.DataFrame, *, step_pattern: str = DEFAULT_STEP_PATTERN, cpu: pl.DataFrame | None = None
) -> CallOperators:
    """Each launching call's operator range (without the ranges' paths), once per table: the
    operator table and the findings' look-up read it (:mod:`traceq.analyses.operator_table`).
    ``cpu``: as :func:`activity_operators`."""
    return _call_operators(events, step_pattern, _Hint(cpu), False)


@per_frame
def _call_operators(events: pl.DataFrame, step_pattern: str, hint: _Hint, with_paths: bool) -> CallOperators:
    """:func:`call_operators`, memoized per table; with the op paths too where ``with_paths``
    (:func:`operator_links` reads them)."""
    cpu = cpu_rows(events) if hint.value is None else hint.value
    ops = _operator_ranges(cpu, step_pattern, with_paths=with_paths)
    return CallOperators(ops, _chosen_ranges(ops, launching_calls(events)))


def ranges_at(table: pl.DataFrame, ranges: pl.Series, *columns: pl.Expr) -> pl.DataFrame:
    """``columns`` of the rows of ``table`` (a :func:`~traceq.analyses.nesting.prepared` table with
    one row per ``_range``) at each of ``ranges`` (null: a null row), in ``ranges``' order."""
    index = table.get_column("_range")
    by_index = (table if index.is_sorted() else table.sort("_range")).select(*columns)  # (position = _range)
    return by_index.select(pl.all().gather(ranges.cast(pl.Int64)))


def _operator_ranges(cpu: pl.DataFrame, step_pattern: str, *, with_paths: bool = True) -> pl.DataFrame:
    """The operator ranges (:func:`prepared`, by thread) with their ``_path`` (``with_paths``):
    every ``cpu_op``; in a process without one, its operator-named ranges, or without those its
    ranges other than step and module ranges."""
    # (one pass over every CPU row, of one column, and only the columns read below of the rows kept)
    columns = (*_THREAD, "kind", "name", "start_ns", "end_ns", "external_id")
    cpu = cpu.lazy().filter(pl.col("kind").is_in(("cpu_op", "range"))).select(columns).collect()
    names = cpu.get_column("name").unique()  # (once: each pattern below is matched against these)
    steps = matching(names, compile_step_pattern(step_pattern))
    module_names = matching(names, DEFAULT_MODULE_PATTERN)
    op_names = matching(names, OPERATOR_RANGE_PATTERN)
    cpu_ops = cpu.filter(pl.col("kind") == "cpu_op")
    with_ops = cpu_ops.select("source", "pid").unique()
    name = pl.col("name")  # (is_in reads the Categorical as it is: no String per row)
    ranges = cpu.filter((pl.col("kind") == "range") & ~name.is_in(pl.concat([steps, module_names]).implode()))
    if not with_ops.is_empty():  # (joins of millions of ranges only where they change something)
        ranges = ranges.join(with_ops, on=["source", "pid"], how="anti", nulls_equal=True)
    # A process whose ranges name operators (emit_nvtx) has those as its operators; one whose
    # ranges do not, its innermost range (what nsys projects GPU work onto).
    is_op = name.is_in(op_names.implode())
    named_ops = ranges.lazy().filter(is_op).select("source", "pid").unique().collect()
    if named_ops.height and named_ops.height == ranges.lazy().select("source", "pid").unique().collect().height:
        ranges = ranges.filter(is_op)  # (every process names its operators)
    elif named_ops.height:
        ranges = pl.concat(
            [
                ranges.join(named_ops, on=["source", "pid"], how="semi", nulls_equal=True).filter(is_op),
                ranges.join(named_ops, on=["source", "pid"], how="anti", nulls_equal=True),
            ]
        )
    chosen = (pl.concat([cpu_ops, ranges]) if cpu_ops.height else ranges).select(
        *_THREAD, "name", "start_ns", "end_ns", "external_id"
    )
    # An emit_nvtx range's name without its arguments, as a String, stripped once per distinct name
    # and after the sort (a real trace's 2.2 M operator ranges hold 17 k names: 0.30 s per row).
    distinct = names.drop_nulls()
    stripped = distinct.cast(pl.String).str.replace(NVTX_OP_ARGUMENTS, "")
    table = prepared(chosen, _THREAD).with_columns(
        pl.col("name").replace_strict(distinct, stripped, default=None, return_dtype=pl.String)
    )
    return table.join(paths(table, _THREAD, "name"), on="_range", how="left") if with_paths else table


def _chosen_ranges(ops: pl.DataFrame, launching: LaunchingCalls) -> pl.DataFrame:
    """Per launching call (in _point order): ``_range``, its operator range in ``ops`` (null: none),
    and ``op_linked_by``."""
    calls = _launched(launching)
    points = calls.select(
        "source", "pid", pl.col("launch_tid").alias("tid"), "_point", pl.col("launch_start_ns").alias("_t")
    )
    enclosing = innermost_of(ops, points, _THREAD, made_of=launching)  # (the phases ask it too)
    # External id: the latest-starting cpu_op of the process with the launch's id, where it is open
    # at the launch on the launching thread (some traces reuse ids: then the enclosing op).
    by_id = (
        ops.filter(pl.col("external_id").is_not_null())
        .sort("start_ns", "_range")
        .unique(subset=["source", "pid", "external_id"], keep="last")
        .select(
            "source",
            "pid",
            pl.col("external_id").alias("_ext"),
            pl.col("_range").alias("_by_id"),
            pl.col("tid").alias("_id_tid"),
            pl.col("start_ns").alias("_id_start"),
            pl.col("end_ns").alias("_id_end"),
        )
    )
    linked = _with_id_ops(calls, launching, by_id)
    by_id_open = (
        pl.when(
            (pl.col("_id_tid") == pl.col("launch_tid"))
            & (pl.col("_id_start") <= pl.col("launch_start_ns"))
            & (pl.col("launch_start_ns") < pl.col("_id_end"))
        )
        .then(pl.col("_by_id"))
        .alias("_by_id")
    )
    return linked.select(by_id_open, enclosing.get_column(RANGE).alias("_enclosing")).select(
        pl.coalesce("_by_id", "_enclosing").alias(RANGE),
        pl.when(pl.col("_by_id").is_not_null())
        .then(pl.lit("external_id", dtype=LINKED_BY))
        .when(pl.col("_enclosing").is_not_null())
        .then(pl.lit("enclosing", dtype=LINKED_BY))
        .alias("op_linked_by"),
    )


def _operators_of_calls(found: CallOperators) -> pl.DataFrame:
    """Per launching call (in _point order): op_name, op_path, op_start_ns, op_end_ns, op_linked_by."""
    info = ranges_at(
        found.ops,
        found.chosen.get_column(RANGE),
        pl.col("name").cast(pl.Categorical).alias("op_name"),
        pl.col("_path").cast(pl.Categorical).alias("op_path"),
        pl.col("start_ns").alias("op_start_ns"),
        pl.col("end_ns").alias("op_end_ns"),
    )
    return pl.concat([info, found.chosen.select("op_linked_by")], how="horizontal")


def _with_id_ops(calls: pl.DataFrame, launching: LaunchingCalls, by_id: pl.DataFrame) -> pl.DataFrame:
    """``calls`` (:func:`_launched`) with each one's external id (``_ext``) left-joined with ``by_id``
    on (source, pid, _ext), nulls unequal; the join grouped by integer keys, and skipped where no op
    has an id (nsys: no call has one either, and the ids are not gathered)."""
    if by_id.is_empty():
        return calls.with_columns(pl.lit(None, dtype=by_id.schema[c]).alias(c) for c in by_id.columns[3:])
    ids = calls.with_columns(launching.gather(pl.col("external_id").alias("_ext")).to_series())
    return join_by(ids, by_id, by=["source"], on=["pid", "_ext"], how="left", nulls_equal=False, maintain_order="left")


def _module_paths(cpu: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Per launching call (a row of ``calls``, in their order): ``module``, the path of the module
    ranges open at its start."""
    names = cpu.get_column("name")
    module_names = matching(names, DEFAULT_MODULE_PATTERN)
    ranges = cpu.filter(
        pl.col("kind").is_in(("range", "python", "cpu_op", "other")) & pl.col("name").is_in(module_names.implode())
    ).select(
        *_THREAD,
        pl.col("name").cast(pl.String).str.replace(DEFAULT_MODULE_PATTERN, "").alias("name"),
        "start_ns",
        "end_ns",
    )
    if ranges.is_empty():
        return pl.select(pl.repeat(None, calls.height, dtype=pl.Categorical).alias("module"))
    table = prepared(ranges, _THREAD)
    table = table.join(paths(table, _THREAD, "name"), on="_range", how="left")
    points = calls.select(
        "source", "pid", pl.col("launch_tid").alias("tid"), "_point", pl.col("launch_start_ns").alias("_t")
    )
    found = innermost_at(table, points, _THREAD).get_column(RANGE)
    return ranges_at(table, found, pl.col("_path").cast(pl.Categorical).alias("module"))
