"""Where the scenario tests read issue 13's answers in traceq's JSON report: every field name in one place.

The names follow the spec (``/work/notes/issue13-spec.md``): ``idle_by_cause_ns`` with the causes
``input, sync, compile, launch, cpu, dependency, unknown`` on devices and steps, a per-device
``regime``, a report-level ``warmup``, the finding ids.  Where the spec names no field, the guess is
marked GUESS; adapt these functions (not the tests) to the engine's final names.
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


def launch_latency_ns(device: Entry) -> int:
    """The device's launch-latency estimate (spec section 2). GUESS: ``launch_latency_ns`` on the device."""
    return int(device["launch_latency_ns"])


def regime(device: Entry) -> str:
    """The device's regime verdict (spec section 4): ``regime`` as a string or an object with a ``verdict``."""
    value = device["regime"]
    return str(value["verdict"] if isinstance(value, dict) else value)


def graph_replayed(device: Entry) -> bool:
    """The regime's graph-replayed flag. GUESS: ``regime.graph_replayed`` (or ``graph_replayed`` on the device)."""
    value = device["regime"]
    if isinstance(value, dict) and "graph_replayed" in value:
        return bool(value["graph_replayed"])
    return bool(device["graph_replayed"])


def warmup_step_numbers(report: Report, pid: int, device: int) -> list[int]:
    """The warm-up steps of a device (spec section 5). GUESS: ``report["warmup"]``, a list of
    ``{pid, device, steps: [step numbers]}`` (or one list of step numbers for the whole report)."""
    warmup = report["warmup"]
    if warmup and isinstance(warmup[0], dict):
        found = [w for w in warmup if w.get("pid") == pid and w.get("device") == device]
        return [int(n) for w in found for n in w["steps"]]
    return [int(n) for n in warmup]


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
