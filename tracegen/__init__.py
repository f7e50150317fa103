"""tracegen: deterministic synthetic traces, a ground-truth timeline written as nsys SQLite and Kineto JSON.

The test and benchmark tooling of traceq, kept out of its wheel: ``pip install .`` does not
install it; tests, ``bench/`` and ``sample_traces/make_samples.py`` import it from the checkout.
It may import traceq (for the event-table schema); traceq never imports it.

:func:`build_timeline` simulates a :class:`Scenario` (or a named :func:`preset`) into a
:class:`Timeline`, whose :meth:`Timeline.events` is the ground truth in the traceq event-table
shape; :func:`write_nsys_sqlite` and :func:`write_kineto_json` write the same timeline in both
source formats, with identical ns timestamps, so that both must import to the same numbers.
:func:`big_events` and :func:`write_big_nsys_sqlite` make benchmark-sized traces by replication.

    >>> from tracegen import build_timeline, preset, write_kineto_json, write_nsys_sqlite
    >>> tl = build_timeline(preset("host_sync"))
    >>> write_nsys_sqlite(tl, "host_sync.nsys.sqlite")  # doctest: +SKIP
    >>> write_kineto_json(tl, "host_sync.pt.trace.json.gz", rank=0)  # doctest: +SKIP

The modules, by job: :mod:`tracegen.catalogue` (the GPU, kernels, CUDA calls and op names a step
runs), :mod:`tracegen.scenario` (scenarios, knobs, presets), :mod:`tracegen.simulator` (cost
model, rank simulator, step program, job), :mod:`tracegen.event` and :mod:`tracegen.timeline`
(the ground truth and how each format names it), :mod:`tracegen.nsys` and
:mod:`tracegen.kineto` (the writers), :mod:`tracegen.big` (benchmark-sized traces), and
:mod:`tracegen.planned`: hand-planned timelines with every ns known (a thread-by-thread script
instead of the simulator's cost model) and issue 13's scenario catalogue with its planted truths
(:mod:`tracegen.planned.scenarios`).
"""

from tracegen.big import big_events, big_scenario, write_big_nsys_sqlite
from tracegen.catalogue import H100_SXM, KERNELS, MEMORY_BOUND_CLASSES, GpuSpec, KernelSpec
from tracegen.event import Event, View
from tracegen.kineto import write_kineto_json, write_kineto_ranks
from tracegen.nsys.writer import write_nsys_per_rank, write_nsys_sqlite
from tracegen.scenario import PRESETS, Knobs, Scenario, preset
from tracegen.simulator.job import build_timeline
from tracegen.timeline import KINETO_BASE_TIME_NS, ProcessInfo, StepInstance, StepTemplate, Timeline

__all__ = [
    "H100_SXM",
    "KERNELS",
    "KINETO_BASE_TIME_NS",
    "MEMORY_BOUND_CLASSES",
    "PRESETS",
    "Event",
    "GpuSpec",
    "KernelSpec",
    "Knobs",
    "ProcessInfo",
    "Scenario",
    "StepInstance",
    "StepTemplate",
    "Timeline",
    "View",
    "big_events",
    "big_scenario",
    "build_timeline",
    "preset",
    "write_big_nsys_sqlite",
    "write_kineto_json",
    "write_kineto_ranks",
    "write_nsys_per_rank",
    "write_nsys_sqlite",
]
