"""Pieces of step programs the scenarios share, with the ns each one takes on the CPU and the GPU.

With the default :class:`~tracegen.planned.Timing` (launch latency 2.5 us, 1 us of dispatch and a
1 us launch call per op, 1 us per event call, blocking calls returning 1 us after the GPU):

* an op takes 2_000 ns of CPU; its kernel can start 4_500 ns after the op starts;
* :func:`synced_step`'s frame: ``python(3_000)`` at the step's start, the body, a
  ``cudaStreamSynchronize`` at its end.  With the GPU drained at the step's start and the body's
  first action an op, the step's first idle is 3_000 (Python) + 4_500 (op start to kernel start),
  and its last is the sync's 1_000 ns return.  Under the spec: in step 0 (no earlier sync) the
  3_000 are ``cpu`` (rule 8) and the 4_500 ``launch`` (rule 7); in every later step all 7_500 are
  ``sync`` (rule 6: the previous step's sync drained the queue and these are the first launches
  after it); the 1_000 ns return is ``sync`` (rule 3, blocked) in every step.  So step 0 has
  ``cpu 3_000, launch 4_500, sync 1_000`` and each later step ``sync 8_500`` of idle at its edges.
* :func:`reduce_then_step`: 8_000 ns of CPU (two event records, two waits, the collective's op, the
  optimizer's op); on the GPU the collective waits for the compute stream, the optimizer for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tracegen.catalogue import CommInfo
from tracegen.planned.names import PLANNED_KERNELS
from tracegen.planned.rank import Rank
from tracegen.planned.thread import Thread
from tracegen.planned.timing import GpuSpan

K = PLANNED_KERNELS
SYNCED_STEP_LEAD_NS = 3_000
"""The Python at the start of every :func:`synced_step` (zero_grad, the loop's bookkeeping)."""


def nccl(collective: str, ranks: int, elements: int = 1 << 26) -> CommInfo:
    """What Kineto records of an NCCL collective over ``ranks`` ranks."""
    return CommInfo(collective, elements, "BFloat16", tuple(range(ranks)))


@contextmanager
def synced_step(th: Thread) -> Iterator[None]:
    """A step: 3_000 ns of Python, the block, then ``cudaStreamSynchronize`` (see the module doc)."""
    with th.step():
        th.python(SYNCED_STEP_LEAD_NS)
        yield
        th.sync()


def gemms(th: Thread, durations: Sequence[int], key: str = "gemm_fwd", name: str = "aten::mm") -> list[GpuSpan]:
    """One ``aten::mm`` op per duration, back to back on the compute stream."""
    return [th.op(name, K[key], d) for d in durations]


def reduce_then_step(
    rank: Rank,
    th: Thread,
    transfer_ns: int,
    *,
    optimizer_ns: int = 50_000,
    kernel: str = "allreduce",
    comm: CommInfo | None = None,
    op_name: str = "c10d::allreduce_",
) -> GpuSpan:
    """Gradients all-reduced on the comm stream once the compute stream is done, then the optimizer.

    CPU: record (1_000), wait (1_000), the collective's op (2_000), record (1_000), wait (1_000),
    the optimizer's op (2_000): 8_000 ns.  Returns the collective's span.
    """
    grads = th.record_event()
    th.wait_event(rank.comm_stream, grads)
    span = th.collective(op_name, K[kernel], transfer_ns, comm=comm)
    reduced = th.record_event(rank.comm_stream)
    th.wait_event(None, reduced)
    th.op("aten::_fused_adamw_", K["fused_adam"], optimizer_ns)
    return span
