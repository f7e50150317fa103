"""How the diff's renderers and its verdict name things: the parts of a step, the findings, a
change with its sign, a device pair."""

from __future__ import annotations

from typing import Final

from traceq.diff.model import DevicePair
from traceq.units import LabelStyle, device_label, format_ns

PART_LABELS: Final = {
    "compute": "compute",
    "exposed_comm": "exposed communication",
    "input": "input stall",
    "sync": "sync idle",
    "compile": "compile idle",
    "launch": "launch idle",
    "cpu": "CPU idle",
    "dependency": "dependency idle",
    "unknown": "unrecorded idle",
    "unaccounted": "unaccounted time",
}
"""How the verdict and the renderers name each part of a step."""

FINDING_LABELS: Final = {
    "launch_bound": "launch-bound",
    "host_sync": "host sync",
    "input_stall": "input stall",
    "exposed_comm": "exposed communication",
    "straggler": "straggler",
    "memory_bound_kernels": "memory-bound kernels",
    "small_kernels": "small kernels",
}
"""How the verdict names each finding (by id; an id not here is named as it is)."""


def signed_ns(ns: float) -> str:
    """A change in ns with its sign: ``+1.20 ms``, ``−850 ns`` (a minus sign), ``0 ns``."""
    if ns == 0:
        return "0 ns"
    return ("+" if ns > 0 else "\u2212") + format_ns(abs(ns))


def signed_share(share: float) -> str:
    """A change of a share with its sign: ``+12.3%``, ``−4.0%``."""
    return ("+" if share > 0 else "\u2212" if share < 0 else "") + f"{abs(share):.1%}"


def pair_label(pair: DevicePair, *, style: LabelStyle = "sentence") -> str:
    """``rank 0, GPU 0``; or ``rank 3, GPU 3 -> rank 1, GPU 1`` where the two sides' devices differ."""
    before = device_label(pair.rank_before, pair.device_before, pid=None, style=style)
    after = device_label(pair.rank_after, pair.device_after, pid=None, style=style)
    return before if before == after else f"{before} -> {after}"
