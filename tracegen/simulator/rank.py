"""The rank simulator: one rank's CPU thread and GPU streams during one step.

:class:`RankSim` is the small machine a step program (:mod:`tracegen.simulator.training_step`)
drives: ``annotation`` and ``op`` open CPU ranges, ``kernel``, ``memcpy`` and ``memset`` call the
CUDA runtime and enqueue GPU work, ``stream_synchronize``, ``event_record`` and
``stream_wait_event`` order the CPU and the streams.  GPU work starts when it is launched *and*
its stream is free; ``cudaStreamSynchronize`` blocks the CPU until the stream drains.  Every call
records :class:`~tracegen.event.Event` rows, times relative to the step start, with durations
from the cost model (:class:`~tracegen.simulator.costs.Costs`) and seeded Gaussian jitter.  At a
collective the step program yields a :class:`CollectiveCall`; the job simulator
(:mod:`tracegen.simulator.job`) answers with the time the collective ends on every rank.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from tracegen.catalogue import (
    EVENT_RECORD,
    KERNELS,
    LAUNCH_KERNEL,
    MEM_DEVICE,
    MEM_PAGEABLE,
    MEM_PINNED,
    MEMCPY_ASYNC,
    MEMSET_ASYNC,
    STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
    ApiSpec,
)
from tracegen.event import Event, EventKind
from tracegen.scenario import Scenario
from tracegen.simulator.costs import Costs
from tracegen.timeline import ProcessInfo


@dataclass(frozen=True)
class CollectiveCall:
    """A rank arriving at a collective: when its NCCL kernel could start, and its transfer time."""

    ready_ns: int
    transfer_ns: int


class RankSim:
    """One rank's CPU thread and GPU streams during one step (times relative to the step)."""

    def __init__(self, scenario: Scenario, costs: Costs, proc: ProcessInfo, rng: random.Random, slowdown: float):
        self.sc = scenario
        self.c = costs
        self.proc = proc
        self.rng = rng
        self.slowdown = slowdown
        self.t = 0
        self.events: list[Event] = []
        self.stream_free = {scenario.compute_stream: 0, scenario.nccl_stream: 0}
        self.n_corr = 0
        self.n_ext = 0
        self._ext_stack: list[int] = []
        self._user_stack: list[int] = []
        self._links: list[tuple[int, int]] = []
        self._next_cuda_event = 0

    # -- clocks and ids
    def gpu_ns(self, ns: int) -> int:
        """A GPU duration of about ``ns``: this rank's slowdown and 3% jitter, at least 800 ns."""
        return max(800, round(ns * self.slowdown * (1.0 + self.rng.gauss(0.0, 0.03))))

    def cpu_ns(self, ns: int) -> int:
        """A CPU duration of about ``ns``: 8% jitter, at least 300 ns."""
        return max(300, round(ns * (1.0 + self.rng.gauss(0.0, 0.08))))

    def _add(self, kind: EventKind, start: int, end: int, name: str, **kw: object) -> int:
        self.events.append(Event(kind, start, end, name, len(self.events), **kw))  # type: ignore[arg-type]
        return len(self.events) - 1

    def _close(self, index: int) -> None:
        self.events[index] = replace(self.events[index], end_ns=self.t)

    def host(self, ns: int) -> None:
        """CPU time outside any CUDA call (Python, data loading)."""
        self.t += self.cpu_ns(ns)

    # -- CPU ranges
    @contextmanager
    def annotation(self, name: str, *, step_range: bool = False) -> Iterator[None]:
        """A ``record_function`` range around the block (``step_range``: the ``ProfilerStep#N``)."""
        ext = self.n_ext
        self.n_ext += 1
        index = self._add(
            "range",
            self.t,
            self.t,
            name,
            tid=self.proc.tid,
            external_id=ext,
            step_range=step_range,
            user_annotation=True,
        )
        self._ext_stack.append(ext)
        self._user_stack.append(index)
        self.t += self.cpu_ns(2_000)
        try:
            yield
        finally:
            self.t += self.cpu_ns(1_500)
            self._user_stack.pop()
            self._ext_stack.pop()
            self._close(index)

    @contextmanager
    def op(self, name: str, overhead_ns: int | None = None) -> Iterator[None]:
        """An ``aten::``/autograd ``cpu_op`` around the block, with its dispatch overhead."""
        ext = self.n_ext
        self.n_ext += 1
        index = self._add("cpu_op", self.t, self.t, name, tid=self.proc.tid, external_id=ext)
        self._ext_stack.append(ext)
        self.t += self.cpu_ns(self.c.op_overhead if overhead_ns is None else overhead_ns)
        try:
            yield
        finally:
            self.t += self.cpu_ns(self.c.op_post)
            self._ext_stack.pop()
            self._close(index)
        self.t += self.cpu_ns(self.c.python_gap)

    # -- CUDA calls
    def api_call(self, api: ApiSpec, duration_ns: int | None = None) -> tuple[int, int, int]:
        """Record a CUDA runtime call starting now; returns its (start, end, correlation id)."""
        corr = self.n_corr
        self.n_corr += 1
        start = self.t
        end = start + (self.cpu_ns(self.c.launch_api) if duration_ns is None else duration_ns)
        self._add(
            "cuda_api",
            start,
            end,
            api.name,
            tid=self.proc.tid,
            correlation=corr,
            external_id=self._ext_stack[-1] if self._ext_stack else None,
            api=api,
        )
        return start, end, corr

    def gpu_row(self, kind: EventKind, start: int, end: int, name: str, stream: int, corr: int, **kw: object) -> None:
        """Record GPU work on ``stream``, linked to the call ``corr`` and to the enclosing annotation."""
        index = self._add(
            kind,
            start,
            end,
            name,
            device=self.proc.device,
            stream=stream,
            correlation=corr,
            external_id=self._ext_stack[-1] if self._ext_stack else None,
            **kw,
        )
        if self._user_stack and kind in ("kernel", "memcpy", "memset"):
            self._links.append((index, self._user_stack[-1]))

    def _enqueue(self, stream: int, api_start: int, duration: int) -> tuple[int, int]:
        start = max(api_start + self.cpu_ns(self.c.launch_latency), self.stream_free[stream])
        self.stream_free[stream] = start + duration
        return start, start + duration

    def kernel(self, key: str, duration_ns: int, stream: int | None = None) -> None:
        spec = KERNELS[key]
        stream = self.sc.compute_stream if stream is None else stream
        api_start, api_end, corr = self.api_call(LAUNCH_KERNEL)
        start, end = self._enqueue(stream, api_start, self.gpu_ns(duration_ns))
        self.gpu_row("kernel", start, end, spec.name, stream, corr, kernel=spec)
        self.t = api_end + self.cpu_ns(self.c.launch_gap)

    def memcpy(self, copy_kind: str, nbytes: int, duration_ns: int, src: int, dst: int, *, blocking: bool) -> None:
        stream = self.sc.compute_stream
        api_start, api_end, corr = self.api_call(MEMCPY_ASYNC)
        start, end = self._enqueue(stream, api_start, max(800, round(duration_ns * (1 + self.rng.gauss(0, 0.02)))))
        names = {MEM_PAGEABLE: "Pageable", MEM_PINNED: "Pinned", MEM_DEVICE: "Device"}
        self.gpu_row(
            "memcpy",
            start,
            end,
            f"Memcpy {copy_kind} ({names[src]} -> {names[dst]})",
            stream,
            corr,
            bytes=nbytes,
            copy_kind=copy_kind,
            src_kind=src,
            dst_kind=dst,
        )
        if blocking:  # pageable memory: the call returns once the staged copy is done
            api_end = max(api_end, end + self.cpu_ns(2_000))
            self.events[-2] = replace(self.events[-2], end_ns=api_end)
        self.t = api_end + self.cpu_ns(self.c.launch_gap)

    def memset(self, nbytes: int, duration_ns: int) -> None:
        stream = self.sc.compute_stream
        api_start, api_end, corr = self.api_call(MEMSET_ASYNC)
        start, end = self._enqueue(stream, api_start, self.gpu_ns(duration_ns))
        self.gpu_row("memset", start, end, "Memset (Device)", stream, corr, bytes=nbytes, dst_kind=MEM_DEVICE)
        self.t = api_end + self.cpu_ns(self.c.launch_gap)

    def stream_synchronize(self, stream: int) -> None:
        """Block until ``stream`` drains (``cudaStreamSynchronize``)."""
        api_start = self.t
        sync_start = api_start + self.cpu_ns(600)
        sync_end = max(sync_start + self.cpu_ns(400), self.stream_free[stream] + self.cpu_ns(700))
        api_end = sync_end + self.cpu_ns(1_000)
        self.t = api_start
        _, _, corr = self.api_call(STREAM_SYNCHRONIZE, api_end - api_start)
        self.gpu_row("gpu_sync", sync_start, sync_end, "Stream Sync", stream, corr, sync_kind="stream_synchronize")
        self.t = api_end + self.cpu_ns(self.c.launch_gap)

    def event_record(self, stream: int) -> tuple[int, int]:
        """``cudaEventRecord`` on ``stream``: returns (event id, time the event completes)."""
        event_id = self._next_cuda_event
        self._next_cuda_event += 1
        _, api_end, _ = self.api_call(EVENT_RECORD, self.cpu_ns(2_500))
        self._add_event_id(event_id)
        self.t = api_end + self.cpu_ns(self.c.launch_gap)
        return event_id, self.stream_free[stream]

    def _add_event_id(self, event_id: int) -> None:
        self.events[-1] = replace(self.events[-1], cuda_event_id=event_id)

    def stream_wait_event(self, stream: int, event: tuple[int, int], source_stream: int) -> None:
        """``cudaStreamWaitEvent``: later work on ``stream`` waits for ``event``."""
        event_id, ready = event
        api_start, api_end, corr = self.api_call(STREAM_WAIT_EVENT, self.cpu_ns(2_800))
        self._add_event_id(event_id)
        self.gpu_row(
            "gpu_sync",
            api_start + self.cpu_ns(500),
            api_end - self.cpu_ns(300),
            "Stream Wait Event",
            stream,
            corr,
            sync_kind="stream_wait_event",
            cuda_event_id=event_id,
            wait_on_stream=source_stream,
        )
        self.stream_free[stream] = max(self.stream_free[stream], ready)
        self.t = api_end + self.cpu_ns(self.c.launch_gap)

    def link_projections(self) -> list[Event]:
        """Kineto's GPU-side copies of user annotations: per annotation and stream, the span of
        the GPU work launched directly inside it, widened by 1 ns each side."""
        spans: dict[tuple[int, int, int], tuple[int, int]] = {}
        for gpu_index, ann_index in self._links:
            g = self.events[gpu_index]
            assert g.device is not None and g.stream is not None
            key = (ann_index, g.device, g.stream)
            lo, hi = spans.get(key, (g.start_ns, g.end_ns))
            spans[key] = (min(lo, g.start_ns), max(hi, g.end_ns))
        out: list[Event] = []
        for (ann_index, device, stream), (lo, hi) in sorted(spans.items()):
            ann = self.events[ann_index]
            out.append(
                Event(
                    "range",
                    lo - 1,
                    hi + 1,
                    ann.name,
                    len(self.events) + len(out),
                    device=device,
                    stream=stream,
                    external_id=ann.external_id,
                    step_range=ann.step_range,
                    user_annotation=True,
                )
            )
        return out
