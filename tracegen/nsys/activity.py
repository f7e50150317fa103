"""The activity tables of an nsys export: kernels, syncs, memsets, memcpys, runtime calls, NVTX ranges.

:func:`write_activity` inserts every written rank's events, step by step, into
``CUPTI_ACTIVITY_KIND_*`` and ``NVTX_EVENTS`` with the exporter's conventions: runtime API names
interned in ``StringIds`` with their ``_v3020``-style suffix and ``eventClass`` 0; ids per process
(:func:`~tracegen.nsys.ids.global_pid`, :func:`~tracegen.nsys.ids.global_tid`);
``ProfilerStep#N`` and the other ``record_function`` ranges as NVTX push/pop ranges (``eventType``
59) with inline ``text`` (the ``cpu_op`` rows too when
:attr:`~tracegen.timeline.Timeline.nsys_cpu_ops` is set, as ``emit_nvtx`` writes them), each on
the thread that recorded it; one ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` row per
``cudaStreamSynchronize``/``cudaStreamWaitEvent``, linked by ``correlationId`` (``syncType`` 3
and 2, the 2026.2 numbering); a kernel's ``graphId`` when it ran in a CUDA graph.  Rows go in a stable
order, so the same timeline gives the same file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Final

from tracegen.catalogue import MEM_DEVICE
from tracegen.event import CUDA_EVENT_ID_BASE, Event
from tracegen.nsys.ids import StringTable, global_pid, global_tid
from tracegen.timeline import ProcessInfo, Timeline

_NO_EVENT: Final = 4_294_967_295
"""The ``eventId`` of a sync row that waits on no CUDA event (UINT32_MAX)."""
_STREAM_SYNC_TYPE: Final = {"stream_synchronize": 3, "stream_wait_event": 2}
_COPY_KIND: Final = {"HtoD": 1, "DtoH": 2, "DtoD": 8}
_SHARED_MEMORY_CARVEOUTS: Final = (32_768, 65_536, 102_400, 135_168, 167_936, 200_704, 233_472)
_LOCAL_MEMORY_TOTAL: Final = 250_871_808


def _instances(timeline: Timeline, proc: ProcessInfo, kind: str) -> Iterator[tuple[int, int, Event]]:
    """(time offset, correlation base, event) for each of ``proc``'s events of ``kind``, step by step."""
    per_template: dict[int, list[Event]] = {}
    for inst, events in timeline.rank_steps(proc.rank):
        rows = per_template.get(inst.template)
        if rows is None:
            rows = per_template[inst.template] = [e for e in events if e.kind == kind and not e.is_gpu_projection]
        corr = inst.correlation_base[proc.rank]
        for e in rows:
            yield inst.offset_ns, corr, e


def write_activity(
    conn: sqlite3.Connection, timeline: Timeline, procs: tuple[ProcessInfo, ...], strings: StringTable
) -> None:
    """Insert the activity rows of ``procs``; ``strings`` interns their names, process names first,
    then the runtime API names, then kernel names as the kernels come."""
    for proc in procs:
        strings(proc.name)
    api_names: dict[str, int] = {}
    for proc in procs:
        for _, _, e in _instances(timeline, proc, "cuda_api"):
            if e.api is not None and e.api.nsys_name not in api_names:
                api_names[e.api.nsys_name] = strings(e.api.nsys_name)
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + ",".join("?" * 40) + ")",
        _kernel_rows(timeline, procs, strings),
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", _sync_rows(timeline, procs)
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", _memset_rows(timeline, procs)
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + ",".join("?" * 21) + ")", _memcpy_rows(timeline, procs)
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", _runtime_rows(timeline, procs, api_names)
    )
    conn.executemany("INSERT INTO NVTX_EVENTS VALUES (" + ",".join("?" * 20) + ")", _nvtx_rows(timeline, procs))


