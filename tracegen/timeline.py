"""The ground truth: a simulated job as a :class:`Timeline`, and that timeline as an event table.

A :class:`Timeline` holds the job's processes (one per rank, :class:`ProcessInfo`), a few
simulated step templates (:class:`StepTemplate`: every rank's events relative to the step start)
and the profiled steps laid out on the trace clock (:class:`StepInstance`: which template, at
what offset, with which id bases).  Every step ends with the GPU drained, so a step is
self-contained and the profiled steps are templates repeated at vectorised offsets (cheap for
the million-kernel traces of the benchmarks).  :meth:`Timeline.events` returns the ground truth
as a traceq event table (``traceq.schema``); the writers (:mod:`tracegen.nsys`,
:mod:`tracegen.kineto`) walk :meth:`Timeline.rank_steps`.

Clock: all times are int64 ns on the *trace clock*, the clock both writers use, chosen so that a
Kineto file (``ts`` relative to ``baseTimeNanoseconds`` = :data:`KINETO_BASE_TIME_NS`) and an nsys
export (raw ``start``/``end``) carry identical numbers for every GPU, API and range row; Unix
epoch ns = trace ns + :data:`KINETO_BASE_TIME_NS` in both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from tracegen.event import Event, View, in_view, kineto_category, nsys_display_name, nsys_table
from tracegen.scenario import Scenario
from traceq.schema import conform

KINETO_BASE_TIME_NS: Final = 1_735_689_600_000_000_000
"""Unix-epoch ns of trace-clock zero (2025-01-01T00:00:00Z, a Kineto three-month boundary)."""

TRACE_ORIGIN_NS: Final = 1_043_217_331_420_000
"""Trace-clock ns at which every synthetic capture starts (about 12 days of uptime)."""

FIRST_STEP_DELAY_NS: Final = 1_250_000
"""From capture start to the first profiled step (profiler warm-up)."""

CAPTURE_TAIL_NS: Final = 750_000
"""From the end of the last step to capture stop."""


@dataclass(frozen=True)
class ProcessInfo:
    """One rank's process: its OS ids, GPU and CUDA context."""

    rank: int
    pid: int
    tid: int
    device: int
    context: int
    name: str = "python3"
    extra_threads: tuple[tuple[int, str], ...] = ()
    """Other threads of the process that record CPU events, as (tid, thread name); the main thread is ``tid``."""


@dataclass(frozen=True)
class StepTemplate:
    """One simulated step: every rank's events, relative to the step start."""

    period_ns: int
    events: tuple[tuple[Event, ...], ...]
    """Indexed by rank; sorted by (start, longest first, creation order)."""
    correlation_count: tuple[int, ...]
    external_id_count: tuple[int, ...]


@dataclass(frozen=True)
class StepInstance:
    """A profiled step: which template, where on the trace clock, and its id bases per rank."""

    template: int
    step_number: int
    offset_ns: int
    correlation_base: tuple[int, ...]
    external_id_base: tuple[int, ...]

    @property
    def step_name(self) -> str:
        return f"ProfilerStep#{self.step_number}"


@dataclass(frozen=True)
class Timeline:
    """A simulated scenario: processes, step templates and the profiled steps laid out in time."""

    scenario: Scenario
    processes: tuple[ProcessInfo, ...]
    templates: tuple[StepTemplate, ...]
    instances: tuple[StepInstance, ...]
    nsys_cpu_ops: bool = False
    """Write the ``cpu_op`` rows to nsys as NVTX ranges too (as ``torch.autograd.profiler.emit_nvtx()``
    does), so that both formats hold the same CPU ranges; the simulator's timelines leave them out."""

    @property
    def capture_start_ns(self) -> int:
        return TRACE_ORIGIN_NS

    @property
    def capture_end_ns(self) -> int:
        last = self.instances[-1]
        return last.offset_ns + self.templates[last.template].period_ns + CAPTURE_TAIL_NS

    def rank_steps(self, rank: int) -> Iterator[tuple[StepInstance, tuple[Event, ...]]]:
        """Each profiled step of ``rank`` with its template events (for the writers)."""
        for inst in self.instances:
            yield inst, self.templates[inst.template].events[rank]

    def events(self, view: View = "truth", *, source: str = "") -> pl.DataFrame:
        """The ground truth as a traceq event table (``traceq.schema.conform``), sorted by
        ``start_ns``, ``end_ns`` and rank.

        ``source`` fills the ``source`` column ("" by default; pass the output path to compare
        with an import of that file).  ``category`` is the Kineto ``cat`` (``truth``, ``kineto``)
        or the nsys table name (``nsys``).  Names of memcpy, memset and gpu_sync rows are the
        source's own spelling: Kineto's ``Memcpy HtoD (Pinned -> Device)`` / ``Stream Sync``, or in
        the ``nsys`` view ``[CUDA memcpy HtoD]`` / the causing API call (``cudaStreamSynchronize``).
        ``rank`` is always the planted rank, whether or not the file records it.
        """
        frames: list[pl.DataFrame] = []
        for t_index, template in enumerate(self.templates):
            insts = [i for i in self.instances if i.template == t_index]
            if not insts:
                continue
            for proc in self.processes:
                base = _base_frame(template.events[proc.rank], proc, view, self.nsys_cpu_ops)
                if base.height == 0:
                    continue
                frames.append(_tile(base, insts, proc.rank))
        if not frames:
            raise ValueError("timeline has no events")
        df = pl.concat(frames, how="vertical")
        df = df.sort(["start_ns", "end_ns", "rank", "_order"], maintain_order=True)
        return conform(df.with_columns(pl.lit(source).alias("source")))


