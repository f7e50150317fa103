"""Deterministic synthetic traces: a ground-truth timeline written as nsys SQLite and Kineto JSON.

:func:`build_timeline` simulates a :class:`Scenario` (or a named :func:`preset`) into a
:class:`Timeline`, whose :meth:`Timeline.events` is the ground truth in the traceq event-table
shape; :func:`write_nsys_sqlite` and :func:`write_kineto_json` write the same timeline in both
source formats, with identical ns timestamps, so that both must import to the same numbers.

    >>> from traceq.synthetic import build_timeline, preset, write_kineto_json, write_nsys_sqlite
    >>> tl = build_timeline(preset("host_sync"))
    >>> write_nsys_sqlite(tl, "host_sync.nsys.sqlite")  # doctest: +SKIP
    >>> write_kineto_json(tl, "host_sync.pt.trace.json.gz", rank=0)  # doctest: +SKIP
"""

from traceq.synthetic.kineto_writer import write_kineto_json, write_kineto_ranks
from traceq.synthetic.nsys_writer import write_nsys_per_rank, write_nsys_sqlite
from traceq.synthetic.timeline import (
    H100_SXM,
    KERNELS,
    PRESETS,
    Event,
    GpuSpec,
    KernelSpec,
    Knobs,
    ProcessInfo,
    Scenario,
    StepInstance,
    StepTemplate,
    Timeline,
    View,
    build_timeline,
    preset,
)

__all__ = [
    "H100_SXM",
    "KERNELS",
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
    "build_timeline",
    "preset",
    "write_kineto_json",
    "write_kineto_ranks",
    "write_nsys_per_rank",
    "write_nsys_sqlite",
]
