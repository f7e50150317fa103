"""One-line builders of valid event tables for tests.

``table(kernel(0, 10), api("cudaLaunchKernel", 0, 2, corr=1))`` is a conformed, validated event
table; defaults describe one process (pid 100, thread 101) driving GPU 0, stream 7.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq import schema
from traceq.meta import SourceMeta
from traceq.stats import CategoryCount, ImportStats
from traceq.trace import Trace, TraceMeta

PID = 100
TID = 101
SOURCE = "test.trace"

Row = dict[str, Any]


def kernel(
    start_ns: int,
    end_ns: int,
    name: str = "gemm",
    *,
    corr: int | None = None,
    stream: int = 7,
    device: int = 0,
    pid: int = PID,
    comm: bool = False,
    rank: int | None = None,
) -> Row:
    return {
        "kind": "kernel",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": name,
        "correlation": corr,
        "stream": stream,
        "device": device,
        "pid": pid,
        "is_comm": comm,
        "rank": rank,
    }


def nccl(start_ns: int, end_ns: int, *, corr: int | None = None, stream: int = 20, **kw: Any) -> Row:
    return kernel(
        start_ns, end_ns, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", corr=corr, stream=stream, comm=True, **kw
    )


def memcpy(
    start_ns: int,
    end_ns: int,
    copy_kind: str = "HtoD",
    *,
    corr: int | None = None,
    stream: int = 7,
    device: int = 0,
    pid: int = PID,
    nbytes: int = 1024,
    rank: int | None = None,
) -> Row:
    return {
        "kind": "memcpy",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": f"[CUDA memcpy {copy_kind}]",
        "correlation": corr,
        "stream": stream,
        "device": device,
        "pid": pid,
        "copy_kind": copy_kind,
        "bytes": nbytes,
        "rank": rank,
    }


def memset(
    start_ns: int, end_ns: int, *, corr: int | None = None, stream: int = 7, device: int = 0, pid: int = PID
) -> Row:
    return {
        "kind": "memset",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": "[CUDA memset]",
        "correlation": corr,
        "stream": stream,
        "device": device,
        "pid": pid,
        "bytes": 64,
    }


def api(
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    corr: int | None = None,
    pid: int = PID,
    tid: int = TID,
    rank: int | None = None,
) -> Row:
    return {
        "kind": "cuda_api",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": name,
        "correlation": corr,
        "pid": pid,
        "tid": tid,
        "rank": rank,
    }


def launch(start_ns: int, end_ns: int, corr: int, **kw: Any) -> Row:
    return api("cudaLaunchKernel", start_ns, end_ns, corr=corr, **kw)


def step(
    start_ns: int,
    end_ns: int,
    n: int = 0,
    *,
    name: str | None = None,
    pid: int = PID,
    tid: int = TID,
    rank: int | None = None,
) -> Row:
    return {
        "kind": "range",
        "start_ns": start_ns,
        "end_ns": end_ns,
        "name": name or f"ProfilerStep#{n}",
        "pid": pid,
        "tid": tid,
        "rank": rank,
    }


def table(*rows: Row, source: str = SOURCE) -> pl.DataFrame:
    """A conformed, validated event table sorted like an importer's output."""
    full = [{"source": source, "is_comm": False, **r} for r in rows]
    frame = pl.DataFrame(full, infer_schema_length=None) if full else schema.empty_frame()
    return schema.validate(schema.conform(frame).sort("start_ns", "end_ns", maintain_order=True))


def trace(*rows: Row, source: str = SOURCE, rank: int | None = None) -> Trace:
    """A :class:`Trace` around :func:`table`, with import statistics that account for every row."""
    events = table(*rows, source=source)
    counts = events.group_by("kind").len().sort("kind")
    stats = ImportStats.of(
        CategoryCount(source=source, category=str(k), events=int(n), rows=int(n))
        for k, n in zip(counts["kind"], counts["len"], strict=True)
    )
    return Trace(
        events=events, import_stats=stats, meta=TraceMeta((SourceMeta(path=source, format="kineto-json", rank=rank),))
    )
