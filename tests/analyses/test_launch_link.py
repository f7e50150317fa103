"""The launch link, checked against a plain-Python reading of its definition.

An activity's launch key is (source, pid, correlation); its launching call is the earliest
``cuda_api`` row of that key with a thread (ties: the first in table order).  The reference below
walks the rows one by one; hypothesis draws tables with several sources and processes, missing
pids, ids and threads, dense and sparse correlation ids (the offset slots and the sorted ones), in
the importers' order or shuffled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq import schema
from traceq.analyses.host_state import CPU_KINDS, cpu_rows
from traceq.analyses.launch_link import (
    LAUNCHING_CALL_COLUMNS,
    NONE,
    LaunchLink,
    _link,
    _one_process_link,
    launch_link,
    launching_calls,
)

from ..builders import api, kernel, memcpy, step, table

SETTINGS = settings(deadline=None, max_examples=200)
GPU = set(schema.GPU_ACTIVITY_KINDS)

Key = tuple[str, int, int] | None


def key_of(row: dict[str, Any]) -> Key:
    if row["kind"] not in GPU | {"cuda_api"} or row["pid"] is None or row["correlation"] is None:
        return None
    return (row["source"], row["pid"], row["correlation"])


def reference(frame: pl.DataFrame) -> dict[str, Any]:
    """What the link must answer, one row at a time."""
    rows = frame.to_dicts()
    cpu_position: dict[int, int] = {}
    for i, r in enumerate(rows):
        if r["kind"] in CPU_KINDS and r["tid"] is not None:
            cpu_position[i] = len(cpu_position)
    first: dict[Key, int] = {}
    for i in sorted(cpu_position, key=lambda i: (rows[i]["start_ns"], i)):
        k = key_of(rows[i])
        if rows[i]["kind"] == "cuda_api" and k is not None:
            first.setdefault(k, cpu_position[i])
    api_keys = {key_of(r) for r in rows if r["kind"] == "cuda_api"} - {None}
    gpu_keys = {key_of(r) for r in rows if r["kind"] in GPU} - {None}
    return {
        "keys": [key_of(r) for r in rows],
        "cpu_rows": sorted(cpu_position),
        "call": [first.get(key_of(r), NONE) if key_of(r) is not None else NONE for r in rows],
        "launched": [key_of(r) in api_keys for r in rows],
        "with_activity": [key_of(r) in gpu_keys for r in rows],
    }


def check(frame: pl.DataFrame) -> None:
    want = reference(frame)
    link = launch_link(frame)
    every = np.arange(frame.height)
    assert link.calls_of(every).tolist() == want["call"]
    assert link.launched(every).tolist() == want["launched"]
    assert link.with_activity(every).tolist() == want["with_activity"]
    # one slot per key, none for a row without one; cpu_slot is slot read in cpu_rows order
    slots = link.slot.tolist()
    by_key: dict[Key, set[int]] = {}
    for k, s in zip(want["keys"], slots, strict=True):
        by_key.setdefault(k, set()).add(s)
    assert by_key.pop(None, {NONE}) == {NONE}
    assert all(len(s) == 1 and NONE not in s for s in by_key.values())
    assert len({next(iter(s)) for s in by_key.values()}) == len(by_key)
    assert link.cpu_slot.tolist() == [slots[i] for i in want["cpu_rows"]]


def test_a_kernel_is_linked_to_the_earliest_call_of_its_process_and_id() -> None:
    frame = table(
        step(0, 100),
        api("cudaLaunchKernel", 5, 8, corr=1),  # cpu position 1 (the step is 0)
        api("cuLaunchKernel", 6, 7, corr=1),  # the same id again, later: not the launch
        kernel(10, 20, corr=1),
        kernel(30, 40, corr=2),  # no call carries 2
        api("cudaMemcpyAsync", 40, 45, corr=3, pid=7, tid=7),  # another process's id 3
        memcpy(50, 60, corr=3),
    )
    link = launch_link(frame)
    rows = np.arange(frame.height)
    kinds = frame.get_column("kind").cast(pl.String).to_list()
    calls = dict(zip(range(frame.height), link.calls_of(rows).tolist(), strict=True))
    assert [calls[i] for i, k in enumerate(kinds) if k in GPU] == [1, NONE, NONE]
    check(frame)


def test_a_call_without_a_thread_counts_as_launched_work_but_is_no_launching_call() -> None:
    frame = table(api("cudaLaunchKernel", 0, 2, corr=1, tid=None), kernel(5, 9, corr=1))  # type: ignore[arg-type]
    link = launch_link(frame)
    assert link.calls_of(np.array([1])).tolist() == [NONE]
    assert link.launched(np.array([1])).tolist() == [True]
    check(frame)


ROW = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["cuda_api", "cuda_api", "kernel", "memcpy", "range"]),
        "source": st.sampled_from(["a.json", "b.json"]),
        "pid": st.sampled_from([1, 2, None]),
        "tid": st.sampled_from([5, 6, None]),
        "correlation": st.one_of(st.none(), st.integers(0, 6), st.just(10**15), st.just(-3)),
        "start_ns": st.integers(0, 20),
    }
)


def frame_of(rows: list[dict[str, Any]], order: str) -> pl.DataFrame:
    full = []
    for r in rows:
        gpu = r["kind"] in GPU
        full.append(
            {
                **r,
                "end_ns": r["start_ns"] + 1,
                "name": "k" if gpu else "call",
                "tid": None if gpu else r["tid"],
                "device": 0 if gpu else None,
                "stream": 7 if gpu else None,
                "copy_kind": "HtoD" if r["kind"] == "memcpy" else None,
                "is_comm": False,
            }
        )
    frame = schema.conform(pl.DataFrame(full, infer_schema_length=None)) if full else schema.empty_frame()
    if order == "importer":  # by source, then start (the Trace's order)
        frame = frame.sort("source", "start_ns", maintain_order=True)
    return frame


@SETTINGS
@given(st.lists(ROW, max_size=30), st.sampled_from(["importer", "as drawn"]))
def test_the_link_answers_what_a_row_by_row_reading_of_the_table_does(rows: list[dict[str, Any]], order: str) -> None:
    check(frame_of(rows, order))


@SETTINGS
@given(st.lists(ROW, max_size=30), st.sampled_from(["importer", "as drawn"]))
def test_the_launching_calls_are_each_device_activitys_call_once_in_cpu_order(
    rows: list[dict[str, Any]], order: str
) -> None:
    """launching_calls: the distinct launching calls of the GPU activity on a device (the rows the
    operators and the phases look up), in cpu_rows order, and each such activity's call among them."""
    frame = frame_of(rows, order)
    want = reference(frame)
    on_device = [i for i, r in enumerate(frame.to_dicts()) if r["kind"] in GPU and r["device"] is not None]
    calls = [want["call"][i] for i in on_device]
    distinct = sorted({c for c in calls if c != NONE})
    got = launching_calls(frame)
    cpu = cpu_rows(frame)
    assert got.rows.get_column("_point").to_list() == list(range(len(distinct)))
    assert got.rows.drop("_point").rows() == cpu[distinct].select(LAUNCHING_CALL_COLUMNS).rows()
    assert got.gather("name", "external_id").rows() == cpu[distinct].select("name", "external_id").rows()
    assert [distinct[p] if p != NONE else NONE for p in got.points.tolist()] == calls
    assert got.points_of(np.array(calls, np.int64)).tolist() == got.points.tolist()
    strangers = sorted(set(range(cpu.height)) - set(distinct))
    if strangers:  # a call that launched nothing on a device has no point
        with pytest.raises(ValueError, match="launched no GPU activity"):
            got.points_of(np.array(strangers[:1], np.int64))


