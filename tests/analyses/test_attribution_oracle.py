"""The attribution oracle (``attribution_oracle.py``) follows the spec's rules, and its causes partition the idle.

Tiny inline timelines, one rule each, with the expected ns beside them; then a property: on random
small timelines, every window's causes sum to its idle ns counted nanosecond by nanosecond, and
every gap's causes to its length.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ..builders import PID, TID, Row, api, kernel, launch, step, table
from .attribution_oracle import CAUSES, Device, attribute

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def op(start_ns: int, end_ns: int, name: str = "aten::mm", *, tid: int = TID) -> Row:
    return {"kind": "cpu_op", "start_ns": start_ns, "end_ns": end_ns, "name": name, "pid": PID, "tid": tid}


def _only(*rows: Row, **kw: Any) -> Device:
    (device,) = attribute(table(*rows), **kw).values()
    return device


def _causes(device: Device, window: int = 0) -> dict[str, int]:
    return {c: ns for c, ns in device.windows[window].causes_ns.items() if ns}


def test_dependency_after_the_launch_latency_launch_before_and_cpu_where_only_the_step_runs() -> None:
    d = _only(
        step(0, 60),
        launch(0, 2, 1),
        kernel(5, 10, corr=1),  # latency sample 3
        launch(12, 14, 2),
        kernel(17, 20, corr=2),  # sample 3
        launch(20, 22, 3),
        kernel(40, 50, corr=3),  # sample 18: queued behind something else
    )
    assert d.launch_latency_ns == 3
    # leading [0, 5) launch; [10, 12) cpu, [12, 17) launch; [20, 25) launch, [25, 40) dependency; trailing cpu 10
    assert _causes(d) == {"launch": 5 + 5 + 5, "cpu": 2 + 10, "dependency": 15}
    assert [g.kind for g in d.gaps] == ["leading", "between", "between", "trailing"]
    assert [g.dominant for g in d.gaps] == ["launch", "launch", "dependency", "cpu"]


def test_a_sync_blocks_then_drains_the_queue_until_the_first_launch_after_it() -> None:
    sync = api("cudaStreamSynchronize", 4, 11, corr=9)
    d = _only(step(0, 40), launch(0, 1, 1), kernel(3, 10, corr=1), sync, launch(20, 22, 2), kernel(24, 30, corr=2))
    # [10, 11) blocked; [11, 24) drained (the Python, the launch call, the latency); trailing [30, 40) cpu
    assert _causes(d) == {"launch": 3, "sync": 14, "cpu": 10}
    assert d.gaps[1].sync is not None and d.gaps[1].sync["name"] == "cudaStreamSynchronize"


def test_a_launch_between_the_sync_and_the_gap_s_launch_means_no_drain() -> None:
    d = _only(
        step(0, 50),
        launch(0, 1, 1),
        kernel(3, 10, corr=1),
        api("cudaStreamSynchronize", 4, 11, corr=9),
        launch(12, 13, 2),
        kernel(15, 20, corr=2),  # the first launch after the sync: drained (sync)
        launch(25, 26, 3),
        kernel(28, 35, corr=3),  # a later one: [20, 25) cpu, [25, 28) launch
    )
    assert _causes(d) == {"launch": 3 + 3, "sync": 1 + 4, "cpu": 5 + 15}


def test_a_hip_synchronising_copy_is_a_sync_call() -> None:
    d = _only(
        step(0, 30),
        launch(0, 1, 1),
        kernel(3, 10, corr=1),
        api("hipMemcpyWithStream", 4, 13, corr=2),
        kernel(10, 12, corr=2),  # its copy (a kernel row stands in for it)
        launch(20, 21, 3),
        kernel(23, 30, corr=3),
    )
    assert _causes(d) == {"launch": 3, "sync": 11}


def test_the_loader_on_the_thread_or_on_another_while_the_thread_waits_is_input() -> None:
    d = _only(
        step(0, 100),
        step(0, 30, name=LOADER),  # on T
        launch(30, 31, 1),
        kernel(33, 40, corr=1),
        step(45, 70, name=LOADER, tid=TID + 1),  # on a worker while T waits (nothing recorded but the step)
        op(60, 80, "aten::add"),  # T busy from 60: not input any more
        launch(80, 81, 2),
        kernel(83, 100, corr=2),
    )
    # leading: [0, 30) input, [30, 33) launch; gap [40, 83): [40, 45) cpu, [45, 60) input, [60, 80) cpu (in an op
    # other than the launch's), [80, 83) launch
    assert _causes(d) == {"input": 30 + 15, "launch": 3 + 3, "cpu": 5 + 20}


def test_compile_ranges_count_on_their_first_instance_only() -> None:
    region = "Torch-Compiled Region: 0/0"
    d = _only(
        step(0, 50, 0),
        step(0, 20, name=region),
        launch(20, 21, 1),
        kernel(23, 40, corr=1),
        step(50, 100, 1),
        step(50, 70, name=region),  # the second call: a cache hit
        step(55, 60, name="OutputGraph.call_user_compiler"),  # always compile
        launch(70, 71, 2),
        kernel(73, 100, corr=2),
    )
    assert _causes(d, 0) == {"compile": 20, "launch": 3, "cpu": 10}
    assert _causes(d, 1) == {"compile": 5, "cpu": 20 - 5, "launch": 3}
    assert d.warmup == ("ProfilerStep#0",)


def test_the_launch_starts_at_the_op_around_the_call() -> None:
    d = _only(step(0, 30), op(5, 12), launch(10, 12, 1), kernel(14, 30, corr=1))
    assert _causes(d) == {"cpu": 5, "launch": 9}


def test_no_thread_is_unknown_and_no_recorded_event_on_the_thread_is_unknown_too() -> None:
    d = _only(
        step(0, 20),
        launch(0, 1, 1),
        kernel(3, 10, corr=1),
        kernel(12, 15, corr=77),  # no call: read on the thread of the kernel before it (in the step: cpu)
        kernel(18, 20, corr=78),  # neither it nor the one before has a call: unknown
        step(40, 60, 1),
        launch(50, 51, 2),
        kernel(53, 60, corr=2),  # [20, 40) outside any step, nothing on T: unknown (outside windows)
    )
    assert _causes(d, 0) == {"launch": 3, "cpu": 2, "unknown": 3}
    assert _causes(d, 1) == {"cpu": 10, "launch": 3}
    assert d.gaps[3].causes_ns["unknown"] == 20 and d.unlaunched == 2


def test_the_launch_latency_percentile_is_a_parameter() -> None:
    rows = [
        step(0, 200),
        *(
            r
            for i in range(10)
            for r in (launch(20 * i, 20 * i + 1, i + 1), kernel(20 * i + 1 + 2 + i, 20 * i + 15, corr=i + 1))
        ),
    ]
    assert _only(*rows, percentile_method="lower").launch_latency_ns == 2
    assert _only(*rows, percentile_method="higher").launch_latency_ns == 3


# --- the property: causes partition the idle exactly ------------------------------------------------------------

NAMES = ("cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemcpyAsync", "hipMemcpyWithStream")
RANGES = (LOADER, "Torch-Compiled Region: 0/0", "OutputGraph.call_user_compiler", "forward", "aten::mm")


@st.composite
def timelines(draw: st.DrawFn) -> list[Row]:
    def span(hi: int = 200) -> tuple[int, int]:
        a = draw(st.integers(0, hi))
        return a, a + draw(st.integers(1, 40))

    rows: list[Row] = []
    for n in range(draw(st.integers(0, 3))):
        rows.append(step(*span(), n))
    for corr in range(1, draw(st.integers(1, 8)) + 1):
        s, e = span()
        rows.append(kernel(s, e, corr=corr if draw(st.booleans()) else None, stream=draw(st.sampled_from([7, 20]))))
        if draw(st.booleans()):
            a, b = span()
            rows.append(api(draw(st.sampled_from(NAMES)), a, b, corr=corr, tid=TID + draw(st.integers(0, 1))))
    for _ in range(draw(st.integers(0, 5))):
        a, b = span()
        name = draw(st.sampled_from(RANGES))
        kind = "cpu_op" if name.startswith("aten::") else "range"
        rows.append(
            {"kind": kind, "start_ns": a, "end_ns": b, "name": name, "pid": PID, "tid": TID + draw(st.integers(0, 1))}
        )
    return rows


@settings(max_examples=300, deadline=None)
@given(timelines())
def test_the_causes_partition_every_window_s_idle_and_every_gap(rows: list[Row]) -> None:
    for device in attribute(table(*rows)).values():
        busy = {t for r in rows if r["kind"] == "kernel" for t in range(r["start_ns"], r["end_ns"])}
        for w in device.windows:
            idle = sum(1 for t in range(w.start_ns, w.end_ns) if t not in busy)
            assert w.idle_ns == idle
            assert set(w.causes_ns) == set(CAUSES) and sum(w.causes_ns.values()) == idle
        for g in device.gaps:
            assert sum(g.causes_ns.values()) == g.end_ns - g.start_ns
            assert all(t not in busy for t in (g.start_ns, g.end_ns - 1))
