"""One planted event (:class:`Event`) and how each source format names and files it.

An :class:`Event` is one row of one rank's simulated step, with times relative to the step.  The
functions below are the naming both the ground truth (:meth:`tracegen.Timeline.events`) and the
writers use, kept in one place so that a file and its ground truth cannot disagree: Kineto's
``cat`` (:func:`kineto_category`), the nsys table a row is written to (:func:`nsys_table`), the
name an nsys export shows (:func:`nsys_display_name`), and which events a format can hold
(:func:`in_view`, for the :data:`View` names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from tracegen.catalogue import STREAM_SYNCHRONIZE, STREAM_WAIT_EVENT, ApiSpec, CommInfo, KernelSpec

View = Literal["truth", "nsys", "kineto"]
"""Which events :meth:`~tracegen.timeline.Timeline.events` returns: everything planted (``truth``),
or what each writer can represent (``nsys``: no ``cpu_op`` rows and no GPU-side range projections)."""

EventKind = Literal["kernel", "memcpy", "memset", "gpu_sync", "cuda_api", "range", "cpu_op"]

CUDA_EVENT_ID_BASE: Final = 6_800
"""What both writers add to :attr:`Event.cuda_event_id` (a step's first CUDA event) to give the id a
profiler shows."""


@dataclass(frozen=True, slots=True)
class Event:
    """One planted event of one rank, relative to its step.

    ``start_ns``/``end_ns`` are relative to the step start, ``correlation``/``external_id`` to
    the step's id bases (see :class:`~tracegen.timeline.StepInstance`).  CPU rows carry ``tid``;
    GPU rows (and GPU projections of ranges) carry ``device`` and ``stream``.
    """

    kind: EventKind
    start_ns: int
    end_ns: int
    name: str
    seq: int
    tid: int | None = None
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    external_id: int | None = None
    bytes: int | None = None
    copy_kind: str | None = None
    sync_kind: str | None = None
    kernel: KernelSpec | None = None
    api: ApiSpec | None = None
    src_kind: int | None = None
    dst_kind: int | None = None
    comm: CommInfo | None = None
    cuda_event_id: int | None = None
    wait_on_stream: int | None = None
    step_range: bool = False
    """The ``ProfilerStep#N`` range (or its GPU projection); its name is set per step."""
    user_annotation: bool = False
    """A ``record_function`` range: Kineto ``user_annotation`` on the CPU, ``gpu_user_annotation``
    when projected onto a stream; an NVTX push/pop range in nsys."""
    nvtx_start_end: bool = False
    """A range that need not nest (``nvtxRangeStart``/``End``: nsys ``eventType`` 60; a user
    annotation in Kineto) rather than a push/pop range."""
    graph_id: int | None = None
    """The CUDA graph a kernel ran in (nsys ``graphId``, Kineto ``graph id``); None outside graphs."""

    @property
    def is_gpu_projection(self) -> bool:
        return self.kind == "range" and self.device is not None


_KINETO_CAT: Final[dict[str, str]] = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_sync": "cuda_sync",
    "cuda_api": "cuda_runtime",
    "cpu_op": "cpu_op",
}
_NSYS_TABLE: Final[dict[str, str]] = {
    "kernel": "CUPTI_ACTIVITY_KIND_KERNEL",
    "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
    "gpu_sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "cuda_api": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "range": "NVTX_EVENTS",
    "cpu_op": "NVTX_EVENTS",  # only with ``nsys_cpu_ops`` (``emit_nvtx``-style ranges)
}
_NSYS_SYNC_NAMES: Final[dict[str, str]] = {
    "stream_synchronize": STREAM_SYNCHRONIZE.name,
    "stream_wait_event": STREAM_WAIT_EVENT.name,
}


def kineto_category(event: Event) -> str:
    """The Kineto ``cat`` of ``event``."""
    if event.kind == "range":
        return "gpu_user_annotation" if event.device is not None else "user_annotation"
    return _KINETO_CAT[event.kind]


def nsys_table(event: Event) -> str:
    """The nsys export table ``event`` is written to (``cpu_op`` rows only as NVTX ranges, see :func:`in_view`)."""
    return _NSYS_TABLE[event.kind]


def nsys_display_name(event: Event) -> str:
    """The name of ``event`` as read from an nsys export: ``[CUDA memcpy HtoD]``, ``[CUDA memset]``,
    a sync record named after the API call that caused it; other names unchanged."""
    if event.kind == "memcpy":
        return f"[CUDA memcpy {event.copy_kind}]"
    if event.kind == "memset":
        return "[CUDA memset]"
    if event.kind == "gpu_sync" and event.sync_kind is not None:
        return _NSYS_SYNC_NAMES[event.sync_kind]
    return event.name


def in_view(event: Event, view: View, *, nsys_cpu_ops: bool = False) -> bool:
    """Whether ``event`` appears in the file written for ``view``.

    ``nsys_cpu_ops``: the nsys export holds the ``cpu_op`` rows as NVTX ranges (as PyTorch's
    ``torch.autograd.profiler.emit_nvtx()`` writes them), where it otherwise holds none.
    """
    if view == "nsys":
        return (event.kind != "cpu_op" or nsys_cpu_ops) and not event.is_gpu_projection
    return True
