"""Which CPU ranges are a process's operators, each process on its own: its ``cpu_op`` events; in a
process without one, its operator-named ranges (``emit_nvtx``'s, read without their arguments); in
a process without those either, its ranges other than step and module ranges."""

from __future__ import annotations

import polars as pl
import pytest

from traceq.analyses.host_state import cpu_rows
from traceq.analyses.operators import _operator_ranges
from traceq.analyses.options import DEFAULT_STEP_PATTERN

from ..builders import Row, step, table


def _range(name: str, start_ns: int, end_ns: int, pid: int, kind: str = "range") -> Row:
    return {"kind": kind, "name": name, "start_ns": start_ns, "end_ns": end_ns, "pid": pid, "tid": pid}


WITH_CPU_OPS = [_range("aten::mm", 10, 20, 1, "cpu_op"), _range("forward", 5, 30, 1)]
"""A Kineto process: its cpu_ops are its operators, its annotations are not."""
WITH_NVTX_OPS = [
    _range("aten::add, seq = 3, op_id = 9", 10, 20, 2),
    _range("aten::add, seq = 4, op_id = 10", 20, 25, 2),
    _range("forward", 5, 30, 2),
]
"""An nsys process profiled with emit_nvtx: its operator-named ranges, without their arguments."""
PLAIN = [_range("forward", 5, 30, 3), _range("nn.Module: Linear_0", 6, 9, 3), step(0, 40, pid=3, tid=3)]
"""An nsys process annotated by hand: its ranges, but for the step and module ranges."""

WANT = {1: ["aten::mm"], 2: ["aten::add", "aten::add"], 3: ["forward"]}


def _operators(*processes: list[Row]) -> dict[int, list[str]]:
    rows = [row for rows in processes for row in rows]
    ops = _operator_ranges(cpu_rows(table(*rows)), DEFAULT_STEP_PATTERN, with_paths=False)
    assert ops.schema["name"] == pl.String
    by_pid: dict[int, list[str]] = {}
    for pid, name in ops.sort("pid", "start_ns").select("pid", "name").iter_rows():
        by_pid.setdefault(pid, []).append(name)
    return by_pid


@pytest.mark.parametrize(
    "processes",
    [
        [WITH_CPU_OPS, WITH_NVTX_OPS, PLAIN],
        [WITH_CPU_OPS, PLAIN],
        [WITH_NVTX_OPS, PLAIN],
        [WITH_NVTX_OPS],
        [PLAIN],
        [WITH_CPU_OPS],
    ],
    ids=["all-three", "cpu-ops-and-plain", "nvtx-and-plain", "nvtx-only", "plain-only", "cpu-ops-only"],
)
def test_each_process_has_the_operators_of_its_own_kind(processes: list[list[Row]]) -> None:
    pids = {rows[0]["pid"] for rows in processes}
    assert _operators(*processes) == {pid: names for pid, names in WANT.items() if pid in pids}
