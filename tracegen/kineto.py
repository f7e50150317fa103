"""Write one rank of a synthetic :class:`~tracegen.timeline.Timeline` as a PyTorch-profiler
(Kineto) trace, ``*.pt.trace.json[.gz]``.

The layout is that of a current Kineto (PyTorch 2.7+) trace: the object form with
``schemaVersion``, ``deviceProperties``, ``distributedInfo`` (backend, rank, world size, process
group), ``displayTimeUnit`` and ``baseTimeNanoseconds`` before ``traceEvents``; ``ts``/``dur`` in
µs relative to the base with exactly three decimals, so every ns survives; ``cpu_op`` ops
enclosing their ``cuda_runtime`` calls (linked by ``External id``); ``user_annotation`` ranges
(``ProfilerStep#N`` …) and their ``gpu_user_annotation`` projections; GPU rows (``kernel``,
``gpu_memcpy``, ``gpu_memset``, and ``cuda_sync``, as with ``enable_cuda_sync_events``) on
``pid`` = device index and ``tid`` = stream (``Stream Sync`` rows share their stream's track and
overlap its kernels, as in PyTorch 2.5-2.9; Kineto moved them to ``stream + 1000000`` in 2026);
``ac2g`` flow pairs keyed by the correlation id; ``M`` process/thread names; the profiler's own
``Trace`` span and instant markers.  The ns values equal those of the nsys export of the same
timeline (see :mod:`tracegen.timeline`).

Events are written as text in chunks (one step at a time) rather than through ``json.dumps`` per
event, so multi-GB traces stay affordable.  A ``.gz`` path is gzip-compressed with ``mtime=0``
and no file name in the header: the same timeline always gives the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

import numpy as np

from tracegen.catalogue import GpuSpec, KernelSpec
from tracegen.event import CUDA_EVENT_ID_BASE, Event, kineto_category
from tracegen.timeline import KINETO_BASE_TIME_NS, ProcessInfo, Timeline

NCCL_VERSION: Final = "2.21.5"
_GZIP_LEVEL: Final = 6
_SPAN_SORT_INDEX: Final = 536_870_912
_GPU_SORT_INDEX_BASE: Final = 16_777_216
_CHUNK_CHARS: Final = 1 << 22


class _Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


def write_kineto_json(
    timeline: Timeline,
    path: str | Path,
    *,
    rank: int = 0,
    cuda_sync_events: bool = True,
    compresslevel: int = _GZIP_LEVEL,
) -> Path:
    """Write ``rank``'s trace to ``path`` (gzip when it ends in ``.gz``; the folder is created if
    needed); returns the path.

    ``cuda_sync_events`` includes the ``cuda_sync`` records (``Stream Sync``, ``Stream Wait
    Event``) that PyTorch writes with ``_ExperimentalConfig(enable_cuda_sync_events=True)``;
    :meth:`Timeline.events` ``("kineto")`` assumes they are there.  ``compresslevel`` trades
    gzip time for size on large traces (any fixed level is deterministic).
    """
    out = Path(path)
    if not 0 <= rank < len(timeline.processes):
        raise ValueError(f"rank {rank} is not one of the timeline's {len(timeline.processes)} ranks")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as raw:
        if out.name.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=compresslevel, mtime=0) as gz:
                _write(timeline, timeline.processes[rank], out.name, cuda_sync_events, gz)
        else:
            _write(timeline, timeline.processes[rank], out.name, cuda_sync_events, raw)
    return out


def write_kineto_ranks(
    timeline: Timeline,
    directory: str | Path,
    *,
    pattern: str = "rank{rank}.pt.trace.json.gz",
    cuda_sync_events: bool = True,
) -> tuple[Path, ...]:
    """One trace per rank in ``directory`` (created if needed), named by ``pattern``."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(
        write_kineto_json(
            timeline, folder / pattern.format(rank=p.rank), rank=p.rank, cuda_sync_events=cuda_sync_events
        )
        for p in timeline.processes
    )


def _us(ns: int) -> str:
    """ns on the trace clock as Kineto's µs text: integer part, a dot, exactly three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _float(x: float) -> str:
    """A float the way Kineto's fmt prints a C++ float (shortest round-trip, single precision)."""
    text = np.format_float_positional(np.float32(x), trim="-")
    return text if "." in text else text + ".0"


