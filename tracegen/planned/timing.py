"""The values of a planned job: its :class:`Timing` constants and the GPU spans and events actions return."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """How long the host-side steps take and how the GPU answers (ns); a scenario's constants."""

    launch_latency_ns: int = 2_500
    """From a launch call's return to the earliest start of its work (median 2-3 us on real V100s)."""
    op_before_ns: int = 1_000
    """Dispatch inside an op before its launch call."""
    launch_ns: int = 1_000
    """A launch call (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...)."""
    sync_return_ns: int = 1_000
    """A blocking call returns this long after what it waits for is done."""
    sync_min_ns: int = 1_000
    """The shortest blocking call (nothing left to wait for)."""
    event_api_ns: int = 1_000
    """``cudaEventRecord`` / ``cudaStreamWaitEvent``."""
    graph_launch_ns: int = 3_000
    """``cudaGraphLaunch``."""
    pageable_stage_ns: int = 5_000
    """A pageable host-to-device copy starts this long into its call (staging to pinned memory)."""


@dataclass(frozen=True)
class GpuSpan:
    """Where a piece of GPU work ran (ns from the job's origin)."""

    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class CudaEvent:
    """A recorded CUDA event: done once the work queued on its stream before it is done."""

    stream: int
    ready_ns: int