def _kernel_rows(
    timeline: Timeline, procs: Iterable[ProcessInfo], strings: StringTable
) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        grid_id = 1_000 + 7_919 * proc.rank
        statics: dict[int, tuple[tuple[object, ...], tuple[object, ...], tuple[object, ...]]] = {}
        for off, corr, e in _instances(timeline, proc, "kernel"):
            k = e.kernel
            assert k is not None and e.correlation is not None
            parts = statics.get(id(k))
            if parts is None:
                smem = k.shared_memory_bytes
                executed = next((c for c in _SHARED_MEMORY_CARVEOUTS if c >= smem), _SHARED_MEMORY_CARVEOUTS[-1])
                mangled = None if k.mangled_name is None else strings(k.mangled_name)
                parts = statics[id(k)] = (
                    (
                        strings(k.name),
                        strings(k.short_name),
                        mangled,
                        1,
                        0,
                        k.registers_per_thread,
                        *k.grid,
                        *k.block,
                        k.static_shared_memory_bytes,
                        k.dynamic_shared_memory_bytes,
                        0,
                        _LOCAL_MEMORY_TOTAL,
                    ),
                    (executed, None, 1 if smem > 49_152 else 0, None, None, None),
                    (0, 0, 0, 0, 0, 0, None, "[]"),
                )
            grid_id += 1
            yield (
                e.start_ns + off,
                e.end_ns + off,
                e.device,
                proc.context,
                0,
                e.stream,
                e.correlation + corr,
                gpid,
                *parts[0],
                grid_id,
                *parts[1],
                e.graph_id,
                *parts[2],
            )


def _sync_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        for off, corr, e in _instances(timeline, proc, "gpu_sync"):
            assert e.sync_kind is not None and e.correlation is not None
            if e.cuda_event_id is None:
                event_id, event_sync_id = _NO_EVENT, 0
            else:  # the wait follows its cudaEventRecord, whose correlation links the two
                event_id, event_sync_id = CUDA_EVENT_ID_BASE + e.cuda_event_id, e.correlation + corr - 1
            yield (
                e.start_ns + off,
                e.end_ns + off,
                e.device,
                proc.context,
                None,
                e.stream,
                e.correlation + corr,
                gpid,
                None,
                _STREAM_SYNC_TYPE[e.sync_kind],
                event_id,
                event_sync_id,
            )


def _memset_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        for off, corr, e in _instances(timeline, proc, "memset"):
            assert e.correlation is not None
            yield (
                e.start_ns + off,
                e.end_ns + off,
                e.device,
                proc.context,
                0,
                e.stream,
                e.correlation + corr,
                gpid,
                0,
                e.bytes,
                None,
                MEM_DEVICE if e.dst_kind is None else e.dst_kind,
            )


def _memcpy_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        for off, corr, e in _instances(timeline, proc, "memcpy"):
            assert e.correlation is not None and e.copy_kind is not None
            yield (
                e.start_ns + off,
                e.end_ns + off,
                e.device,
                proc.context,
                0,
                e.stream,
                e.correlation + corr,
                gpid,
                e.bytes,
                _COPY_KIND[e.copy_kind],
                None,
                e.src_kind,
                e.dst_kind,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                1,
            )


def _runtime_rows(
    timeline: Timeline, procs: Iterable[ProcessInfo], api_names: dict[str, int]
) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        for off, corr, e in _instances(timeline, proc, "cuda_api"):
            assert e.api is not None and e.correlation is not None
            gtid = global_tid(proc.pid, proc.tid if e.tid is None else e.tid)
            yield (e.start_ns + off, e.end_ns + off, 0, gtid, e.correlation + corr, api_names[e.api.nsys_name], 0, None)


def _nvtx_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    kinds = ("range", "cpu_op") if timeline.nsys_cpu_ops else ("range",)
    for proc in procs:
        for inst, events in timeline.rank_steps(proc.rank):
            off = inst.offset_ns
            for e in events:
                if e.kind not in kinds or e.is_gpu_projection:
                    continue
                text = inst.step_name if e.step_range else e.name
                yield (
                    e.start_ns + off,
                    e.end_ns + off,
                    60 if e.nvtx_start_end else 59,
                    None,
                    None,
                    None,
                    text,
                    global_tid(proc.pid, proc.tid if e.tid is None else e.tid),
                    None,
                    None,
                    0,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                )
