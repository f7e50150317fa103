"""Operators and phases on a planned timeline, in both formats, known to the ns.

The program below nests ops (a kernel launched from inside ``aten::linear`` > ``aten::addmm``),
opens module ranges, push/pop phases and a start/end phase that overlaps one, and replays a CUDA
graph.  The truth comes from the plan (the spans the builder returns, the thread's clock at each
phase boundary), never from traceq; the idle and busy ns of each phase are counted ns by ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceq
from tracegen.planned import FORMATS, JOB_ORIGIN_NS, PLANNED_KERNELS, Format, Rank, build_job

K = PLANNED_KERNELS


@dataclass
class Plan:
    """What the program did: per kernel span, its operator, path and module; each phase range."""

    kernels: list[tuple[int, int, str, str, str | None, str]] = field(default_factory=list)
    """(start, end, op_name, op_path, module, phase)."""
    phases: list[tuple[str, int, int]] = field(default_factory=list)
    step: tuple[int, int] = (0, 0)


def _program(plan: Plan) -> object:
    def program(rank: Rank) -> None:
        m = rank.main
        m.python(5_000)
        start = m.t
        with m.step():
            m.loader(20_000)  # the data phase: the GPU idles while the host waits for a batch
            plan.phases.append(("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", start, m.t))
            f0 = m.t
            with m.range("## forward ##"):
                with m.range("nn.Module: Net_0"), m.range("nn.Module: Linear_0"), m.op_range("aten::linear"):
                    m.python(2_000)
                    span = m.op("aten::addmm", K["gemm_fwd"], 40_000)
                    plan.kernels.append(
                        (
                            span.start_ns,
                            span.end_ns,
                            "aten::addmm",
                            "aten::linear/aten::addmm",
                            "Net_0/Linear_0",
                            "## forward ##",
                        )
                    )
                m.python(3_000)
                tail = m.start_range("tail")  # start/end: opens in forward, closes after it
                t0 = m.t
                span = m.op("aten::relu", K["add"], 8_000)
                plan.kernels.append((span.start_ns, span.end_ns, "aten::relu", "aten::relu", None, "tail"))
            plan.phases.append(("## forward ##", f0, m.t))
            b0 = m.t
            with m.range("## backward ##"):
                span = m.op("aten::mm", K["gemm_fwd"], 30_000)
                # backward began after tail: the innermost phase at this launch
                plan.kernels.append((span.start_ns, span.end_ns, "aten::mm", "aten::mm", None, "## backward ##"))
                m.end_range(tail)
                plan.phases.append(("tail", t0 - 0, m.t))
                with m.op_range("aten::graph_replay"):
                    for s in m.graph_launch([(K["add"], 6_000), (K["add"], 7_000)], graph_id=3):
                        plan.kernels.append(
                            (s.start_ns, s.end_ns, "aten::graph_replay", "aten::graph_replay", None, "## backward ##")
                        )
                m.sync()
            plan.phases.append(("## backward ##", b0, m.t))
            o0 = m.t
            with m.range("Optimizer.step#SGD.step"):
                m.python(4_000)
                span = m.op("aten::add_", K["add"], 5_000)
                plan.kernels.append(
                    (span.start_ns, span.end_ns, "aten::add_", "aten::add_", None, "Optimizer.step#SGD.step")
                )
                m.sync()
            plan.phases.append(("Optimizer.step#SGD.step", o0, m.t))
        plan.step = (start, m.t)

    return program


@pytest.fixture(scope="module", params=FORMATS)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Format, Plan, Path]:
    plan = Plan()
    job = build_job("ops_phases", _program(plan))  # type: ignore[arg-type]
    fmt: Format = request.param
    path = job.write(tmp_path_factory.mktemp(fmt), fmt)
    return fmt, plan, path


def test_every_kernel_is_linked_to_the_innermost_op_around_its_launch_with_its_path_and_module(
    written: tuple[Format, Plan, Path],
) -> None:
    fmt, plan, path = written
    got = traceq.activity_operators(traceq.load(path)).filter(pl.col("kind") == "kernel").sort("start_ns")
    expected = sorted(plan.kernels)
    assert got.select(pl.col("start_ns") - JOB_ORIGIN_NS, pl.col("end_ns") - JOB_ORIGIN_NS).rows() == [
        (s, e) for s, e, *_ in expected
    ]
    assert got.get_column("op_name").to_list() == [k[2] for k in expected]
    assert got.get_column("op_path").to_list() == [k[3] for k in expected]
    assert got.get_column("module").to_list() == [k[4] for k in expected]
    by = {"kineto": "external_id", "nsys": "enclosing"}[fmt]  # nsys has no External id
    linked = got.filter(pl.col("op_name") != "aten::graph_replay").get_column("op_linked_by").unique().to_list()
    assert linked == [by] if fmt == "nsys" else set(linked) <= {"external_id", "enclosing"}


def test_the_operator_table_sums_each_operators_kernels(written: tuple[Format, Plan, Path]) -> None:
    _, plan, path = written
    table = traceq.operators(traceq.load(path))
    totals: dict[str, int] = {}
    for s, e, op, *_ in plan.kernels:
        totals[op] = totals.get(op, 0) + e - s
    got = dict(table.filter(pl.col("op_name").is_not_null()).select("op_name", "gpu_ns").iter_rows())
    assert {k: v for k, v in got.items() if k in totals} == totals
    assert table.filter(pl.col("op_name") == "aten::graph_replay").row(0, named=True)["calls"] == 1


def _truth(plan: Plan) -> dict[str, dict[str, int]]:
    """Per phase: compute ns (by launch phase) and idle ns (by the host's innermost phase), ns by ns."""
    lo, hi = plan.step
    t = np.arange(lo, hi)
    busy_owner = np.full(t.size, "", dtype=object)
    for s, e, *_, phase in plan.kernels:
        busy_owner[(t >= s) & (t < e)] = phase  # one stream: kernels never overlap
    host = np.full(t.size, traceq.analyses.phases.NO_PHASE, dtype=object)
    # innermost = latest-starting open phase: paint in start order (ties: longer first)
    for name, s, e in sorted(plan.phases, key=lambda p: (p[1], -p[2])):
        host[(t >= s) & (t < e)] = name
    out: dict[str, dict[str, int]] = {}
    for name in set(host) | {p for p in busy_owner if p}:
        out[name] = {
            "compute_ns": int(np.sum(busy_owner == name)),
            "idle_ns": int(np.sum((busy_owner == "") & (host == name))),
        }
    return {k: v for k, v in out.items() if v["compute_ns"] or v["idle_ns"]}


def test_phases_get_the_gpu_time_launched_in_them_and_the_idle_time_the_host_spent_in_them(
    written: tuple[Format, Plan, Path],
) -> None:
    _, plan, path = written
    table = traceq.phases(traceq.load(path))
    got = {
        r["phase"]: {"compute_ns": r["compute_ns"], "idle_ns": r["idle_ns"]}
        for r in table.iter_rows(named=True)
        if r["compute_ns"] or r["idle_ns"]
    }
    assert got == _truth(plan)


def test_the_phases_sum_to_the_device_totals_to_the_ns(written: tuple[Format, Plan, Path]) -> None:
    _, plan, path = written
    analysis = traceq.analyze(traceq.load(path))
    (device,) = analysis.devices
    sums = analysis.phase_table.select(pl.exclude("rank", "device", "pid", "source", "phase").sum()).row(0, named=True)
    assert device.dur_ns == sums["dur_ns"] == plan.step[1] - plan.step[0]
    assert (device.compute_ns, device.comm_ns, device.exposed_comm_ns, device.idle_ns) == (
        sums["compute_ns"],
        sums["comm_ns"],
        sums["exposed_comm_ns"],
        sums["idle_ns"],
    )
    assert {c: sums[f"idle_{c}_ns"] for c in device.idle_by_cause_ns} == dict(device.idle_by_cause_ns)


def test_a_phase_pattern_chooses_the_phases(written: tuple[Format, Plan, Path]) -> None:
    _, _, path = written
    table = traceq.phases(traceq.load(path), phase_patterns=[r"^## \w+ ##$"])
    assert set(table.get_column("phase")) <= {"## forward ##", "## backward ##", traceq.analyses.phases.NO_PHASE}
