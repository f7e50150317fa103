"""Where the scenario tests read issue 13's answers in traceq's JSON report: every field name in one place.

The names follow the spec (``/work/notes/issue13-spec.md``): ``idle_by_cause_ns`` with the causes
``input, sync, compile, launch, cpu, dependency, unknown`` on devices and steps, a per-device
``regime``, a report-level ``warmup``, the finding ids.  Where the spec names no field, the guess is
marked GUESS until the field lands; adapt these functions (not the tests) to the engine's names.
"""

from __future__ import annotations

from typing import Any

Report = dict[str, Any]
Entry = dict[str, Any]


def device_entry(report: Report, pid: int, device: int) -> Entry:
    """The ``devices`` entry of the process ``pid`` on GPU ``device``."""
    (entry,) = [d for d in report["devices"] if d["pid"] == pid and d["device"] == device]
    return entry


def step_entries(report: Report, pid: int, device: int) -> list[Entry]:
    """That device's ``steps`` entries (one per step window), in time order."""
    steps = [s for s in report["steps"] if s["pid"] == pid and s["device"] == device]
    return sorted(steps, key=lambda s: s["start_ns"])


def idle_by_cause(entry: Entry) -> dict[str, int]:
    """A device's or step's idle ns by cause (the spec's ``idle_by_cause_ns``)."""
    return dict(entry["idle_by_cause_ns"])


def steady_idle_by_cause(device: Entry) -> dict[str, int]:
    """A device's idle ns by cause over its steady steps (warm-up left out)."""
    return dict(device["steady"]["idle_by_cause_ns"])


def launch_latency_ns(device: Entry) -> int:
    """The device's launch-latency estimate (spec section 2). GUESS: ``launch_latency_ns`` on the device."""
    return int(device["launch_latency_ns"])


def regime(device: Entry) -> str:
    """The device's regime verdict (spec section 4): ``regime`` as a string or an object with a ``verdict``."""
    value = device["regime"]
    return str(value["verdict"] if isinstance(value, dict) else value)


def graph_replayed(device: Entry) -> bool:
    """Whether the device replays its work as CUDA graphs: ``regime.graph_share`` of at least a half
    (the share of its kernels a graph launch replayed)."""
    return bool(device["regime"]["graph_share"] >= 0.5)


def warmup_step_numbers(report: Report, pid: int, device: int) -> list[int]:
    """The warm-up steps of a device (spec section 5): the ``step`` numbers of its ``steps``
    entries flagged ``warmup``."""
    return [int(s["step"]) for s in step_entries(report, pid, device) if s["warmup"]]


def fired(report: Report) -> dict[str, Entry]:
    """The findings that fired, by id."""
    return {f["id"]: f for f in report["findings"]}


def fix_text(finding: Entry) -> str:
    return str(finding["fix"])


def finding_text(finding: Entry) -> str:
    """Everything a finding says in words: its title, its evidence, its fix."""
    return " ".join([finding["title"], *(e["text"] for e in finding.get("evidence", ())), finding["fix"]])


def straggler_rank(finding: Entry) -> int:
    """The rank a ``straggler`` finding names (its ``slow_rank`` metric, as today)."""
    return int(finding["metrics"]["slow_rank"])


def comm_kernel_names(report: Report) -> set[str]:
    """The kernel names the report counted as communication. GUESS: ``report["comm_kernels"]``, a list of
    names or of objects with a ``name``."""
    return {k["name"] if isinstance(k, dict) else k for k in report["comm_kernels"]}


def unlaunched_activities(device: Entry) -> int:
    """How many of the device's GPU activities have no launching call. GUESS: ``activities_without_launch``."""
    return int(device["activities_without_launch"])


def kernel_total_ns(report: Report) -> dict[str, int]:
    """Total ns per kernel name from the report's kernel table (``kernels``, as today)."""
    return {k["name"]: int(k["total_ns"]) for k in report["kernels"]}
