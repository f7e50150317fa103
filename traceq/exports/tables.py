"""The named tables of a trace: what ``traceq sql`` queries and ``traceq convert -o x.db`` writes.

One registry, :data:`TABLES`, maps each name to how its frame is built; :class:`Tables` builds each
one once, on first use, from one trace's events and (for the tables that need it) one analysis,
which itself runs once and only when a table asks for it.  Adding a table is one entry.

Every table's text columns are polars ``String`` (the event table's Categorical and Enum columns
are cast, lazily: a query that never reads ``name`` never casts it), so ``LIKE`` and string
functions work in every SQL engine; integers stay integers, nulls stay null.  Columns are
documented in ``docs/sql.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Final

import polars as pl
import pyarrow as pa

from traceq import schema
from traceq.analyses import CAUSES, Analysis, Options, analyze
from traceq.analyses.steps import step_index
from traceq.errors import InvalidArgumentError
from traceq.pandas_frames import to_pandas

if TYPE_CHECKING:
    import pandas


@dataclass(frozen=True)
class TableSpec:
    """One named table: what a row is, and how it is built from :class:`Tables`."""

    name: str
    row: str
    """What one row is, for ``traceq sql --help`` and the docs."""
    build: Callable[[Tables], pl.LazyFrame]
    analysis: bool = False
    """Built from the analysis (gaps, steps, ...), not from the events alone."""


_EVENT_VIEWS: Final[Mapping[str, tuple[str, bool | None]]] = {
    "kernels": ("kernel", None),
    "api": ("cuda_api", None),
    "ranges": ("range", True),
    "gpu_ranges": ("range", False),
}
"""The tables that are the event table filtered (views in the SQLite file): name -> (kind, whether
the rows are on a CPU thread: True, on the GPU: False, either: None).  A range's GPU-side copy has no
thread, so a per-step join over ``ranges`` counts each step once."""


def _view(name: str) -> Callable[[Tables], pl.LazyFrame]:
    kind, on_thread = _EVENT_VIEWS[name]
    keep = pl.col("kind") == kind
    if on_thread is not None:
        keep &= pl.col("tid").is_not_null() if on_thread else pl.col("tid").is_null()
    return lambda tables: tables.lazy("events").filter(keep)


TABLES: Final[Mapping[str, TableSpec]] = {
    spec.name: spec
    for spec in (
        TableSpec("events", "one row per event of the event table, with dur_ns and step", lambda t: t.events_view),
        TableSpec("kernels", "one row per kernel (the events of kind 'kernel')", _view("kernels")),
        TableSpec("api", "one row per CUDA/HIP API call (kind 'cuda_api')", _view("api")),
        TableSpec(
            "ranges", "one row per NVTX range or user annotation on a CPU thread (kind 'range')", _view("ranges")
        ),
        TableSpec(
            "gpu_ranges",
            "one row per GPU-side copy of a range (Kineto's gpu_user_annotation: ProfilerStep#N on a stream)",
            _view("gpu_ranges"),
        ),
        TableSpec("gaps", "one row per idle interval of a device, with its causes", lambda t: t.gaps_view, True),
        TableSpec("steps", "one row per step window of each device", lambda t: t.steps_view, True),
        TableSpec("devices", "one row per device (a process on one GPU)", lambda t: t.devices_view, True),
        TableSpec(
            "operators", "one row per device and launching operator", lambda t: t.analysis.operator_table.lazy(), True
        ),
        TableSpec(
            "phases", "one row per device and phase (a CPU range)", lambda t: t.analysis.phase_table.lazy(), True
        ),
        TableSpec(
            "import_stats",
            "one row per source category: events read, rows made, skipped",
            lambda t: t.meta("import_stats"),
        ),
        TableSpec(
            "sources", "one row per source file: format, producer, rank, clock offset", lambda t: t.meta("sources")
        ),
    )
}
"""Every named table, in the order ``traceq sql`` lists them."""


class Tables:
    """The named tables of one trace, each built once, on first use.

    ``events`` is the trace's event table, ``metadata`` its import statistics and sources
    (:meth:`traceq.trace.Trace.metadata_tables`), and ``options`` what the analysis is asked (the step
    pattern first); the analysis runs at most once, for the first table that needs it
    (:data:`TABLES`' ``analysis``), unless it is given."""

    def __init__(
        self,
        events: pl.DataFrame,
        options: Options | None = None,
        analysis: Analysis | None = None,
        metadata: Mapping[str, pa.Table] | None = None,
    ) -> None:
        self._events = events
        self._metadata = metadata or {}
        self.options = options or Options()
        self._analysis = analysis
        self._frames: dict[str, pl.DataFrame] = {}

    names: Final = tuple(TABLES)

    @property
    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = analyze(self._events, self.options)
        return self._analysis

    def lazy(self, name: str) -> pl.LazyFrame:
        """The table ``name`` as a LazyFrame (nothing is computed until it is collected)."""
        if name in self._frames:
            return self._frames[name].lazy()
        return TABLES[name].build(self)

    def frame(self, name: str) -> pl.DataFrame:
        """The table ``name``, computed once."""
        if name not in self._frames:
            self._frames[name] = TABLES[name].build(self).collect()
        return self._frames[name]

    def to_pandas(self, name: str) -> pandas.DataFrame:
        """The table ``name`` as pandas (the ``traceq[pandas]`` extra; dtypes: :mod:`traceq.pandas_frames`)."""
        return to_pandas(self.frame(name))

    def needed_by(self, query: str) -> tuple[str, ...]:
        """The tables whose names ``query`` mentions as words (a superset of those it reads): only
        these are registered with the SQL engine, so a query over the events never runs the analysis."""
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
        return tuple(n for n in self.names if n in words)

    def sql(self, query: str) -> pl.DataFrame:
        """Run ``query`` with polars' SQL engine over the tables it names (``docs/sql.md``)."""
        context = pl.SQLContext({name: self.lazy(name) for name in self.needed_by(query)})
        try:
            return context.execute(query, eager=True)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidArgumentError(
                f"the query failed: {reason[:300]}", hint=f"the tables are {', '.join(self.names)} (docs/sql.md)"
            ) from exc

    # -- how the tables are built ------------------------------------------------------------

    def events_with_step(self) -> pl.LazyFrame:
        """The event table with ``dur_ns`` and ``step``, its Categorical columns kept (what the
        SQLite file stores as TEXT)."""
        lazy = self._events.lazy().with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
        if "step" not in self._events.columns:
            # the one definition of a row's step (docs/event-table.md), as traceq.events gives it
            lazy = lazy.with_columns(step_index(self._events, self.options.step_pattern))
        return lazy

    @cached_property
    def events_view(self) -> pl.LazyFrame:
        text = [c for c, t in self._events.schema.items() if isinstance(t, pl.Categorical | pl.Enum)]
        return self.events_with_step().with_columns(pl.col(c).cast(pl.String) for c in text)

    def meta(self, name: str) -> pl.LazyFrame:
        """One of the metadata tables (empty where none was given)."""
        table = self._metadata.get(name)
        frame = pl.DataFrame() if table is None else pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame.lazy()

    @cached_property
    def gaps_view(self) -> pl.LazyFrame:
        gaps = self.analysis.gap_table
        step = step_index(self._events, self.options.step_pattern, rows=gaps)
        return gaps.lazy().with_columns(step.alias("step"))

    @cached_property
    def steps_view(self) -> pl.LazyFrame:
        return self.analysis.steps_frame().lazy()

    @cached_property
    def devices_view(self) -> pl.LazyFrame:
        rows = []
        for d in self.analysis.devices:
            rows.append(
                {
                    "rank": d.rank,
                    "device": d.device,
                    "pid": d.pid,
                    "source": d.source,
                    "window": d.window,
                    "steps": d.steps,
                    "warmup_steps": d.warmup_steps,
                    "dur_ns": d.dur_ns,
                    "compute_ns": d.compute_ns,
                    "comm_ns": d.comm_ns,
                    "exposed_comm_ns": d.exposed_comm_ns,
                    "idle_ns": d.idle_ns,
                    **{f"idle_{c}_ns": int(d.idle_by_cause_ns.get(c, 0)) for c in CAUSES},
                    **{f"gaps_{c}": int(d.gaps_by_cause.get(c, 0)) for c in CAUSES},
                    "kernels": d.kernels,
                    "memcpys": d.memcpys,
                    "memsets": d.memsets,
                    "launch_latency_ns": d.launch_latency_ns,
                    "unlaunched_activities": d.unlaunched_activities,
                    "regime": None if d.regime is None else d.regime.verdict,
                    "steady_dur_ns": d.steady.dur_ns,
                    "steady_idle_ns": d.steady.idle_ns,
                }
            )
        return pl.DataFrame(rows, schema=_DEVICES_SCHEMA).lazy()


_DEVICES_SCHEMA: Final = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "pid": pl.Int64,
    "source": pl.String,
    "window": pl.String,
    **dict.fromkeys(("steps", "warmup_steps", "dur_ns", "compute_ns", "comm_ns", "exposed_comm_ns"), pl.Int64),
    "idle_ns": pl.Int64,
    **{f"idle_{c}_ns": pl.Int64 for c in CAUSES},
    **{f"gaps_{c}": pl.Int64 for c in CAUSES},
    **dict.fromkeys(("kernels", "memcpys", "memsets", "launch_latency_ns", "unlaunched_activities"), pl.Int64),
    "regime": pl.String,
    "steady_dur_ns": pl.Int64,
    "steady_idle_ns": pl.Int64,
}


def event_view_filters() -> Mapping[str, str]:
    """The tables that are the event table filtered: table name -> the SQL condition on ``events``."""
    side = {None: "", True: " AND tid IS NOT NULL", False: " AND tid IS NULL"}
    return {name: f"kind = '{kind}'{side[on_thread]}" for name, (kind, on_thread) in _EVENT_VIEWS.items()}


assert all(kind in schema.KINDS for kind, _ in _EVENT_VIEWS.values())
