"""Plain-text rendering of :func:`traceq.api.info` (``traceq info``), readable in 80 columns.

Its lines quote the trace (paths, categories, GPU names, warnings): each is passed through
:func:`~traceq.units.printable`, so that control characters reach the terminal as escapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from traceq.units import printable


def _n(value: int) -> str:
    return f"{value:,}"


def _gpu_line(gpu: Mapping[str, Any]) -> str:
    bits = []
    if gpu.get("sm_count"):
        bits.append(f"{gpu['sm_count']} SMs")
    if gpu.get("memory_bytes"):
        bits.append(f"{gpu['memory_bytes'] / 2**30:.1f} GiB")
    if gpu.get("compute_capability"):
        bits.append(f"cc {gpu['compute_capability']}")
    extra = f" ({', '.join(bits)})" if bits else ""
    return f"GPU {gpu['device']}: {gpu.get('name') or 'unknown'}{extra}"


def render_info(info: Mapping[str, Any]) -> str:
    """The ``traceq info`` text: sources, row counts per kind, import statistics, warnings."""
    lines: list[str] = []
    for src in info["sources"]:
        version = f" {src['format_version']}" if src.get("format_version") else ""
        producer = f" ({src['producer']}{version})" if src.get("producer") else ""
        lines.append(f"source   {src['path']}")
        lines.append(f"format   {src['format']}{producer}")
        if src.get("rank") is not None:
            world = f" of {src['world_size']}" if src.get("world_size") else ""
            lines.append(f"rank     {src['rank']}{world}")
        for gpu in src.get("gpus", []):
            lines.append(f"         {_gpu_line(gpu)}")
        lines.append("")
    lines.append(f"events   {_n(info['rows'])} rows")
    kinds: Mapping[str, int] = info["kinds"]
    for kind, count in kinds.items():
        if count:
            lines.append(f"  {kind:<10} {_n(count):>12}")
    lines.append("")
    lines.extend(_stats_table(info["import_stats"]))
    coverage = info.get("launch_coverage", [])
    if coverage:
        lines.append("")
        lines.extend(_launch_table(coverage))
    unrecorded = [c for c in info.get("work_coverage", []) if c["unrecorded"]]
    if unrecorded:
        lines.append("")
        lines.extend(_unrecorded_table(unrecorded))
    if info["warnings"]:
        lines.append("")
        lines.append("warnings")
        lines.extend(f"  {w}" for w in info["warnings"])
    return "\n".join(printable(line) for line in lines) + "\n"


def _stats_table(stats: Sequence[Mapping[str, Any]]) -> list[str]:
    several = len({s["source"] for s in stats}) > 1
    lines = ["import statistics (source events -> rows + skipped)"]
    lines.append(f"  {'category':<36} {'events':>10} {'rows':>10} {'skipped':>9}")
    for s in stats:
        category = f"{s['source']}: {s['category']}" if several else s["category"]
        skipped = sum(s["skipped"].values())
        lines.append(f"  {category[:36]:<36} {_n(s['events']):>10} {_n(s['rows']):>10} {_n(skipped):>9}")
        for reason, count in s["skipped"].items():
            lines.append(f"      {'- ' + reason:<32} {'':>10} {'':>10} {_n(count):>9}")
    total_events = sum(s["events"] for s in stats)
    total_rows = sum(s["rows"] for s in stats)
    total_skipped = total_events - total_rows
    lines.append(f"  {'total':<36} {_n(total_events):>10} {_n(total_rows):>10} {_n(total_skipped):>9}")
    return lines


def _launch_table(coverage: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per source: GPU activities, and those with no launching call (kernels, memcpys, memsets)."""
    several = len(coverage) > 1
    lines = ["GPU activities without a launching call (no cuda_api row with their correlation id)"]
    lines.append(f"  {'source' if several else '':<36} {'activities':>10} {'unlaunched':>10} {'share':>7}")
    for c in coverage:
        share = c["unlaunched"] / c["activities"] if c["activities"] else 0.0
        label = str(c["source"]) if several else "all"
        lines.append(f"  {label[-36:]:<36} {_n(c['activities']):>10} {_n(c['unlaunched']):>10} {share:>7.1%}")
        if c["unlaunched"]:
            kinds = ", ".join(
                f"{_n(c[f'unlaunched_{kind}'])} {kind}"
                for kind in ("kernels", "memcpys", "memsets")
                if c[f"unlaunched_{kind}"]
            )
            lines.append(f"      {kinds}")
    if any(c["unlaunched"] for c in coverage):
        lines.append("  idle before unlaunched work has no host thread to read: the report calls it unknown")
    return lines


def _unrecorded_table(coverage: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per process with any: kernel launches whose GPU work the trace does not hold."""
    lines = ["kernel launches with no GPU work in the trace (the profiler lost the records)"]
    lines.append(f"  {'process':<36} {'launches':>10} {'unrecorded':>10} {'share':>7}")
    for c in coverage:
        label = f"{c['source']}: pid {c['pid']}"
        share = c["unrecorded"] / c["launches"] if c["launches"] else 0.0
        lines.append(f"  {label[-36:]:<36} {_n(c['launches']):>10} {_n(c['unrecorded']):>10} {share:>7.1%}")
    lines.append("  their time counts as idle: the report marks the numbers and findings of those GPUs")
    return lines