def _occupancy_percent(k: KernelSpec, gpu: GpuSpec) -> int:
    threads = k.block[0] * k.block[1] * k.block[2]
    warps = math.ceil(threads / gpu.warp_size)
    limits = [
        gpu.max_blocks_per_sm,
        gpu.max_warps_per_sm // warps,
        gpu.registers_per_sm // (k.registers_per_thread * threads),
    ]
    if k.shared_memory_bytes:
        limits.append(gpu.shared_memory_per_sm_bytes // k.shared_memory_bytes)
    return round(100 * min(limits) * warps / gpu.max_warps_per_sm)


class _Writer:
    """Event text for one rank, built from templates so that per-step work is string assembly."""

    def __init__(self, timeline: Timeline, proc: ProcessInfo, cuda_sync_events: bool):
        self.tl = timeline
        self.proc = proc
        self.sync = cuda_sync_events
        self._names: dict[str, str] = {}
        self._kernel_args: dict[int, str] = {}
        self.ev_idx = 0

    def name(self, text: str) -> str:
        found = self._names.get(text)
        if found is None:
            found = self._names[text] = json.dumps(text)
        return found

    def kernel_args(self, k: KernelSpec) -> str:
        found = self._kernel_args.get(id(k))
        if found is None:
            gpu = self.tl.scenario.gpu
            blocks = k.grid[0] * k.grid[1] * k.grid[2] / gpu.sm_count
            warps = blocks * math.ceil(k.block[0] * k.block[1] * k.block[2] / gpu.warp_size)
            found = self._kernel_args[id(k)] = (
                f'"registers per thread": {k.registers_per_thread}, "shared memory": {k.shared_memory_bytes}, '
                f'"blocks per SM": {_float(blocks)}, "warps per SM": {_float(warps)}, '
                f'"grid": [{k.grid[0]}, {k.grid[1]}, {k.grid[2]}], '
                f'"block": [{k.block[0]}, {k.block[1]}, {k.block[2]}], '
                f'"est. achieved occupancy %": {_occupancy_percent(k, gpu)}'
            )
        return found

    def step(
        self, events: tuple[Event, ...], offset: int, corr_base: int, ext_base: int, step_name: str
    ) -> Iterator[str]:
        p = self.proc
        partners = self._flow_partners(events)
        for e in events:
            if e.kind == "gpu_sync" and not self.sync:
                continue
            ts = _us(e.start_ns + offset)
            dur = _us(e.end_ns - e.start_ns)
            ext = "" if e.external_id is None else f'"External id": {e.external_id + ext_base}'
            name = step_name if e.step_range else e.name
            tid = p.tid if e.tid is None else e.tid
            if e.kind in ("cpu_op", "range") and e.device is None:
                self.ev_idx += 1
                yield (
                    f'  {{\n    "ph": "X", "cat": "{kineto_category(e)}", "name": {self.name(name)}, "pid": {p.pid}, '
                    f'"tid": {tid},\n    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {ext + ", " if ext else ""}'
                    f'"Record function id": {(e.external_id or 0) + ext_base}, '
                    f'"Ev Idx": {self.ev_idx - 1}\n    }}\n  }}'
                )
                continue
            if e.kind == "range":  # GPU projection of a user annotation
                yield (
                    f'  {{\n    "ph": "X", "cat": "gpu_user_annotation", "name": {self.name(name)}, "pid": {e.device}, '
                    f'"tid": {e.stream},\n    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {ext}\n    }}\n  }}'
                )
                continue
            assert e.correlation is not None
            corr = e.correlation + corr_base
            if e.kind == "cuda_api":
                assert e.api is not None
                args = f'{ext + ", " if ext else ""}"cbid": {e.api.cbid}, "correlation": {corr}'
                yield (
                    f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": {self.name(e.api.name)}, "pid": {p.pid}, '
                    f'"tid": {tid},\n    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {args}\n    }}\n  }}'
                )
                if e.api.flow and e.correlation in partners:
                    yield (
                        f'  {{\n    "ph": "s", "id": {corr}, "pid": {p.pid}, "tid": {tid}, "ts": {ts},\n'
                        f'    "cat": "ac2g", "name": "ac2g"\n  }}'
                    )
                continue
            common = f'"device": {e.device}, "context": {p.context}, "stream": {e.stream}, "correlation": {corr}'
            if e.kind == "kernel":
                assert e.kernel is not None
                args = f'{ext + ", " if ext else ""}"queued": 0, {common}, {self.kernel_args(e.kernel)}'
                if e.graph_id is not None:
                    args += f', "graph id": {e.graph_id}'
                if e.comm is not None:
                    c = e.comm
                    args += (
                        f', "Collective name": "{c.collective}", "In msg nelems": {c.elements}, '
                        f'"Out msg nelems": {c.elements}, "Group size": {len(c.group_ranks)}, "dtype": "{c.dtype}", '
                        '"In split size": "[]", "Out split size": "[]", "Process Group Name": "0", '
                        '"Process Group Description": "default_pg", '
                        f'"Process Group Ranks": "[{", ".join(str(r) for r in c.group_ranks)}]"'
                    )
            elif e.kind in ("memcpy", "memset"):
                nbytes = e.bytes or 0
                bandwidth = repr(nbytes / (e.end_ns - e.start_ns)) if e.end_ns > e.start_ns else '"N/A"'
                args = f'{ext + ", " if ext else ""}{common}, "bytes": {nbytes}, "memory bandwidth (GB/s)": {bandwidth}'
            else:  # gpu_sync
                label = "Stream Sync" if e.sync_kind == "stream_synchronize" else "Stream Wait Event"
                wait = ""
                if e.cuda_event_id is not None:
                    wait = (
                        f'"wait_on_stream": {e.wait_on_stream}, "wait_on_cuda_event_record_corr_id": {corr - 1}, '
                        f'"wait_on_cuda_event_id": {CUDA_EVENT_ID_BASE + e.cuda_event_id}, '
                    )
                args = f'{ext + ", " if ext else ""}"cuda_sync_kind": "{label}", {wait}{common}'
            cat = kineto_category(e)
            yield (
                f'  {{\n    "ph": "X", "cat": "{cat}", "name": {self.name(e.name)}, "pid": {e.device}, '
                f'"tid": {e.stream},\n    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {args}\n    }}\n  }}'
            )
            yield (
                f'  {{\n    "ph": "f", "id": {corr}, "pid": {e.device}, "tid": {e.stream}, "ts": {ts},\n'
                f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}'
            )

    def _flow_partners(self, events: tuple[Event, ...]) -> frozenset[int]:
        kinds = ("kernel", "memcpy", "memset", "gpu_sync") if self.sync else ("kernel", "memcpy", "memset")
        return frozenset(e.correlation for e in events if e.kind in kinds and e.correlation is not None)


