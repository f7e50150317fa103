"""What an nsys export says about itself: product and schema version, GPUs, clock anchor, ranks.

Reads the small descriptive tables of an export (``META_DATA_EXPORT`` or its ≤2022 name
``EXPORT_META_DATA``, ``TARGET_INFO_GPU`` or the early-2021 ``TARGET_INFO_CUDA_GPU``,
``TARGET_INFO_SESSION_START_TIME``, ``ANALYSIS_DETAILS``, ``TARGET_INFO_SYSTEM_ENV``,
``DIAGNOSTIC_EVENT``, ``MPI_RANKS``, the captured environment in ``META_DATA_CAPTURE``) and turns
them into the pieces of a :class:`~traceq.meta.SourceMeta`.  Every table is optional: mid-2021
exports have no metadata table at all, and trimmed exports lack ``TARGET_INFO_GPU``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from traceq.importers.nsys.export_db import INT, ExportDb
from traceq.meta import GpuInfo

METADATA_TABLES: Final = ("META_DATA_EXPORT", "EXPORT_META_DATA")
"""2023+ name first, then the ≤2022 one."""

PRE_2022_SCHEMA: Final = "unknown (pre-2022 export without a metadata table)"

# Keys of the metadata table copied into SourceMeta.properties (under the name on the right).
_EXPORT_KEYS: Final = {
    "EXPORT_PRODUCT_NAME": "product_name",
    "EXPORT_TIME_UTC": "export_time_utc",
    "EXPORT_PARAM_INPUT_FILE": "export_input_file",
    "EXPORT_INPUT_FILE": "export_input_file",  # ≤2022 spelling
    "EXPORT_PARAM_LAZY": "export_lazy",
    "EXPORT_LAZY": "export_lazy",
    "DERIVED_FROM": "derived_from",  # set by tools that cut a time window out of a real export
    "DERIVED_WINDOW_NS": "derived_window_ns",
}
_SYSTEM_KEYS: Final = {
    "Hostname": "host",
    "NvDriverVersion": "nvidia_driver_version",
    "CudaDriverVersion": "cuda_driver_version",
    "OsDescription": "os",
}

# DIAGNOSTIC_EVENT.severity (ENUM_DIAGNOSTIC_SEVERITY_LEVEL): 2 warning, 3 error.  Errors are always
# surfaced; warnings only when they say data went missing, since most are chatty ("No NVTX events").
_SEVERITY_WARNING: Final = 2
_SEVERITY_ERROR: Final = 3
_DATA_LOSS = re.compile(r"drop|lost|overflow|discard|incomplete|truncat", re.IGNORECASE)
_MAX_DIAGNOSTICS: Final = 5


@dataclass(frozen=True)
class ExportInfo:
    """Version facts from the export-metadata table (all None for exports without one)."""

    metadata_table: str | None
    product_version: str | None
    schema_version: str | None
    values: dict[str, str]

    @property
    def version_label(self) -> str:
        """How error messages name this export's producer."""
        if self.product_version:
            return f"nsys {self.product_version} (schema {self.schema_version or 'unknown'})"
        return "an nsys version without export metadata (pre-2022)"

    @property
    def release(self) -> tuple[int, int] | None:
        """``(year, release)`` of the product version, e.g. ``(2026, 2)``; None when unknown."""
        match = re.match(r"^(\d{4})\.(\d+)", self.product_version or "")
        return (int(match[1]), int(match[2])) if match else None


def read_export_info(db: ExportDb) -> ExportInfo:
    for name in METADATA_TABLES:
        table = db.table(name)
        if table is not None:
            values = db.key_values(table)
            return ExportInfo(
                metadata_table=table,
                product_version=values.get("EXPORT_PRODUCT_VERSION") or None,
                schema_version=values.get("EXPORT_SCHEMA_VERSION") or None,
                values=values,
            )
    return ExportInfo(metadata_table=None, product_version=None, schema_version=None, values={})


def properties(db: ExportDb, info: ExportInfo) -> dict[str, str]:
    """The few facts worth keeping in ``SourceMeta.properties``."""
    out: dict[str, str] = {"schema_version": info.schema_version or PRE_2022_SCHEMA}
    if info.metadata_table:
        out["metadata_table"] = info.metadata_table
    for key, prop in _EXPORT_KEYS.items():
        if info.values.get(key) and prop not in out:
            out[prop] = info.values[key]
    env_table = db.table("TARGET_INFO_SYSTEM_ENV")
    if env_table is not None:
        env = db.key_values(env_table)
        out.update({prop: env[key] for key, prop in _SYSTEM_KEYS.items() if env.get(key)})
    session = _session_start(db)
    if session.get("utcTime"):
        out["session_start_utc"] = str(session["utcTime"])
    return out


def gpus(db: ExportDb) -> tuple[GpuInfo, ...]:
    """GPUs from ``TARGET_INFO_GPU`` (keyed by ``id``) or early-2021 ``TARGET_INFO_CUDA_GPU`` (``deviceId``)."""
    for table_name, key in (("TARGET_INFO_GPU", "id"), ("TARGET_INFO_CUDA_GPU", "deviceId")):
        table = db.table(table_name)
        if table is None:
            continue
        wanted = (key, "name", "smCount", "totalMemory", "computeMajor", "computeMinor", "clockRate", "memoryBandwidth")
        found: dict[int, GpuInfo] = {}
        for row in db.rows(table, wanted):
            device = _int(row.get(key))
            if device is None or device in found:  # one row per VM can repeat a GPU
                continue
            major, minor = _int(row.get("computeMajor")), _int(row.get("computeMinor"))
            found[device] = GpuInfo(
                device=device,
                name=None if row.get("name") is None else str(row["name"]),
                sm_count=_int(row.get("smCount")),
                memory_bytes=_int(row.get("totalMemory")),
                compute_capability=None if major is None or minor is None else f"{major}.{minor}",
                clock_hz=_int(row.get("clockRate")),
                memory_bandwidth_bytes_per_s=_int(row.get("memoryBandwidth")),
            )
        if found:
            return tuple(found[d] for d in sorted(found))
    return ()


