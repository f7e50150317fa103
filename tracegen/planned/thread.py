"""The script of one CPU thread: the actions a scenario writes in order, each at the thread's clock.

A :class:`Thread` has a clock ``t`` (ns from the job's origin).  Every action records its events at
``t`` and moves ``t`` on by exactly the time it takes; GPU work it launches is placed by the rules
of :mod:`tracegen.planned.rank`.  The actions, and what each records:

* ``python(ns)``: nothing (unrecorded CPU time: Python, a callback, a GC pause); ``wait_until(t)``.
* ``step()``, ``range(name)``: a ``ProfilerStep#N`` / user-annotation range (NVTX in nsys) around
  the block; ``start_range(name)`` ... ``end_range(handle)``: one that need not nest (NVTX
  start/end); ``op_range(name)``: a ``cpu_op`` around the block; ``loader(ns)``: the DataLoader's
  ``enumerate(DataLoader)#...__next__`` range, ``ns`` long.
* ``op(name, kernel, dur_ns)``: a ``cpu_op`` of ``before_ns`` dispatch, the launch call and
  ``after_ns``, launching one kernel; ``launch(...)``: the bare call.
* ``h2d(nbytes, dur_ns, pinned=...)``: an ``aten::copy_`` op with a host-to-device copy.
* ``item()``: ``aten::item`` -> ``aten::_local_scalar_dense`` with a 4-byte device-to-host
  ``cudaMemcpyAsync`` and a ``cudaStreamSynchronize``; ``item(sync_copy=api)``: with one
  synchronous copy instead (``hipMemcpyWithStream`` on ROCm).
* ``sync()``, ``device_sync()``, ``event_sync(ev)``, ``sync_copy(...)``: blocking calls.
* ``record_event()`` / ``wait_event(stream, ev)``: cross-stream ordering.
* ``collective(name, kernel, transfer_ns)``: an op launching a communication kernel.
* ``graph_launch(nodes, graph_id=...)``: a ``cudaGraphLaunch`` replaying kernels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from tracegen.catalogue import (
    DATALOADER_NEXT,
    EVENT_RECORD,
    LAUNCH_KERNEL,
    MEM_DEVICE,
    MEM_PAGEABLE,
    MEM_PINNED,
    MEMCPY_ASYNC,
    STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
    ApiSpec,
    CommInfo,
    KernelSpec,
)
from tracegen.event import EventKind
from tracegen.planned.names import CUDA_GRAPH_LAUNCH, CUDA_MEMCPY, DEVICE_SYNCHRONIZE, EVENT_SYNCHRONIZE
from tracegen.planned.timing import CudaEvent, GpuSpan

if TYPE_CHECKING:
    from tracegen.planned.rank import Rank

_MEM_NAMES = {MEM_PAGEABLE: "Pageable", MEM_PINNED: "Pinned", MEM_DEVICE: "Device"}


class Thread:
    """One CPU thread of a rank and its clock ``t``."""

    def __init__(self, rank: Rank, tid: int) -> None:
        self.rank = rank
        self.tid = tid
        self.t = 0
        self._open: list[int] = []
        """External ids of the ops and ranges open on this thread, innermost last."""

    # -- time
    def python(self, ns: int) -> None:
        """``ns`` of CPU time nothing records."""
        if ns < 0:
            raise ValueError(f"negative time {ns}")
        self.t += ns

    def wait_until(self, t: int) -> None:
        """Idle (unrecorded) until ``t``, if it is later than now."""
        self.t = max(self.t, t)

    # -- ranges
    @contextmanager
    def range(self, name: str, *, kind: EventKind = "range") -> Iterator[None]:
        """A range around the block: a user annotation (``kind="range"``) or a ``cpu_op``."""
        ext = self.rank.external_id()
        index = self.rank.add(
            kind, self.t, self.t, name, tid=self.tid, external_id=ext, user_annotation=kind == "range"
        )
        self._open.append(ext)
        try:
            yield
        finally:
            self._open.pop()
            self.rank.close(index, self.t)

    def start_range(self, name: str) -> int:
        """Open a range that need not nest (``nvtxRangeStart``; a user annotation in Kineto); returns
        what :meth:`end_range` closes.  Launches inside it do not carry its external id."""
        return self.rank.add("range", self.t, self.t, name, tid=self.tid, user_annotation=True, nvtx_start_end=True)

    def end_range(self, handle: int) -> None:
        """Close a range opened by :meth:`start_range`, now (``nvtxRangeEnd``)."""
        self.rank.close(handle, self.t)

    def op_range(self, name: str) -> AbstractContextManager[None]:
        """A ``cpu_op`` around the block (an op whose launches the block makes)."""
        return self.range(name, kind="cpu_op")

    @contextmanager
    def step(self) -> Iterator[None]:
        """The ``ProfilerStep#N`` range around the block, N counting from the job's first step."""
        name = f"ProfilerStep#{self.rank.first_step + self.rank.steps}"
        self.rank.steps += 1
        with self.range(name):
            yield

    def loader(self, ns: int, name: str = DATALOADER_NEXT) -> None:
        """The main loop waiting ``ns`` for its next batch: the DataLoader's ``__next__`` range."""
        with self.range(name):
            self.python(ns)

    # -- calls
    def _ext(self) -> int | None:
        return self._open[-1] if self._open else None

    def call(self, api: ApiSpec, duration_ns: int) -> tuple[int, int, int]:
        """A CUDA/HIP call of ``duration_ns`` now; returns its (start, end, correlation id)."""
        corr = self.rank.correlation()
        start = self.t
        self.rank.add(
            "cuda_api",
            start,
            start + duration_ns,
            api.name,
            tid=self.tid,
            correlation=corr,
            external_id=self._ext(),
            api=api,
        )
        self.t = start + duration_ns
        return start, self.t, corr

    def launch(
        self,
        kernel: KernelSpec,
        dur_ns: int,
        *,
        stream: int | None = None,
        api: ApiSpec = LAUNCH_KERNEL,
        launch_ns: int | None = None,
        comm: CommInfo | None = None,
    ) -> GpuSpan:
        """The bare launch call of one kernel (rule 1)."""
        timing = self.rank.timing
        _, end, corr = self.call(api, timing.launch_ns if launch_ns is None else launch_ns)
        span = self.rank.enqueue(stream, end + timing.launch_latency_ns, dur_ns)
        self.rank.gpu_row("kernel", span, kernel.name, stream, corr, external_id=self._ext(), kernel=kernel, comm=comm)
        return span

    def op(
        self,
        name: str,
        kernel: KernelSpec,
        dur_ns: int,
        *,
        stream: int | None = None,
        before_ns: int | None = None,
        launch_ns: int | None = None,
        after_ns: int = 0,
        api: ApiSpec = LAUNCH_KERNEL,
    ) -> GpuSpan:
        """An op: ``before_ns`` of dispatch, the launch call, ``after_ns``; one kernel."""
        with self.op_range(name):
            self.python(self.rank.timing.op_before_ns if before_ns is None else before_ns)
            span = self.launch(kernel, dur_ns, stream=stream, api=api, launch_ns=launch_ns)
            self.python(after_ns)
        return span

    def h2d(
        self, nbytes: int, dur_ns: int, *, pinned: bool = True, stream: int | None = None, api: ApiSpec = MEMCPY_ASYNC
    ) -> GpuSpan:
        """``aten::copy_`` of a batch to the GPU: pinned (async) or pageable (returns once copied)."""
        timing = self.rank.timing
        src = MEM_PINNED if pinned else MEM_PAGEABLE
        with self.op_range("aten::copy_"):
            self.python(timing.op_before_ns)
            if pinned:
                _, end, corr = self.call(api, timing.launch_ns)
                span = self.rank.enqueue(stream, end + timing.launch_latency_ns, dur_ns)
            else:
                start = self.t
                span = self.rank.enqueue(stream, start + timing.pageable_stage_ns, dur_ns)
                _, _, corr = self.call(api, span.end_ns + timing.sync_return_ns - start)
            self.rank.gpu_row(
                "memcpy",
                span,
                f"Memcpy HtoD ({_MEM_NAMES[src]} -> Device)",
                stream,
                corr,
                external_id=self._ext(),
                bytes=nbytes,
                copy_kind="HtoD",
                src_kind=src,
                dst_kind=MEM_DEVICE,
            )
        return span

    def sync_copy(
        self, copy_kind: str, nbytes: int, dur_ns: int, *, api: ApiSpec = CUDA_MEMCPY, stream: int | None = None
    ) -> GpuSpan:
        """A synchronous copy (``cudaMemcpy``, ``hipMemcpyWithStream``): returns once it is done (rules 1, 4)."""
        timing = self.rank.timing
        start = self.t
        span = self.rank.enqueue(stream, start + timing.launch_latency_ns, dur_ns)
        end = max(start + timing.sync_min_ns, span.end_ns + timing.sync_return_ns)
        _, _, corr = self.call(api, end - start)
        src, dst = (MEM_DEVICE, MEM_PINNED) if copy_kind == "DtoH" else (MEM_PINNED, MEM_DEVICE)
        self.rank.gpu_row(
            "memcpy",
            span,
            f"Memcpy {copy_kind} ({_MEM_NAMES[src]} -> {_MEM_NAMES[dst]})",
            stream,
            corr,
            external_id=self._ext(),
            bytes=nbytes,
            copy_kind=copy_kind,
            src_kind=src,
            dst_kind=dst,
        )
        return span

    def item(self, *, dtoh_ns: int = 1_500, stream: int | None = None, sync_copy: ApiSpec | None = None) -> GpuSpan:
        """``tensor.item()``: copy 4 bytes to the host and block until they are there.

        CUDA: ``cudaMemcpyAsync`` then ``cudaStreamSynchronize``; with ``sync_copy`` (ROCm's
        ``hipMemcpyWithStream``) one synchronous copy does both.
        """
        timing = self.rank.timing
        with self.op_range("aten::item"), self.op_range("aten::_local_scalar_dense"):
            self.python(timing.op_before_ns)
            if sync_copy is not None:
                return self.sync_copy("DtoH", 4, dtoh_ns, api=sync_copy, stream=stream)
            _, end, corr = self.call(MEMCPY_ASYNC, timing.launch_ns)
            span = self.rank.enqueue(stream, end + timing.launch_latency_ns, dtoh_ns)
            self.rank.gpu_row(
                "memcpy",
                span,
                "Memcpy DtoH (Device -> Pinned)",
                stream,
                corr,
                external_id=self._ext(),
                bytes=4,
                copy_kind="DtoH",
                src_kind=MEM_DEVICE,
                dst_kind=MEM_PINNED,
            )
            self.sync(stream)
        return span

    def _block(self, api: ApiSpec, until: int) -> None:
        timing = self.rank.timing
        start = self.t
        self.call(api, max(start + timing.sync_min_ns, until + timing.sync_return_ns) - start)

    def sync(self, stream: int | None = None, *, api: ApiSpec = STREAM_SYNCHRONIZE) -> None:
        """``cudaStreamSynchronize``: block until ``stream``'s work is done (rule 4)."""
        self._block(api, self.rank.free(stream))

    def device_sync(self, *, api: ApiSpec = DEVICE_SYNCHRONIZE) -> None:
        """``cudaDeviceSynchronize``: block until every stream's work is done."""
        self._block(api, self.rank.drained())

    def event_sync(self, event: CudaEvent, *, api: ApiSpec = EVENT_SYNCHRONIZE) -> None:
        """``cudaEventSynchronize``: block until ``event`` is done."""
        self._block(api, event.ready_ns)

    def record_event(self, stream: int | None = None, *, api: ApiSpec = EVENT_RECORD) -> CudaEvent:
        """``cudaEventRecord`` on ``stream``: an event done when the work queued before it is."""
        self.call(api, self.rank.timing.event_api_ns)
        return CudaEvent(self.rank.stream(stream), self.rank.free(stream))

    def wait_event(self, stream: int | None, event: CudaEvent, *, api: ApiSpec = STREAM_WAIT_EVENT) -> None:
        """``cudaStreamWaitEvent``: later work on ``stream`` waits for ``event``."""
        self.call(api, self.rank.timing.event_api_ns)
        self.rank.wait(stream, event.ready_ns)

    def collective(
        self,
        name: str,
        kernel: KernelSpec,
        transfer_ns: int,
        *,
        stream: int | None = None,
        group: str = "world",
        comm: CommInfo | None = None,
        before_ns: int | None = None,
        launch_ns: int | None = None,
        api: ApiSpec = LAUNCH_KERNEL,
    ) -> GpuSpan:
        """An op launching a communication kernel on ``stream`` (default: the comm stream), rule 2."""
        timing = self.rank.timing
        stream = self.rank.comm_stream if stream is None else stream
        with self.op_range(name):
            self.python(timing.op_before_ns if before_ns is None else before_ns)
            _, end, corr = self.call(api, timing.launch_ns if launch_ns is None else launch_ns)
            start = self.rank.ready(stream, end + timing.launch_latency_ns)
            span = self.rank.occupy(stream, start, self.rank.collective_end(group, start, transfer_ns))
            self.rank.gpu_row(
                "kernel", span, kernel.name, stream, corr, external_id=self._ext(), kernel=kernel, comm=comm
            )
        return span

    def graph_launch(
        self,
        nodes: Sequence[tuple[KernelSpec, int]],
        *,
        graph_id: int,
        node_gap_ns: int = 1_000,
        stream: int | None = None,
        api: ApiSpec = CUDA_GRAPH_LAUNCH,
    ) -> tuple[GpuSpan, ...]:
        """``cudaGraphLaunch`` replaying ``nodes`` (kernel, duration) on ``stream`` (rule 3)."""
        timing = self.rank.timing
        _, end, corr = self.call(api, timing.graph_launch_ns)
        spans = []
        earliest = end + timing.launch_latency_ns
        for kernel, dur_ns in nodes:
            span = self.rank.enqueue(stream, earliest, dur_ns)
            self.rank.gpu_row("kernel", span, kernel.name, stream, corr, kernel=kernel, graph_id=graph_id)
            spans.append(span)
            earliest = span.end_ns + node_gap_ns
        return tuple(spans)