def _metadata_events(timeline: Timeline, proc: ProcessInfo, ts: str) -> list[str]:
    sc = timeline.scenario
    out = []

    def meta(name: str, pid: int | str, tid: int, args: str) -> None:
        pid_text = json.dumps(pid)
        out.append(
            f'  {{\n    "name": "{name}", "ph": "M", "ts": {ts}, "pid": {pid_text}, "tid": {tid},\n'
            f'    "args": {{\n      {args}\n    }}\n  }}'
        )

    meta("process_name", proc.pid, 0, f'"name": "{proc.name}"')
    meta("process_labels", proc.pid, 0, '"labels": "CPU"')
    meta("process_sort_index", proc.pid, 0, f'"sort_index": {proc.pid}')
    meta("thread_name", proc.pid, proc.tid, f'"name": "thread {proc.tid} ({proc.name})"')
    meta("thread_sort_index", proc.pid, proc.tid, f'"sort_index": {proc.tid}')
    for tid, thread in proc.extra_threads:
        meta("thread_name", proc.pid, tid, f'"name": "thread {tid} ({thread})"')
        meta("thread_sort_index", proc.pid, tid, f'"sort_index": {tid}')
    for d in range(sc.node_gpus):
        meta("process_name", d, 0, f'"name": "{proc.name}"')
        meta("process_labels", d, 0, f'"labels": "GPU {d}"')
        meta("process_sort_index", d, 0, f'"sort_index": {_GPU_SORT_INDEX_BASE + d}')
    for stream in sorted((sc.compute_stream, sc.nccl_stream)):
        meta("thread_name", proc.device, stream, f'"name": "stream {stream} "')
        meta("thread_sort_index", proc.device, stream, f'"sort_index": {stream}')
    meta("process_sort_index", "Spans", 0, f'"sort_index": {_SPAN_SORT_INDEX}')
    return out