ONE_PROCESS_ROW = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["cuda_api", "cuda_api", "kernel", "memcpy", "range"]),
        "source": st.just("a.json"),
        "pid": st.sampled_from([1, 1, 1, None]),
        "tid": st.sampled_from([5, 6, None]),
        "correlation": st.one_of(st.none(), st.integers(0, 6), st.integers(-3, 40)),
        "start_ns": st.integers(0, 20),
    }
)


def _same_link(got: LaunchLink, want: LaunchLink) -> None:
    """Equal answers; the slot numbers themselves may differ (any one-to-one numbering of the keys)."""
    every = np.arange(len(got.slot))
    assert got.calls_of(every).tolist() == want.calls_of(every).tolist()
    assert got.launched(every).tolist() == want.launched(every).tolist()
    assert got.with_activity(every).tolist() == want.with_activity(every).tolist()
    pairs = set(zip(got.slot.tolist(), want.slot.tolist(), strict=True))
    assert len({g for g, _ in pairs}) == len(pairs) == len({w for _, w in pairs})


@SETTINGS
@given(st.lists(ONE_PROCESS_ROW, min_size=1, max_size=30), st.sampled_from(["importer", "as drawn"]))
def test_one_process_tables_take_the_offset_path_and_answer_as_the_general_one(
    rows: list[dict[str, Any]], order: str
) -> None:
    """A one-rank part's table (one source, one pid: the common case) is linked by the correlation
    id's offset, computed inside polars; it answers what the row-by-row reading and the general way
    (keys copied out, slots by group) answer, in the importers' order (sorted by start: the first
    call of a key is its earliest) or not (then by a stable sort of the starts)."""
    frame = frame_of(rows, order)
    fast = _one_process_link(frame)
    keyed = [r for r in rows if r["pid"] is not None and r["correlation"] is not None and r["kind"] != "range"]
    assert (fast is not None) == bool(keyed)
    check(frame)
    if fast is not None:
        _same_link(fast, _link(frame))


def test_keys_of_two_processes_are_not_one_process() -> None:
    two = table(api("cudaLaunchKernel", 0, 5, corr=1, pid=1), api("cudaLaunchKernel", 0, 5, corr=1, pid=2))
    assert _one_process_link(two) is None
    check(two)
