"""What a Kineto / Chrome trace says about itself: era, producer, rank, clock anchor, GPUs, properties.

Reads the top-level keys (``schemaVersion``, ``deviceProperties``, ``distributedInfo`` -- before or
after ``traceEvents`` --, ``baseTimeNanoseconds``, version keys, ``traceName``) and the ``M``
metadata events, and fills :class:`~traceq.meta.SourceMeta`.  The PyTorch era is inferred from
the layout, because the files never name the PyTorch version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl

from traceq.importers.kineto.raw_frame import cut_text
from traceq.meta import GpuInfo, SourceMeta

PRODUCER_KINETO: Final = "PyTorch profiler (Kineto)"
PRODUCER_CHROME: Final = "Chrome trace"

_KINETO_CATEGORIES: Final = frozenset(
    {
        "cpu_op",
        "user_annotation",
        "gpu_user_annotation",
        "python_function",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cuda_driver",
        "cuda_sync",
        "ac2g",
        "Operator",
        "Runtime",
        "Kernel",
        "Memcpy",
        "Memset",
    }
)
_LEGACY_18_CATEGORIES: Final = frozenset({"Operator", "Runtime"})
_LEGACY_GPU_CATEGORIES: Final = frozenset({"Kernel", "Memcpy", "Memset"})
_EPOCH_NS_MIN: Final = 10**17
"""A median start above this (1973 as epoch ns) means the timestamps are absolute epoch µs."""
_SKIPPED_TOP_KEYS: Final = frozenset({"traceEvents", "deviceProperties", "distributedInfo"})


def distributed_int(top: Mapping[str, Any], key: str) -> int | None:
    """``distributedInfo[key]`` when it is an integer (``rank``, ``world_size``), else None."""
    info = top.get("distributedInfo")
    value = info.get(key) if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def describe_era(top: Mapping[str, Any], categories: set[str], stream_string_tids: bool) -> str:
    """The layout era, from the features that changed across PyTorch releases."""
    if isinstance(top.get("baseTimeNanoseconds"), int):
        return "PyTorch >= 2.4 layout (relative ts, baseTimeNanoseconds)"
    if stream_string_tids or categories & _LEGACY_18_CATEGORIES:
        return 'PyTorch 1.8-1.9 layout (Operator/Runtime/Kernel categories, "stream N" tids, epoch µs)'
    if categories & _LEGACY_GPU_CATEGORIES:
        return "PyTorch 1.10-1.11 layout (cpu_op with Kernel/Memcpy categories, epoch µs)"
    if categories & _KINETO_CATEGORIES:
        return "PyTorch 1.12-2.3 layout (absolute epoch µs)"
    return "Chrome trace"


@dataclass(frozen=True)
class EventFacts:
    """What meta needs from the events themselves, taken before the event frame is let go."""

    categories: frozenset[str]
    stream_string_tids: bool
    thread_names: tuple[tuple[str, str | None, str | None, str], ...]
    """``(process_name|thread_name, pid text, tid text, name)`` from ``M`` events."""


def event_facts(events: pl.DataFrame, flows: pl.DataFrame) -> EventFacts:
    """Categories present, whether tids are ``"stream N"`` text, and the ``M`` naming events
    (``flows``: the flow events, which :class:`~traceq.importers.kineto.compact.FlowSplit` kept apart)."""
    # Lazy queries: the eager ones allocate far more than these small answers need.
    lazy = events.lazy()
    both = pl.concat([lazy.select("cat", "stream_tid"), flows.lazy().select("cat", "stream_tid")])
    names = (
        lazy.filter(
            (pl.col("ph") == "M")
            & pl.col("name").is_in(["process_name", "thread_name"])
            & pl.col("meta_name").is_not_null()
        )
        .select("name", "pid_text", "tid_key", "meta_name")
        .collect()
    )
    categories = both.select(pl.col("cat").unique().cast(pl.String)).collect().to_series()
    return EventFacts(
        categories=frozenset(c for c in categories.to_list() if c is not None),
        stream_string_tids=bool(both.select(pl.col("stream_tid").any()).collect().item()),
        thread_names=tuple(names.iter_rows()),
    )


def build_meta(
    path: Path,
    top: Mapping[str, Any],
    facts: EventFacts,
    rows: pl.DataFrame,
    *,
    container: str,
    parser: str,
    warnings: tuple[str, ...],
) -> SourceMeta:
    """SourceMeta of one file; ``rows`` is the event table."""
    era = describe_era(top, set(facts.categories), facts.stream_string_tids)
    schema_version = top.get("schemaVersion")
    format_version = f"schemaVersion {schema_version}, {era}" if schema_version is not None else era
    if container == "array":
        format_version += " (array form)"
    kineto = schema_version is not None or bool(facts.categories & _KINETO_CATEGORIES)
    properties = _properties(top, facts)
    properties["traceq.parser"] = parser
    return SourceMeta(
        path=str(path),
        format="kineto-json",
        format_version=format_version,
        producer=PRODUCER_KINETO if kineto else PRODUCER_CHROME,
        rank=distributed_int(top, "rank"),
        world_size=distributed_int(top, "world_size"),
        clock_offset_ns=_clock_offset_ns(top, rows),
        gpus=_gpus(top.get("deviceProperties")),
        properties=properties,
        warnings=warnings,
    )


def _clock_offset_ns(top: Mapping[str, Any], rows: pl.DataFrame) -> int | None:
    base = top.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool):
        return base
    if rows.height and rows["start_ns"].median() is not None:
        median = rows["start_ns"].median()
        if isinstance(median, int | float) and median >= _EPOCH_NS_MIN:
            return 0
    return None


def _gpus(device_properties: Any) -> tuple[GpuInfo, ...]:
    if not isinstance(device_properties, list):
        return ()
    gpus = []
    for item in device_properties:
        if not isinstance(item, dict) or not _is_int(item.get("id")):
            continue
        major, minor = item.get("computeMajor"), item.get("computeMinor")
        gpus.append(
            GpuInfo(
                device=item["id"],
                name=item["name"] if isinstance(item.get("name"), str) else None,
                sm_count=item["numSms"] if _is_int(item.get("numSms")) else None,
                memory_bytes=item["totalGlobalMem"] if _is_int(item.get("totalGlobalMem")) else None,
                compute_capability=f"{major}.{minor}" if _is_int(major) and _is_int(minor) else None,
            )
        )
    return tuple(sorted(gpus, key=lambda g: g.device))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return cut_text(value)  # a metadata value is bounded as a field's text is
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def _properties(top: Mapping[str, Any], facts: EventFacts) -> dict[str, str]:
    """Scalar top-level keys (versions, traceName, ...), distributedInfo scalars, process/thread names."""
    out: dict[str, str] = {}
    for key, value in top.items():
        text = _scalar_text(value)
        if key not in _SKIPPED_TOP_KEYS and text is not None:
            out[key] = text
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        for key, value in info.items():
            text = _scalar_text(value)
            if text is not None:
                out[f"distributedInfo.{key}"] = text
    for what, pid, tid, label in facts.thread_names:
        key = f"process_name[{pid}]" if what == "process_name" else f"thread_name[{pid}/{tid}]"
        out.setdefault(key, label)
    return out