def clock_offset_ns(db: ExportDb, info: ExportInfo) -> tuple[int | None, str | None]:
    """``utcEpochNs`` minus the session start on the event clock, and a note when it is unknown.

    The session start on the event clock is ``TARGET_INFO_SESSION_START_TIME.systemClockNs``
    (2026.1+) or, before that, ``ANALYSIS_DETAILS.startTime`` (observed equal where both exist).
    An export made with ``--time-normalize``/``--time-shift`` moved every timestamp, and it is not
    documented whether those two anchors moved with them, so no offset is claimed then.
    """
    session = _session_start(db)
    utc = _int(session.get("utcEpochNs"))
    if utc is None:
        return None, "no TARGET_INFO_SESSION_START_TIME in this export"
    normalized = info.values.get("EXPORT_PARAM_TIME_NORMALIZE", "false").lower() == "true"
    shifted = any(
        _int(info.values.get(k)) not in (None, 0) for k in ("EXPORT_PARAM_TIME_SHIFT", "EXPORT_CONFIG_TIME_SHIFT")
    )
    if normalized or shifted:
        return None, "export was time-normalized or time-shifted"
    start = _int(session.get("systemClockNs"))
    if start is None:
        table = db.table("ANALYSIS_DETAILS")
        rows = db.rows(table, ("startTime",)) if table else []
        start = _int(rows[0].get("startTime")) if rows else None
    if start is None:
        return None, "no session start on the event clock (ANALYSIS_DETAILS missing)"
    return utc - start, None


def diagnostics(db: ExportDb) -> list[str]:
    """nsys's own error diagnostics, and warnings that say events were lost, as warning lines."""
    table = db.table("DIAGNOSTIC_EVENT")
    if table is None:
        return []
    messages: list[str] = []
    for row in db.rows(table, ("severity", "text")):
        severity, text = _int(row.get("severity")), str(row.get("text") or "").strip()
        if severity == _SEVERITY_ERROR or (severity == _SEVERITY_WARNING and _DATA_LOSS.search(text)):
            line = " ".join(text.split())
            if line not in messages:
                messages.append(line)
    shown = [f"nsys diagnostic: {m}" for m in messages[:_MAX_DIAGNOSTICS]]
    if len(messages) > _MAX_DIAGNOSTICS:
        shown.append(f"nsys diagnostic: {len(messages) - _MAX_DIAGNOSTICS} more not shown (see DIAGNOSTIC_EVENT)")
    return shown


def rank_map(db: ExportDb) -> pl.DataFrame:
    """``MPI_RANKS`` as columns ``proc`` (``globalTid >> 24``, the process key) and ``rank`` (Int32).

    Empty when the export has no MPI tracing.  A process listed with several ranks keeps the lowest.
    """
    schema = {"proc": pl.Int64(), "rank": pl.Int32()}
    table = db.table("MPI_RANKS")
    if table is None or not {"globalTid", "rank"} <= set(db.columns(table)):
        return pl.DataFrame(schema=schema)
    ranks = db.read(table, {"globalTid": INT, "rank": INT}).drop_nulls()
    return (
        ranks.select(proc=pl.col("globalTid") // (1 << 24), rank=pl.col("rank").cast(pl.Int32))
        .group_by("proc")
        .agg(pl.col("rank").min())
        .sort("proc")
    )


@dataclass(frozen=True)
class LaunchEnv:
    """What the launched process's environment says of its place in a distributed job.

    From the ``PROCESS_<n>:ENVIRONMENT_VARIABLE`` rows of ``META_DATA_CAPTURE`` (values
    ``NAME="value"``), as set by ``torchrun`` and most launchers: ``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``.  A variable counts only when it is an integer and every launched process that
    sets it agrees; None otherwise.
    """

    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None


_LAUNCH_VARIABLES: Final = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
_ENV_ROW = re.compile(r"^PROCESS_\d+:ENVIRONMENT_VARIABLE$")
_ENV_VALUE = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)="?(.*?)"?$', re.DOTALL)


def launch_env(db: ExportDb) -> LaunchEnv:
    """``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` from the captured environment (``META_DATA_CAPTURE``,
    2023+ exports); all None where the export has no such table or the variables are not set."""
    table = db.table("META_DATA_CAPTURE")
    if table is None or not {"name", "value"} <= set(db.columns(table)):
        return LaunchEnv()
    found: dict[str, set[str]] = {name: set() for name in _LAUNCH_VARIABLES}
    for row in db.rows(table, ("name", "value")):
        if not _ENV_ROW.match(str(row.get("name") or "")):
            continue
        match = _ENV_VALUE.match(str(row.get("value") or "").strip())
        if match and match[1] in found:
            found[match[1]].add(match[2].strip())
    values = {name: _int(next(iter(seen))) if len(seen) == 1 else None for name, seen in found.items()}
    return LaunchEnv(rank=values["RANK"], local_rank=values["LOCAL_RANK"], world_size=values["WORLD_SIZE"])


def _session_start(db: ExportDb) -> dict[str, Any]:
    table = db.table("TARGET_INFO_SESSION_START_TIME")
    rows = db.rows(table, ("utcEpochNs", "utcTime", "systemClockNs")) if table else []
    return rows[0] if rows else {}


def _int(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None
