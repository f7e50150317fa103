"""What a CPU thread was doing, as sets of intervals: blocked in a sync, loading data, compiling, busy.

The idle attribution (:mod:`traceq.analyses.attribution`) reads the host's state at every idle ns
from these sets, one :class:`ThreadState` per thread that launched work ending an idle interval:

* ``sync``: inside a synchronising CUDA/HIP call (:data:`SYNC_CALL_PATTERN`);
* ``loader``: inside a data-loader range (:data:`DEFAULT_INPUT_PATTERN`, plus the user's
  ``--input-pattern``);
* ``compile``: inside a compile range: the first instance (per process and name) of a
  ``Torch-Compiled Region`` range, and every range of compile work (:data:`COMPILE_WORK_PATTERN`);
* ``recorded``: inside any recorded CPU event (API call, op, range, Python frame, ...);
* ``busy``: the same, but for the step ranges: the thread was running something more specific
  than "inside a step" (read only against the loader time of the process's other threads, so
  computed only for a thread whose process has some: ten million calls merged for nothing else).

Per process, ``loader_elsewhere`` is the loader time of its *other* threads (a thread-based loader
that the launching thread waits on).  Names are matched once per distinct name, never per row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.asof import group_numbers, integer_groups, one_group
from traceq.analyses.memo import per_frame
from traceq.analyses.steps import compile_step_pattern
from traceq.literal_columns import one_valued, with_literals

SYNC_CALL_PATTERN: Final = (
    r"^(?:"
    r"(?:cuda|hip)(?:Stream|Device|Event|Ctx|Thread)Synchronize"
    r"|cu(?:Stream|Ctx|Event)Synchronize"
    r"|(?:cuda|hip)Memcpy(?:2D|3D)?(?:To|From)?(?:Symbol|Array)?(?:Peer)?"
    r"|hipMemcpyWithStream"
    r"|cuMemcpy(?:[DHA]to[DHA]|2D|3D|Peer)?(?:Unaligned)?"
    r")(?:_v\d+)?$"
)
"""Names of calls that block the CPU until the GPU catches up: the stream/device/event/context
synchronisations (runtime, driver and HIP), the synchronous (non-``Async``) copies, and HIP's
``hipMemcpyWithStream`` (what PyTorch's ``memcpy_and_sync`` calls on ROCm: a copy, then a wait)."""

DEFAULT_INPUT_PATTERN: Final = (
    r"^(?:enumerate\(DataLoader\)#.*__next__"  # PyTorch: the main thread waiting on its DataLoader
    r"|\[_?\w*EpochLoop\]\.train_dataloader_next"  # PyTorch Lightning
    r")$"
)
"""CPU ranges in which the host waits for the next batch."""

COMPILE_REGION_PATTERN: Final = r"^Torch-Compiled Region"
"""A compiled function's range: compiling on its first execution (per process and name), running after."""

COMPILE_WORK_PATTERN: Final = (
    r"^(?:TorchDynamo$|torch\._dynamo\.|_compile\.|compile_fx|OutputGraph\.call_user_compiler"
    r"|aot_autograd|create_aot_dispatcher_function|[Ii]nductor|async_compile)"
)
"""Ranges of compile work itself (Dynamo tracing, AOTAutograd, Inductor code generation)."""

CPU_KINDS: Final = ("cuda_api", "range", "cpu_op", "python", "other")
"""Event kinds that record a CPU thread doing something (instants have no duration)."""

CPU_ROW: Final = pl.col("kind").is_in(CPU_KINDS) & pl.col("tid").is_not_null()
"""The rows :func:`cpu_rows` keeps: a CPU kind on a known thread (the launch link numbers the
calls by their place among them)."""

ThreadKey = tuple[str, int | None, int | None]
"""(source, pid, tid)."""


@dataclass(frozen=True)
class ThreadState:
    """One CPU thread's states, each a normalised set of intervals (ns)."""

    sync: iv.Intervals
    loader: iv.Intervals
    compile: iv.Intervals
    recorded: iv.Intervals
    busy: iv.Intervals
    """``recorded`` without the step ranges, where another thread of the process has loader ranges
    (``HostState.loader_elsewhere``, the only time it is read against); else empty."""


@dataclass(frozen=True)
class HostState:
    """The states of the threads asked for, and each process's loader time on its other threads."""

    threads: Mapping[ThreadKey, ThreadState]
    loader_by_thread: Mapping[ThreadKey, iv.Intervals]
    """Every thread's loader ranges (to find a process's other threads' loader time)."""

    def loader_elsewhere(self, key: ThreadKey) -> iv.Intervals:
        """The loader time of the other threads of ``key``'s process."""
        source, pid, tid = key
        others = [s for (src, p, t), s in self.loader_by_thread.items() if src == source and p == pid and t != tid]
        return iv.union(*others) if others else iv.Intervals.empty()


_IS_RANGE: Final = pl.col("kind").is_in(("range", "cpu_op", "python", "other"))
"""The CPU rows that are ranges a thread is inside (not API calls)."""


@per_frame
def cpu_rows(events: pl.DataFrame) -> pl.DataFrame:
    """The CPU events of every thread: source (String), pid, tid, kind (the table's Enum: Strings
    would cost a pass and string hashing in every ``kind`` test after it), name, start_ns, end_ns,
    external_id, correlation; in event order (each thread's rows by start).  Computed once per
    event frame (:func:`~traceq.analyses.memo.per_frame`): several analyses read it.

    The rows are one chunk (a filter leaves a large table's hundreds of chunks apart): the
    launching calls and the launches are gathered from them, and a gather from hundreds of chunks
    costs seven times one from a single chunk (ten million rows: 0.44 s against 0.06 s).  A column
    with one value in every row of the table (its source, its one pid, an nsys export's null
    external ids) is a literal column instead, never copied."""
    keep = events.select(CPU_ROW.fill_null(False)).to_series()
    columns = ("source", "pid", "tid", "kind", "name", "start_ns", "end_ns", "external_id", "correlation")
    # A column that holds one value in every row of the table (its one source, as every part of a
    # job has; one process's pid; an nsys export's external_id, null throughout) is a literal
    # column: it costs nothing where the rows are taken and gathered (a third of the rows' bytes
    # at ten million rows), and a String source costs no String per row.
    literal = one_valued(events, ("source", "pid", "external_id"))
    # One column at a time, filtered and made one chunk before the next is filtered: the filter's
    # chunks of one column are freed before the next, whose filter reuses their pages (ten million
    # rows: 475 MB of fresh memory instead of 720, and a third less CPU than filtering every
    # column at once, then copying each into one chunk).
    picked = pl.DataFrame([events.get_column(c).filter(keep).rechunk() for c in columns if c not in literal])
    if "source" not in literal:
        picked = picked.with_columns(pl.col("source").cast(pl.String))
    return with_literals(picked, literal, {**events.schema, "source": pl.String()}, columns)


def matching(names: pl.Series, pattern: str) -> pl.Series:
    """The distinct values of ``names`` (Categorical or String) that match ``pattern`` (as Strings):
    the regex runs once per distinct name, not once per row.  (A caller that matches several
    patterns against a large column passes its ``unique()``, found once.)"""
    distinct = names.unique().cast(pl.String)
    return distinct.filter(distinct.str.contains(pattern))


@per_frame
def sync_calls(cpu: pl.DataFrame) -> pl.DataFrame:
    """The synchronising calls of :func:`cpu_rows` (or of :func:`labelled` rows, read by their
    ``_sync``): source, pid, tid, name, start_ns, end_ns, correlation; sorted by end_ns.  Computed
    once per frame (the attribution and the call counts both read them)."""
    syncing = pl.col("_sync") if "_sync" in cpu.columns else _is_sync(cpu.get_column("name"))
    return (
        cpu.filter(syncing)
        .select("source", "pid", "tid", pl.col("name").cast(pl.String), "start_ns", "end_ns", "correlation")
        .sort("end_ns")
    )


def _is_sync(names: pl.Series) -> pl.Expr:
    """Whether a row of :func:`cpu_rows` is a synchronising call (``names``: its name column)."""
    return (pl.col("kind") == "cuda_api") & pl.col("name").is_in(matching(names, SYNC_CALL_PATTERN).implode())


def _is_loader(names: pl.Series, input_pattern: str | None) -> pl.Expr:
    """Whether a row of :func:`cpu_rows` is a data-loader range (``names``: its name column)."""
    pattern = DEFAULT_INPUT_PATTERN if not input_pattern else f"(?:{DEFAULT_INPUT_PATTERN})|(?:{input_pattern})"
    return _IS_RANGE & pl.col("name").is_in(matching(names, pattern).implode())


def loader_ranges(events: pl.DataFrame, input_pattern: str | None = None) -> pl.DataFrame:
    """The data-loader ranges of every thread (:data:`DEFAULT_INPUT_PATTERN` and ``input_pattern``):
    source, pid, tid, name (String), start_ns, end_ns."""
    rows = cpu_rows(events)
    return rows.filter(_is_loader(rows.get_column("name"), input_pattern)).select(
        "source", "pid", "tid", pl.col("name").cast(pl.String), "start_ns", "end_ns"
    )


def labelled(cpu: pl.DataFrame, *, step_pattern: str, input_pattern: str | None = None) -> pl.DataFrame:
    """:func:`cpu_rows` with Boolean ``_sync``, ``_loader``, ``_step`` and ``_compile`` columns: what
    each row says the thread was doing.  ``input_pattern`` adds the user's own data-loading ranges
    to :data:`DEFAULT_INPUT_PATTERN`."""
    names = cpu.get_column("name").unique()  # (once: each pattern below is matched against these)
    name = pl.col("name")  # (is_in reads the Categorical as it is: no String per row)
    is_range = _IS_RANGE
    regions = matching(names, COMPILE_REGION_PATTERN)
    region = is_range & name.is_in(regions.implode())
    # (the first-of-name window is over every row: skipped where no row names a compile region)
    first_region = (region & _first_of_name(region)) if regions.len() else pl.lit(False)
    return cpu.with_columns(
        _is_sync(names).alias("_sync"),
        _is_loader(names, input_pattern).alias("_loader"),
        (is_range & name.is_in(matching(names, compile_step_pattern(step_pattern)).implode())).alias("_step"),
        ((is_range & name.is_in(matching(names, COMPILE_WORK_PATTERN).implode())) | first_region).alias("_compile"),
    )


def compile_ranges(rows: pl.DataFrame) -> dict[tuple[str, int | None], iv.Intervals]:
    """Per (source, pid): the compile ranges of every thread of the process (``rows`` from
    :func:`labelled`), merged."""
    found = rows.filter(pl.col("_compile"))
    return {
        (str(k[0]), _int(k[1])): _merged(part)
        for k, part in found.partition_by(["source", "pid"], as_dict=True).items()
    }


def host_state(rows: pl.DataFrame, threads: list[ThreadKey]) -> HostState:
    """The states of ``threads`` from the labelled CPU events ``rows`` (:func:`labelled`)."""
    loaders = rows.filter(pl.col("_loader"))
    loader_by_thread = {
        (str(k[0]), _int(k[1]), _int(k[2])): _merged(part)
        for k, part in loaders.partition_by(["source", "pid", "tid"], as_dict=True).items()
    }
    wanted = list(dict.fromkeys(threads))
    want = pl.DataFrame(
        {"source": [t[0] for t in wanted], "pid": [t[1] for t in wanted], "tid": [t[2] for t in wanted]},
        schema={"source": pl.String, "pid": pl.Int64, "tid": pl.Int64},
    ).with_row_index("_thread")
    thread, state_rows = _wanted_rows(rows, want)
    states: dict[ThreadKey, ThreadState] = {}
    empty = iv.Intervals.empty()
    for i, mine in _rows_by_thread(thread, len(wanted)):
        start, end = state_rows.start_ns[mine], state_rows.end_ns[mine]
        states[wanted[i]] = ThreadState(
            sync=state_rows.merged("_sync", thread, i),
            loader=state_rows.merged("_loader", thread, i),
            compile=state_rows.merged("_compile", thread, i),
            recorded=iv.merge(iv.Intervals(start, end)),
            busy=_merged_where(start, end, state_rows.unflagged("_step")[mine])
            if _loads_elsewhere(wanted[i], loader_by_thread)
            else empty,
        )
    for key in wanted:
        states.setdefault(key, ThreadState(empty, empty, empty, empty, empty))
    return HostState(threads=states, loader_by_thread=loader_by_thread)


def _rows_by_thread(thread: np.ndarray | int, n_threads: int) -> list[tuple[int, np.ndarray | slice]]:
    """Each thread (0 to ``n_threads`` - 1) that has rows in ``thread`` (each row's thread, or the one
    thread of every row), in the order their first rows come, with its rows in table order: every
    row, uncopied, where one thread has them all (the usual case: no sort)."""
    if isinstance(thread, int):
        return [(thread, slice(None))]
    if len(thread) and thread.min() == thread.max():
        return [(int(thread[0]), slice(None))]
    order = np.argsort(thread, kind="stable")  # (each thread's rows stay in table order)
    bounds = np.searchsorted(thread[order], np.arange(n_threads + 1))
    found = [i for i in range(n_threads) if bounds[i] < bounds[i + 1]]
    found.sort(key=lambda i: order[bounds[i]])
    return [(i, order[bounds[i] : bounds[i + 1]]) for i in found]


_THREAD: Final = ("source", "pid", "tid")
_FLAGS: Final = ("_sync", "_loader", "_compile", "_step")
_STATE_COLUMNS: Final = ("start_ns", "end_ns", *_FLAGS)
"""What :func:`host_state` reads of each labelled row besides its thread."""


@dataclass(frozen=True)
class _StateRows:
    """The wanted threads' rows as :func:`host_state` reads them: their spans, and for each flag
    the positions of the rows that have it (a few among millions: no mask of the rows' size)."""

    start_ns: iv.Int64Array
    end_ns: iv.Int64Array
    flagged: dict[str, np.ndarray[Any, np.dtype[np.int64]]]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> _StateRows:
        """``rows``' :data:`_STATE_COLUMNS` (a null flag is not set)."""
        positions = rows.select(pl.col(c).fill_null(False).arg_true().cast(pl.Int64).implode() for c in _FLAGS)
        return cls(
            rows.get_column("start_ns").to_numpy(),
            rows.get_column("end_ns").to_numpy(),
            {c: positions.item(0, c).to_numpy() for c in _FLAGS},
        )

    def merged(self, flag: str, thread: np.ndarray | int, i: int) -> iv.Intervals:
        """The merged spans of thread ``i``'s rows with ``flag`` (``thread``: each row's, or the one
        thread of every row)."""
        rows = self.flagged[flag]
        if not isinstance(thread, int):
            rows = rows[thread[rows] == i]
        return iv.merge(iv.Intervals(self.start_ns[rows], self.end_ns[rows])) if rows.size else iv.Intervals.empty()

    def unflagged(self, flag: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Per row, whether it lacks ``flag``."""
        out = np.ones(self.start_ns.size, np.bool_)
        out[self.flagged[flag]] = False
        return out


def _wanted_rows(rows: pl.DataFrame, want: pl.DataFrame) -> tuple[np.ndarray | int, _StateRows]:
    """The rows of the threads of ``want`` (source, pid, tid, ``_thread``: its number), in table
    order: each one's ``_thread`` (one number where one thread has every row, the usual case) and
    their :class:`_StateRows`.  Each row's thread is looked up by its group number (the rows are
    not copied where every row is a wanted thread's); by a join where the keys do not pack into
    numbers (a null pid or tid)."""
    (coded, coded_want), by, _ = integer_groups([rows.select(*_THREAD, *_STATE_COLUMNS), want], _THREAD)
    columns = coded.select(_STATE_COLUMNS)
    if want.height == 1 and one_group(coded_want, coded, by):
        return int(want.item(0, "_thread")), _StateRows.of(columns)
    groups = group_numbers(coded_want, coded, by)
    if groups is None:
        mine = (
            coded.lazy()
            .join(coded_want.lazy().select(*by, "_thread"), on=by, how="inner", nulls_equal=True, maintain_order="left")
            .select("_thread", *_STATE_COLUMNS)
            .collect()
        )
        return mine.get_column("_thread").to_numpy(), _StateRows.of(mine)
    want_group, row_group = groups
    # One slot more than the wanted groups, -1, which a row of no wanted group (-1) reads: each
    # row's thread in one look-up, with no array of the rows' size besides its result.
    thread_of_group = np.full(len(want_group) + 1, -1, np.int64)
    thread_of_group[want_group] = want.get_column("_thread").to_numpy()
    thread = thread_of_group[row_group]
    kept = thread >= 0
    if kept.all():
        return thread, _StateRows.of(columns)
    return thread[kept], _StateRows.of(columns.filter(pl.Series(kept)))


def _loads_elsewhere(key: ThreadKey, loader_by_thread: Mapping[ThreadKey, iv.Intervals]) -> bool:
    """Whether another thread of ``key``'s process has loader ranges."""
    source, pid, tid = key
    return any(s == source and p == pid and t != tid for s, p, t in loader_by_thread)


def _merged_where(start: iv.Int64Array, end: iv.Int64Array, keep: np.ndarray[Any, np.dtype[np.bool_]]) -> iv.Intervals:
    """The merged intervals of the rows ``keep`` selects."""
    return iv.merge(iv.Intervals(start[keep], end[keep])) if keep.any() else iv.Intervals.empty()


def _first_of_name(region: pl.Expr) -> pl.Expr:
    """True on the first rows (by start; every row at the earliest start) of each (source, pid, name)
    among the ``region`` rows."""
    order = pl.when(region).then(pl.col("start_ns")).otherwise(None)
    return order == order.min().over("source", "pid", "name")


def _merged(rows: pl.DataFrame) -> iv.Intervals:
    if rows.is_empty():
        return iv.Intervals.empty()
    return iv.merge(iv.Intervals(rows.get_column("start_ns").to_numpy(), rows.get_column("end_ns").to_numpy()))


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
