"""A planned job: a program run on every rank, its collectives resolved, laid out as a :class:`Timeline`.

:func:`build_job` calls the scenario's program once per rank (a function of a
:class:`~tracegen.planned.rank.Rank`, writing each thread's actions in order).  A collective ends
on every rank of its group at the group's latest start plus the transfer time, which no rank knows
while its own program runs; so the job runs the programs again with the ends the previous pass
found, until they stop changing (each pass fixes at least the earliest collective still wrong, so
a job of n collectives needs at most n + 1 passes).  The result is one
:class:`~tracegen.timeline.Timeline` template holding every rank's events from the job's origin,
with the ``cpu_op`` rows also written to nsys as NVTX ranges, so both formats carry the same ns and
the same CPU ranges; :meth:`PlannedJob.write` writes it as an nsys export and as Kineto JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from tracegen.catalogue import H100_SXM, GpuSpec
from tracegen.kineto import write_kineto_json, write_kineto_ranks
from tracegen.nsys.writer import write_nsys_sqlite
from tracegen.planned.rank import Rank
from tracegen.planned.timing import Timing
from tracegen.scenario import Scenario
from tracegen.timeline import FIRST_STEP_DELAY_NS, TRACE_ORIGIN_NS, ProcessInfo, StepInstance, StepTemplate, Timeline

Program = Callable[[Rank], None]
"""A scenario's script: what every rank's threads do, in order (branch on ``rank.index``)."""
Format = Literal["nsys", "kineto"]
FORMATS: Final[tuple[Format, ...]] = ("nsys", "kineto")
JOB_ORIGIN_NS: Final = TRACE_ORIGIN_NS + FIRST_STEP_DELAY_NS
"""Trace-clock ns of the job's origin (time 0 of the program)."""
_MAX_PASSES: Final = 1_000
_FIRST_PID: Final = 48_213


@dataclass(frozen=True)
class PlannedJob:
    """A built job: its timeline and each rank's process id."""

    name: str
    timeline: Timeline
    pids: tuple[int, ...]
    """Process id of each rank (rank r drives GPU r)."""

    def write(self, directory: str | Path, fmt: Format) -> Path:
        """Write the job in ``fmt`` under ``directory``; returns what to load.

        nsys: one export for the node, ``<name>.nsys.sqlite``.  Kineto: ``<name>.pt.trace.json.gz``
        for one rank, else a folder ``<name>/`` of ``rank<r>.pt.trace.json.gz``.
        """
        folder = Path(directory)
        if fmt == "nsys":
            return write_nsys_sqlite(self.timeline, folder / f"{self.name}.nsys.sqlite")
        if len(self.pids) == 1:
            return write_kineto_json(self.timeline, folder / f"{self.name}.pt.trace.json.gz")
        write_kineto_ranks(self.timeline, folder / self.name)
        return folder / self.name


class _Collectives:
    """The collectives of one pass: each rank's arrivals, and the ends the previous pass found."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends
        self.arrivals: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self._counts: dict[tuple[str, int], int] = {}

    def end(self, group: str, rank: int, start: int, transfer_ns: int) -> int:
        seq = self._counts.get((group, rank), 0)
        self._counts[(group, rank)] = seq + 1
        self.arrivals.setdefault((group, seq), []).append((rank, start, transfer_ns))
        return self.ends.get((group, seq), start + transfer_ns)

    def resolved(self, ranks: int) -> dict[tuple[str, int], int]:
        out = {}
        for key, arrivals in self.arrivals.items():
            if key[0] == "world" and len(arrivals) != ranks:
                raise ValueError(f"collective {key} reached by {len(arrivals)} of {ranks} ranks")
            out[key] = max(start for _, start, _ in arrivals) + max(t for _, _, t in arrivals)
        return out


def build_job(
    name: str,
    program: Program,
    *,
    ranks: int = 1,
    world_size: int | None = None,
    timing: Timing | None = None,
    gpu: GpuSpec = H100_SXM,
    first_step: int = 1,
    compute_stream: int = 7,
    comm_stream: int = 20,
) -> PlannedJob:
    """Run ``program`` on ``ranks`` ranks (one process and GPU each) into a :class:`PlannedJob`.

    ``world_size`` (default ``ranks``) is the job the trace says it belongs to; collectives in
    group ``"world"`` wait for all ``ranks`` simulated ranks.  ``first_step`` numbers the first
    ``ProfilerStep#N``.  Deterministic: same arguments, same timeline.
    """
    timing = Timing() if timing is None else timing
    pids = tuple(_FIRST_PID + 1_117 * r for r in range(ranks))
    ends: dict[tuple[str, int], int] = {}
    for _ in range(_MAX_PASSES):
        collectives = _Collectives(ends)
        sims = [
            Rank(
                r,
                pids[r],
                timing,
                compute_stream=compute_stream,
                comm_stream=comm_stream,
                first_step=first_step,
                collective_end=collectives.end,
            )
            for r in range(ranks)
        ]
        for sim in sims:
            program(sim)
        found = collectives.resolved(ranks)
        if found == ends:
            break
        ends = found
    else:
        raise RuntimeError(f"{name}: the collectives' ends did not settle")
    scenario = Scenario(
        name,
        ranks=ranks,
        world_size=ranks if world_size is None else world_size,
        steps=max(1, max(s.steps for s in sims)),
        gpu=gpu,
        first_step_number=first_step,
        compute_stream=compute_stream,
        nccl_stream=comm_stream,
        first_pid=_FIRST_PID,
    )
    procs = tuple(
        ProcessInfo(
            rank=s.index, pid=s.pid, tid=s.pid, device=s.device, context=s.index + 1, extra_threads=tuple(s.threads)
        )
        for s in sims
    )
    per_rank = tuple(tuple(sorted(s.events, key=lambda e: (e.start_ns, -e.end_ns, e.seq))) for s in sims)
    period = max((e.end_ns for events in per_rank for e in events), default=0)
    template = StepTemplate(period, per_rank, tuple(s.id_counts[0] for s in sims), tuple(s.id_counts[1] for s in sims))
    instance = StepInstance(0, first_step, JOB_ORIGIN_NS, (0,) * ranks, (0,) * ranks)
    return PlannedJob(name, Timeline(scenario, procs, (template,), (instance,), nsys_cpu_ops=True), pids)
