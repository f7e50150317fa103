"""Where the scenario tests read issue 13's answers in traceq's JSON report: every field name in one place.

``idle_by_cause_ns`` with the causes ``input, sync, compile, launch, cpu, dependency, unknown`` on
devices and steps, a per-device ``steady`` state, ``regime``, ``launch_latency_ns``,
``comm_kernels`` and ``unlaunched_activities``, the steps' ``warmup`` flags, the finding ids
(``schemas/report.schema.json``).  The tests read the report only through these functions.
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
    """A device's or step's idle ns by cause (``idle_by_cause_ns``; docs/analyses.md, "Idle time by cause")."""
    return dict(entry["idle_by_cause_ns"])


def steady_idle_by_cause(device: Entry) -> dict[str, int]:
    """A device's idle ns by cause over its steady steps (warm-up left out)."""
    return dict(device["steady"]["idle_by_cause_ns"])


def launch_latency_ns(device: Entry) -> int:
    """The device's launch-latency estimate: its ``launch_latency_ns``."""
    return int(device["launch_latency_ns"])


def regime(device: Entry) -> str:
    """The device's regime verdict (docs/analyses.md, "Regimes"): its ``regime.verdict``."""
    value = device["regime"]
    return str(value["verdict"] if isinstance(value, dict) else value)


def graph_replayed(device: Entry) -> bool:
    """Whether the device replays its work as CUDA graphs: ``regime.graph_share`` of at least a half
    (the share of its kernels a graph launch replayed)."""
    return bool(device["regime"]["graph_share"] >= 0.5)


def warmup_step_numbers(report: Report, pid: int, device: int) -> list[int]:
    """The warm-up steps of a device (docs/analyses.md, "Warm-up"): the ``step`` numbers of its ``steps``
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
    """The rank a ``straggler`` finding names: its ``slow_rank`` metric, or where the trace records no
    ranks (an nsys export of the job's processes: ``slow_rank`` is -1) the GPU it names,
    ``slow_device``: the planted jobs put rank r on GPU r."""
    metrics = finding["metrics"]
    return int(metrics["slow_rank"] if metrics["slow_rank"] >= 0 else metrics["slow_device"])


def comm_kernel_names(report: Report) -> set[str]:
    """The kernel names the report counted as communication, on any device (each device's
    ``comm_kernels``)."""
    return {k["name"] for d in report["devices"] for k in d["comm_kernels"]}


def unlaunched_activities(device: Entry) -> int:
    """How many of the device's GPU activities have no launching call: its ``unlaunched_activities``."""
    return int(device["unlaunched_activities"])


def kernel_total_ns(report: Report) -> dict[str, int]:
    """Total ns per kernel name from the report's kernel table (``kernels``, as today)."""
    return {k["name"]: int(k["total_ns"]) for k in report["kernels"]}
