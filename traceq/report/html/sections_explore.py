"""What the HTML report's sections on *which part of the model* show: the top operators by GPU time
and every device's phases, as data for ``templates/sections/operators.html.j2`` and
``phases.html.j2`` (definitions: ``docs/analyses.md``, "Operators" and "Phases").
"""

from __future__ import annotations

from dataclasses import dataclass

from traceq.analyses.model import CAUSES
from traceq.report.html.tables import Cell, Column, Table, name_cell, num, row, table
from traceq.report.model import Report
from traceq.units import device_label, format_ns, format_share, pct


@dataclass(frozen=True)
class Operators:
    """The top operators (``count`` of them)."""

    table: Table
    count: int


@dataclass(frozen=True)
class DevicePhases:
    """One device's phase table, under its label."""

    label: str
    table: Table


def operators(report: Report) -> Operators:
    rows = [
        row(
            num(str(i)),
            name_cell(op.name),
            num(f"{op.calls:,}"),
            num(f"{op.kernels:,}"),
            num(format_ns(op.gpu_ns)),
            num(format_share(op.share)),
        )
        for i, op in enumerate(report.operators, 1)
    ]
    columns = (
        Column("#", num=True),
        Column("operator"),
        Column("calls", num=True),
        Column("kernels", num=True),
        Column("GPU time", num=True),
        Column("share of GPU time", num=True),
    )
    return Operators(table(columns, rows), len(report.operators))


def phases(report: Report) -> tuple[DevicePhases, ...]:
    """Per device, its phases, longest first: each one's share of the device's step time, its
    compute, exposed communication and idle, and its idle by cause."""
    out: list[DevicePhases] = []
    keys: list[tuple[str, int | None, int]] = []
    for p in report.phases:
        key = (p.source, p.pid, p.device)
        if key not in keys:
            keys.append(key)
    causes = list(dict.fromkeys([*CAUSES, *(c for p in report.phases for c in p.idle_by_cause_ns)]))
    columns = (
        Column("phase"),
        Column("ranges", num=True),
        Column("GPU activities", num=True),
        Column("time", num=True),
        Column("share of step time", num=True),
        Column("compute", num=True),
        Column("exposed comm", num=True),
        Column("idle", num=True),
        *(Column(c, num=True) for c in causes),
    )
    for key in keys:
        mine = [p for p in report.phases if (p.source, p.pid, p.device) == key]
        total = sum(p.dur_ns for p in mine)
        rows = [
            row(
                Cell(p.phase),
                num(f"{p.ranges:,}"),
                num(f"{p.activities:,}"),
                num(format_ns(p.dur_ns)),
                num(pct(p.dur_ns, total)),
                num(format_ns(p.compute_ns)),
                num(format_ns(p.exposed_comm_ns)),
                num(format_ns(p.idle_ns)),
                *(num(format_ns(p.idle_by_cause_ns.get(c, 0))) for c in causes),
            )
            for p in mine
        ]
        label = f"{device_label(mine[0].rank, mine[0].device, pid=mine[0].pid)} ({mine[0].source})"
        out.append(DevicePhases(label, table(columns, rows)))
    return tuple(out)
