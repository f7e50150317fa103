"""One rank of a planned job: its process, its event log, and its GPU with the rules work runs by.

A :class:`Rank` is what a scenario's program receives: ``rank.main`` (a
:class:`~tracegen.planned.thread.Thread`, the script of the process's main thread), more threads
from :meth:`Rank.thread`, and :meth:`Rank.gpu_only` for GPU work no call launched.  Every time is
an int ns relative to the job's origin; nothing is random.  The GPU follows these rules, and
nothing else moves a GPU row:

1. Work launched by a call ``L`` on stream ``s`` starts at ``max(L.end + latency, s free, every
   event s was told to wait for)`` (:attr:`Timing.launch_latency_ns`); a synchronous copy starts at
   ``max(L.start + latency, s free)``, and a pageable host-to-device copy at ``max(L.start +
   stage, s free)``.  It runs for its planned duration; then ``s`` is free.
2. A collective's kernel starts on each rank of its group by rule 1 and ends on all of them at the
   group's latest start plus the transfer time (the job resolves it, :mod:`tracegen.planned.job`).
3. A CUDA graph's kernels share their ``cudaGraphLaunch``'s correlation id: the first starts by
   rule 1, each next one at the previous one's end plus the graph's node gap.
4. A blocking call made at ``t`` returns at ``max(t + sync_min, D + sync_return)`` where ``D`` is
   when what it waits for is done: its stream's last work (``cudaStreamSynchronize``), every
   stream's (``cudaDeviceSynchronize``), the event's (``cudaEventSynchronize``), its own copy's end
   (a synchronous copy, a pageable host-to-device copy).
5. GPU work with no launch starts where the scenario puts it (never before its stream is free) and
   carries a correlation id no call has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from tracegen.catalogue import KernelSpec
from tracegen.event import Event, EventKind
from tracegen.planned.thread import Thread
from tracegen.planned.timing import GpuSpan, Timing

ORPHAN_CORRELATION_BASE: Final = 900_000
"""Correlation ids of GPU work with no launching call start here (no call's id comes near)."""


CollectiveEnd = Callable[[str, int, int, int], int]
"""(group, rank, start, transfer) -> end: how a rank learns when its collective ends."""


class Rank:
    """One process on one GPU: its threads, its GPU streams and every event it records."""

    def __init__(
        self,
        index: int,
        pid: int,
        timing: Timing,
        *,
        compute_stream: int,
        comm_stream: int,
        first_step: int,
        collective_end: CollectiveEnd,
    ) -> None:
        self.index = index
        """The rank (and the GPU: rank r drives GPU r)."""
        self.pid = pid
        self.timing = timing
        self.compute_stream = compute_stream
        self.comm_stream = comm_stream
        self.first_step = first_step
        self.steps = 0
        """Step ranges opened so far (the next is ``ProfilerStep#{first_step + steps}``)."""
        self.events: list[Event] = []
        self.threads: list[tuple[int, str]] = []
        """Threads other than the main one, as (tid, name)."""
        self._collective_end = collective_end
        self._free: dict[int, int] = {}
        self._correlation = 0
        self._external_id = 0
        self._orphans = 0
        self.main = Thread(self, pid)
        """The main thread (tid = pid, as on Linux)."""

    @property
    def device(self) -> int:
        return self.index

    def thread(self, name: str) -> Thread:
        """Another thread of this process (a DataLoader pin-memory thread, a callback thread)."""
        tid = self.pid + 1 + len(self.threads)
        self.threads.append((tid, name))
        return Thread(self, tid)

    # -- ids and the event log
    def correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def external_id(self) -> int:
        self._external_id += 1
        return self._external_id

    @property
    def id_counts(self) -> tuple[int, int]:
        """(correlation ids, external ids) handed out."""
        return self._correlation, self._external_id

    def add(self, kind: EventKind, start: int, end: int, name: str, **kw: object) -> int:
        """Record an event; returns its index (for :meth:`close`)."""
        if end < start:
            raise ValueError(f"{name}: ends ({end}) before it starts ({start})")
        self.events.append(Event(kind, start, end, name, len(self.events), **kw))  # type: ignore[arg-type]
        return len(self.events) - 1

    def close(self, index: int, end: int) -> None:
        """Set the end of an event recorded open (a range, an op)."""
        self.events[index] = replace(self.events[index], end_ns=end)

    # -- the GPU
    def stream(self, stream: int | None) -> int:
        return self.compute_stream if stream is None else stream

    def free(self, stream: int | None = None) -> int:
        """When ``stream``'s queued work (and the events it waits for) is done."""
        return self._free.get(self.stream(stream), 0)

    def drained(self) -> int:
        """When every stream's queued work is done."""
        return max(self._free.values(), default=0)

    def ready(self, stream: int | None, earliest: int) -> int:
        """When work that may start at ``earliest`` starts on ``stream`` (rule 1)."""
        return max(earliest, self.free(stream))

    def occupy(self, stream: int | None, start: int, end: int) -> GpuSpan:
        s = self.stream(stream)
        if start < self._free.get(s, 0):
            raise ValueError(f"stream {s} is busy until {self._free[s]}, work cannot start at {start}")
        self._free[s] = end
        return GpuSpan(start, end)

    def enqueue(self, stream: int | None, earliest: int, duration_ns: int) -> GpuSpan:
        start = self.ready(stream, earliest)
        return self.occupy(stream, start, start + duration_ns)

    def wait(self, stream: int | None, until: int) -> None:
        """Later work on ``stream`` starts no earlier than ``until`` (``cudaStreamWaitEvent``)."""
        s = self.stream(stream)
        self._free[s] = max(self._free.get(s, 0), until)

    def collective_end(self, group: str, start: int, transfer_ns: int) -> int:
        return self._collective_end(group, self.index, start, transfer_ns)

    def gpu_row(
        self, kind: EventKind, span: GpuSpan, name: str, stream: int | None, correlation: int, **kw: object
    ) -> None:
        self.add(
            kind,
            span.start_ns,
            span.end_ns,
            name,
            device=self.device,
            stream=self.stream(stream),
            correlation=correlation,
            **kw,
        )

    def gpu_only(self, kernel: KernelSpec, start_ns: int, duration_ns: int, stream: int | None = None) -> GpuSpan:
        """A kernel no recorded call launched (rule 5): its correlation id matches no call."""
        span = self.occupy(stream, start_ns, start_ns + duration_ns)
        self._orphans += 1
        self.gpu_row("kernel", span, kernel.name, stream, ORPHAN_CORRELATION_BASE + self._orphans, kernel=kernel)
        return span
