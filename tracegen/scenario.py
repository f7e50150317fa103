"""The scenario model: a synthetic data-parallel training job, its planted problems and the presets.

A :class:`Scenario` says how many ranks (one process and one GPU each), how many profiled steps
of how many layers, which GPU, and which performance problems to plant (:class:`Knobs`); it is
all :func:`tracegen.build_timeline` needs.  :data:`PRESETS` names the scenarios the tests, the
docs and the shipped samples use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from tracegen.catalogue import H100_SXM, GpuSpec


@dataclass(frozen=True)
class Knobs:
    """Planted performance problems.  Each, switched on, costs at least ~20% of step time."""

    launch_bound: bool = False
    """Tiny kernels; the CPU takes longer per launch than the GPU per kernel, so the GPU waits."""
    host_sync: bool = False
    """A ``.item()`` (``cudaStreamSynchronize``) after every forward layer, then host-side Python
    work, so the GPU queue drains and stays empty until the next launches."""
    input_stall: bool = False
    """Slow CPU data loading and a pageable host-to-device copy: the GPU waits for the batch."""
    exposed_comm: bool = False
    """One large all-reduce after backward, nothing computed beside it."""
    memory_bound: bool = False
    """Elementwise, normalisation and softmax kernels dominate GPU time."""
    small_kernels: bool = False
    """Unfused GELU and layer norm: most kernels run for a few microseconds."""
    straggler: bool = False
    """One rank's kernels run slower; the others wait inside each collective."""
    slow_link: bool = False
    """Every rank's collectives are slow (little arrival skew): communication is exposed."""


@dataclass(frozen=True)
class Scenario:
    """A synthetic training job to simulate."""

    name: str
    knobs: Knobs = field(default_factory=Knobs)
    ranks: int = 1
    """Ranks simulated and written (one process and one GPU each, on one node)."""
    world_size: int = 8
    """Ranks in the job; ranks beyond ``ranks`` are assumed to arrive on time at collectives."""
    steps: int = 4
    layers: int = 4
    distinct_steps: int | None = None
    """Step templates to simulate; the profiled steps cycle through them.  ``None``: one per step."""
    seed: int = 0
    gpu: GpuSpec = H100_SXM
    first_step_number: int = 2
    """``N`` of the first ``ProfilerStep#N`` (PyTorch's schedule skips wait and warm-up steps)."""
    straggler_rank: int | None = None
    """The slow rank when ``knobs.straggler``; ``None``: ``ranks // 2``."""
    straggler_slowdown: float = 1.4
    compute_stream: int = 7
    nccl_stream: int = 20
    tuned: bool = False
    """A well-tuned job: prefetched pinned input and a small final gradient bucket."""
    first_pid: int = 48213
    hostname: str = "gpu-node-017"

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.world_size < self.ranks:
            raise ValueError(f"need 1 <= ranks <= world_size, got ranks={self.ranks}, world_size={self.world_size}")
        if self.steps < 1 or self.layers < 1:
            raise ValueError("steps and layers must be >= 1")
        if self.distinct_steps is not None and self.distinct_steps < 1:
            raise ValueError("distinct_steps must be >= 1")
        if self.resolved_straggler_rank() >= self.ranks:
            raise ValueError(f"straggler_rank {self.straggler_rank} is not one of the {self.ranks} ranks")

    def resolved_straggler_rank(self) -> int:
        return self.ranks // 2 if self.straggler_rank is None else self.straggler_rank

    @property
    def node_gpus(self) -> int:
        """GPUs on the (single) node: the job's ranks, at most eight."""
        return max(self.ranks, min(self.world_size, 8))


PRESETS: Final[Mapping[str, Scenario]] = MappingProxyType(
    {
        "training_step": Scenario("training_step"),
        "clean": Scenario("clean", tuned=True),
        "launch_bound": Scenario("launch_bound", Knobs(launch_bound=True)),
        "host_sync": Scenario("host_sync", Knobs(host_sync=True)),
        "input_stall": Scenario("input_stall", Knobs(input_stall=True)),
        "exposed_comm": Scenario("exposed_comm", Knobs(exposed_comm=True)),
        "memory_bound": Scenario("memory_bound", Knobs(memory_bound=True)),
        "small_kernels": Scenario("small_kernels", Knobs(small_kernels=True)),
        "balanced_job": Scenario("balanced_job", ranks=4, world_size=4, steps=3),
        "straggler_job": Scenario("straggler_job", Knobs(straggler=True), ranks=4, world_size=4, steps=3),
        "slow_link_job": Scenario("slow_link_job", Knobs(slow_link=True), ranks=4, world_size=4, steps=3),
    }
)
"""Named scenarios.  ``training_step`` is the realistic default (a little of everything, nothing
dominant); ``clean`` is compute-bound with no problem; one preset per knob; three 4-rank jobs."""


def preset(name: str) -> Scenario:
    """The preset called ``name`` (see :data:`PRESETS`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"no preset {name!r}; choose from {', '.join(sorted(PRESETS))}") from None