def _header(timeline: Timeline, proc: ProcessInfo) -> str:
    sc, gpu = timeline.scenario, timeline.scenario.gpu
    devices = ",\n".join(
        f'    {{\n      "id": {d}, "name": "{gpu.name}", "totalGlobalMem": {gpu.memory_bytes},\n'
        f'      "computeMajor": {gpu.compute_major}, "computeMinor": {gpu.compute_minor},\n'
        f'      "maxThreadsPerBlock": {gpu.max_threads_per_block}, '
        f'"maxThreadsPerMultiprocessor": {gpu.max_threads_per_sm},\n'
        f'      "regsPerBlock": {gpu.registers_per_block}, "warpSize": {gpu.warp_size},\n'
        f'      "sharedMemPerBlock": {gpu.shared_memory_per_block_bytes}, "numSms": {gpu.sm_count}\n'
        f'    , "regsPerMultiprocessor": {gpu.registers_per_sm}, '
        f'"sharedMemPerBlockOptin": {gpu.shared_memory_per_block_optin_bytes}, '
        f'"sharedMemPerMultiprocessor": {gpu.shared_memory_per_sm_bytes}\n    }}'
        for d in range(sc.node_gpus)
    )
    ranks = list(range(sc.world_size))
    distributed = {
        "backend": "nccl",
        "rank": proc.rank,
        "world_size": sc.world_size,
        "pg_count": 1,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": sc.world_size,
                "ranks": ranks,
            }
        ],
        "nccl_version": NCCL_VERSION,
    }
    # "traceq.synthetic" (and the "traceq_synthetic" key below): the generator's name when the shipped samples
    # were first written; it is part of their bytes, so it stays although the package is now tracegen.
    generated = {"generator": "traceq.synthetic", "scenario": sc.name, "seed": sc.seed, "rank": proc.rank}
    trace_id = hashlib.sha256(f"{sc.name}/{sc.seed}/{proc.rank}".encode()).hexdigest()[:32].upper()
    return (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n' + devices + "\n  ],\n"
        f'  "distributedInfo": {json.dumps(distributed)},\n'
        '  "cupti_version": 24,\n  "cuda_runtime_version": 12060,\n  "cuda_driver_version": 12080,\n'
        f'  "trace_id": "{trace_id}",\n'
        f'  "traceq_synthetic": {json.dumps(generated)},\n'
        '  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {KINETO_BASE_TIME_NS},\n'
        '  "traceEvents": [\n'
    )


def _write(timeline: Timeline, proc: ProcessInfo, file_name: str, cuda_sync_events: bool, sink: _Sink) -> None:
    writer = _Writer(timeline, proc, cuda_sync_events)
    sink.write(_header(timeline, proc).encode())
    chunk: list[str] = []
    size = 0
    first = True
    for inst, events in timeline.rank_steps(proc.rank):
        for text in writer.step(
            events, inst.offset_ns, inst.correlation_base[proc.rank], inst.external_id_base[proc.rank], inst.step_name
        ):
            if not first:
                chunk.append(",\n")
            first = False
            chunk.append(text)
            size += len(text)
        if size >= _CHUNK_CHARS:
            sink.write("".join(chunk).encode())
            chunk, size = [], 0
    start, end = timeline.capture_start_ns, timeline.capture_end_ns
    tail = [
        *_metadata_events(timeline, proc, _us(start)),
        f'  {{\n    "ph": "X", "cat": "Trace", "ts": {_us(start)}, "dur": {_us(end - start)},\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        '    "args": {\n      "Op count": 0\n    }\n  }',
        f'  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
        f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {_us(start)}\n  }}',
        f'  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
        f'    "pid": "", "tid": "", "ts": {_us(end)}\n  }}',
    ]
    chunk.append((",\n" if not first else "") + ",\n".join(tail))
    chunk.append(f'\n  ],\n  "traceName": {json.dumps(file_name)}\n}}\n')
    sink.write("".join(chunk).encode())
