"""Hand-planned timelines: every ns known, written in both formats with the same numbers.

The simulator (:mod:`tracegen.simulator`) draws a realistic training step from a cost model with
jitter; the planned builder instead lets a test write each thread's actions in order with exact
durations, so that the truth about every idle ns (which cause, how many ns) can be worked out by
hand, beside the scenario, before any analysis runs.

    >>> from tracegen.planned import PLANNED_KERNELS as K, build_job
    >>> def program(rank):
    ...     for _ in range(3):
    ...         with rank.main.step():
    ...             rank.main.loader(50_000)                  # the DataLoader range, 50 us
    ...             rank.main.h2d(1 << 20, 20_000)            # aten::copy_ + cudaMemcpyAsync
    ...             rank.main.op("aten::mm", K["gemm_fwd"], 100_000)
    ...             rank.main.sync()                          # cudaStreamSynchronize
    >>> job = build_job("tiny", program)
    >>> job.write(tmp, "nsys"), job.write(tmp, "kineto")  # doctest: +SKIP

The rules every GPU row follows are in :mod:`tracegen.planned.rank` (launch latency, stream
order, events, collectives, graphs, blocking calls); the actions a thread can take, and what each
records, in :mod:`tracegen.planned.thread`; how a program becomes a :class:`~tracegen.Timeline`
in :mod:`tracegen.planned.job`; names of kernels, calls and GPUs in :mod:`tracegen.planned.names`.
The scenario catalogue with its planted truths is :mod:`tracegen.planned.scenarios`.
"""

from tracegen.planned.job import FORMATS, JOB_ORIGIN_NS, Format, PlannedJob, Program, build_job
from tracegen.planned.names import PLANNED_KERNELS
from tracegen.planned.rank import Rank
from tracegen.planned.thread import Thread
from tracegen.planned.timing import CudaEvent, GpuSpan, Timing

__all__ = [
    "FORMATS",
    "JOB_ORIGIN_NS",
    "PLANNED_KERNELS",
    "CudaEvent",
    "Format",
    "GpuSpan",
    "PlannedJob",
    "Program",
    "Rank",
    "Thread",
    "Timing",
    "build_job",
]