def _base_frame(events: tuple[Event, ...], proc: ProcessInfo, view: View, nsys_cpu_ops: bool) -> pl.DataFrame:
    rows = [e for e in events if in_view(e, view, nsys_cpu_ops=nsys_cpu_ops)]
    on_gpu = [e.device is not None for e in rows]
    kernels = [e.kernel for e in rows]
    return pl.DataFrame(
        {
            "kind": ["range" if view == "nsys" and e.kind == "cpu_op" else e.kind for e in rows],
            "start_ns": [e.start_ns for e in rows],
            "end_ns": [e.end_ns for e in rows],
            "name": [nsys_display_name(e) if view == "nsys" else e.name for e in rows],
            "pid": [proc.pid] * len(rows),
            "tid": [e.tid for e in rows],
            "device": [e.device for e in rows],
            "stream": [e.stream for e in rows],
            "correlation": [e.correlation for e in rows],
            "is_comm": [k is not None and k.is_comm for k in kernels],
            "bytes": [e.bytes for e in rows],
            "copy_kind": [e.copy_kind for e in rows],
            "rank": [proc.rank] * len(rows),
            "category": [nsys_table(e) if view == "nsys" else kineto_category(e) for e in rows],
            "context": [proc.context if g and e.kind != "range" else None for e, g in zip(rows, on_gpu, strict=True)],
            "external_id": [None if view == "nsys" else e.external_id for e in rows],
            "sync_kind": [e.sync_kind for e in rows],
            "grid_x": [k.grid[0] if k else None for k in kernels],
            "grid_y": [k.grid[1] if k else None for k in kernels],
            "grid_z": [k.grid[2] if k else None for k in kernels],
            "block_x": [k.block[0] if k else None for k in kernels],
            "block_y": [k.block[1] if k else None for k in kernels],
            "block_z": [k.block[2] if k else None for k in kernels],
            "registers_per_thread": [k.registers_per_thread if k else None for k in kernels],
            "shared_memory_bytes": [k.shared_memory_bytes if k else None for k in kernels],
            "graph_id": [e.graph_id for e in rows],
            "step_range": [e.step_range for e in rows],
            "_seq": [e.seq for e in rows],
        },
        schema_overrides={
            "tid": pl.Int64,
            "device": pl.Int32,
            "stream": pl.Int64,
            "correlation": pl.Int64,
            "bytes": pl.Int64,
            "copy_kind": pl.String,
            "sync_kind": pl.String,
            "external_id": pl.Int64,
            "context": pl.Int64,
            "grid_x": pl.Int32,
            "grid_y": pl.Int32,
            "grid_z": pl.Int32,
            "block_x": pl.Int32,
            "block_y": pl.Int32,
            "block_z": pl.Int32,
            "registers_per_thread": pl.Int32,
            "shared_memory_bytes": pl.Int64,
            "graph_id": pl.Int64,
        },
    )


def _tile(base: pl.DataFrame, insts: list[StepInstance], rank: int) -> pl.DataFrame:
    """``base`` repeated once per instance, shifted by the instance's time and id offsets."""
    m, n = base.height, len(insts)
    rows = pl.Series("_row", np.tile(np.arange(m, dtype=np.int64), n))
    per_row = {
        "_off": np.repeat(np.array([i.offset_ns for i in insts], dtype=np.int64), m),
        "_corr": np.repeat(np.array([i.correlation_base[rank] for i in insts], dtype=np.int64), m),
        "_ext": np.repeat(np.array([i.external_id_base[rank] for i in insts], dtype=np.int64), m),
        "_step": np.repeat(np.array([i.step_number for i in insts], dtype=np.int64), m),
    }
    df = base.select(pl.all().gather(rows)).with_columns(**{k: pl.Series(k, v) for k, v in per_row.items()})
    return df.with_columns(
        (pl.col("start_ns") + pl.col("_off")).alias("start_ns"),
        (pl.col("end_ns") + pl.col("_off")).alias("end_ns"),
        (pl.col("correlation") + pl.col("_corr")).alias("correlation"),
        (pl.col("external_id") + pl.col("_ext")).alias("external_id"),
        pl.when(pl.col("step_range"))
        .then(pl.lit("ProfilerStep#") + pl.col("_step").cast(pl.String))
        .otherwise(pl.col("name"))
        .alias("name"),
        (pl.col("_step") * 1_000_000_000 + pl.col("_seq")).alias("_order"),
    )
