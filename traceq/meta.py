"""What a trace says about itself: producer and version, GPUs, rank, clock anchor.

Importers fill one :class:`SourceMeta` per file; a :class:`~traceq.trace.Trace` holds one per
source.  Everything here is serialisable (``to_dict``/``from_dict``) so that it survives a Parquet
round trip and lands in the JSON report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the trace describes it (``TARGET_INFO_GPU`` / Kineto ``deviceProperties``)."""

    device: int
    name: str | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    compute_capability: str | None = None
    clock_hz: int | None = None
    memory_bandwidth_bytes_per_s: int | None = None


@dataclass(frozen=True)
class SourceMeta:
    """Facts about one source file.

    ``format`` is ``nsys-sqlite``, ``nsys-rep``, ``kineto-json`` or ``parquet``;
    ``format_version`` the producer's version where the file says it (nsys product version,
    Kineto ``schemaVersion`` and layout era); ``clock_offset_ns``, when known, converts the
    trace's own clock to Unix-epoch nanoseconds (``epoch_ns = start_ns + clock_offset_ns``).
    """

    path: str
    format: str
    format_version: str | None = None
    producer: str | None = None
    rank: int | None = None
    world_size: int | None = None
    clock_offset_ns: int | None = None
    gpus: tuple[GpuInfo, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["gpus"] = [asdict(g) for g in self.gpus]
        out["properties"] = dict(sorted(self.properties.items()))
        out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceMeta:
        return cls(
            path=data["path"],
            format=data["format"],
            format_version=data.get("format_version"),
            producer=data.get("producer"),
            rank=data.get("rank"),
            world_size=data.get("world_size"),
            clock_offset_ns=data.get("clock_offset_ns"),
            gpus=tuple(GpuInfo(**g) for g in data.get("gpus", ())),
            properties=dict(data.get("properties", {})),
            warnings=tuple(data.get("warnings", ())),
        )
