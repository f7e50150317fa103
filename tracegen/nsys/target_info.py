"""The target-information and metadata tables of an nsys export: the machine, GPUs, processes, streams.

:func:`write_target_info` fills what an export says about the capture rather than its events:
``TARGET_INFO_*`` (host, session start, GPUs of the node, CUDA devices, contexts and streams),
``PROCESSES`` (nsys, the launcher and one process per written rank), ``ThreadNames``, the enum
tables, ``META_DATA_CAPTURE`` (how the job was launched; a per-rank export names its rank in
environment variables) and ``META_DATA_EXPORT`` (a plausible product version, an export time
derived from the capture rather than "now", and a ``GENERATED_BY`` row saying that traceq's
generator wrote the file).
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from tracegen.nsys.ddl import ENUMS
from tracegen.nsys.ids import VM, VM_GLOBAL_ID, StringTable, global_pid, global_tid
from tracegen.timeline import KINETO_BASE_TIME_NS, ProcessInfo, Timeline

NSYS_PRODUCT_VERSION: Final = "2026.2.1.210"
NSYS_SCHEMA_VERSION: Final = "3.25.0"
# The generator's name when the shipped samples were first written: it is part of their bytes, so it stays
# although the package is now tracegen.
GENERATOR: Final = "traceq.synthetic"
_BUS_IDS: Final = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_EXPORT_DELAY_NS: Final = 41_000_000_000
"""The export is stamped this long after the capture ends (deterministic, not "now")."""


def _utc_text(epoch_ns: int) -> str:
    return datetime.fromtimestamp(epoch_ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _gpu_uuid(hostname: str, device: int) -> str:
    h = hashlib.sha256(f"{hostname}/gpu{device}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def write_target_info(
    conn: sqlite3.Connection, timeline: Timeline, procs: tuple[ProcessInfo, ...], strings: StringTable, out: Path
) -> None:
    """Describe the capture of ``procs`` in the tables above; ``out`` is the export's path, as
    ``META_DATA_EXPORT`` names it."""
    sc, gpu = timeline.scenario, timeline.scenario.gpu
    start, stop = timeline.capture_start_ns, timeline.capture_end_ns
    conn.executemany(
        "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, 'Local (CLI)', ?, ?, ?)",
        [
            (VM_GLOBAL_ID, "CpuCores", 1, "224"),
            (VM_GLOBAL_ID, "CpuArchitecture", 3, "x86_64"),
            (VM_GLOBAL_ID, "TargetInstallDir", 170, "/opt/nvidia/nsight-systems-cli/2026.2.1/target-linux-x64"),
            (VM_GLOBAL_ID, "NvDriverVersion", 205, "570.124.06"),
            (VM_GLOBAL_ID, "HardwarePlatform", 600, "x86_64"),
            (VM_GLOBAL_ID, "SoftwarePlatform", 601, "L4X"),
            (VM_GLOBAL_ID, "OsDescription", 605, "Ubuntu 22.04.5 LTS"),
            (VM_GLOBAL_ID, "CudaDriverVersion", 611, "12080"),
            (VM_GLOBAL_ID, "Hostname", 619, sc.hostname),
        ],
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?, ?)",
        (
            KINETO_BASE_TIME_NS + start,
            _utc_text(KINETO_BASE_TIME_NS + start),
            _utc_text(KINETO_BASE_TIME_NS + start),
            start,
        ),
    )
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, ?, ?)", (VM_GLOBAL_ID, stop - start, start, stop))
    launcher = "torchrun" if len(timeline.processes) > 1 else "bash"
    first = timeline.processes[0].pid
    conn.executemany(
        "INSERT INTO PROCESSES VALUES (?, ?, ?)",
        [
            (global_pid(first - 41), first - 41, "nsys"),
            (global_pid(first - 23), first - 23, launcher),
            *((global_pid(p.pid), p.pid, p.name) for p in procs),
        ],
    )
    conn.executemany(
        "INSERT INTO ThreadNames VALUES (?, 20, ?)",
        [(strings(name), global_tid(p.pid, tid)) for p in procs for tid, name in ((p.tid, p.name), *p.extra_threads)],
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_GPU VALUES (" + ",".join("?" * 41) + ")",
        [
            (
                VM_GLOBAL_ID,
                d,
                gpu.name,
                f"0000:{_BUS_IDS[d % len(_BUS_IDS)]:02X}:00.0",
                1,
                gpu.l2_cache_bytes,
                gpu.memory_bytes,
                gpu.memory_bandwidth_bytes_per_s,
                gpu.clock_hz,
                gpu.sm_count,
                d,
                _gpu_uuid(sc.hostname, d),
                0,
                gpu.chip_name,
                d,
                None,
                None,
                161,
                0,
                65_536,
                4,
                gpu.registers_per_block,
                gpu.shared_memory_per_block_bytes,
                gpu.shared_memory_per_block_optin_bytes,
                gpu.shared_memory_per_sm_bytes,
                gpu.registers_per_sm,
                gpu.warp_size,
                gpu.async_engines,
                gpu.max_warps_per_sm,
                gpu.max_blocks_per_sm,
                gpu.max_threads_per_block,
                1024,
                1024,
                64,
                2_147_483_647,
                65_535,
                65_535,
                gpu.compute_major,
                gpu.compute_minor,
                gpu.compute_major,
                gpu.compute_minor,
            )
            for d in range(sc.node_gpus)
        ],
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, NULL, ?)",
        [(p.device, p.device, p.pid, gpu.sm_count) for p in procs],
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_CUDA_CONTEXT_INFO VALUES (?, 0, ?, ?, ?, ?, 0, 0, 0)",
        [(sc.compute_stream, VM, p.pid, p.device, p.context) for p in procs],
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?, 0, ?, ?, ?, 0, ?)",
        [
            row
            for p in procs
            for row in ((sc.nccl_stream, VM, p.pid, p.context, 2), (sc.compute_stream, VM, p.pid, p.context, 3))
        ],
    )
    for table, rows in ENUMS.items():
        conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
    conn.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", _capture_metadata(timeline, procs))
    conn.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", _export_metadata(timeline, procs, out))


def _capture_metadata(timeline: Timeline, procs: tuple[ProcessInfo, ...]) -> list[tuple[str, str]]:
    sc = timeline.scenario
    rows = [
        ("DEVICE_ID", "Local (CLI)"),
        ("CAPTURE_EVENT_TYPE", "NvtxEvents"),
        ("CAPTURE_EVENT_TYPE", "Cuda"),
        ("START_TRIGGER", "Immediate"),
        ("STOP_TRIGGER", "Delayed"),
        ("DEVICE_TYPE", "Unix"),
        ("DEVICE_DISPLAY_NAME", sc.hostname),
        ("CUDA_TRACE_SCOPE", "ProcessTree"),
        ("PROCESS_0:HOW_TO_ATTACH", "LaunchAnother"),
    ]
    if len(procs) == len(timeline.processes) and len(procs) > 1:
        args = [f"--nproc_per_node={len(procs)}", "train.py"]
        rows.append(("PROCESS_0:COMMAND", "torchrun"))
    else:
        args = ["train.py"]
        rows.append(("PROCESS_0:COMMAND", "python3"))
    rows += [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(args)]
    rows += [
        ("PROCESS_0:WORKING_DIR", "/workspace"),
        ("PROCESS_0:PID", "0"),
        ("PROCESS_0:COLLECT_NVTX_TRACE", "true"),
        ("PROCESS_0:COLLECT_CUDA_TRACE", "true"),
    ]
    if len(procs) == 1 and (len(timeline.processes) > 1 or sc.world_size > 1):
        p = procs[0]
        rows += [
            ("PROCESS_0:ENVIRONMENT_VARIABLE", f'RANK="{p.rank}"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", f'LOCAL_RANK="{p.device}"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", f'WORLD_SIZE="{sc.world_size}"'),
        ]
    return rows


def _export_metadata(timeline: Timeline, procs: tuple[ProcessInfo, ...], out: Path) -> list[tuple[str, str]]:
    sc = timeline.scenario
    exported = KINETO_BASE_TIME_NS + timeline.capture_end_ns + _EXPORT_DELAY_NS
    major, minor, micro = NSYS_SCHEMA_VERSION.split(".")
    rep = out.name.removesuffix(".sqlite").removesuffix(".nsys") + ".nsys-rep"
    ranks = ",".join(str(p.rank) for p in procs)
    return [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", NSYS_PRODUCT_VERSION),
        ("EXPORT_PRODUCT_DATE", NSYS_PRODUCT_VERSION.rsplit(".", 2)[0]),
        ("EXPORT_SCHEMA_VERSION", NSYS_SCHEMA_VERSION),
        ("EXPORT_SCHEMA_VERSION_MAJOR", major),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor),
        ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", _utc_text(exported)),
        ("EXPORT_TIME_LOCAL", _utc_text(exported) + " +0000 UTC"),
        ("EXPORT_HOST", sc.hostname),
        ("EXPORT_USER", ""),
        ("EXPORT_PARAM_EXPORT_TYPE", "SQLite"),
        ("EXPORT_PARAM_INPUT_FILE", rep),
        ("EXPORT_PARAM_OUTPUT_FILE", out.name),
        ("EXPORT_PARAM_LAZY", "true"),
        ("EXPORT_PARAM_USE_SHUFFLE", "true"),
        ("EXPORT_PARAM_INCLUDE_JSON", "false"),
        ("EXPORT_PARAM_INCLUDE_BLOBS", "false"),
        ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
        ("EXPORT_PARAM_TIME_SHIFT", "0"),
        ("EXPORT_CONFIG_TIME_SHIFT", "0"),
        ("GENERATED_BY", f"{GENERATOR}: synthetic trace written by traceq's generator, not by Nsight Systems"),
        ("GENERATED_SCENARIO", f"{sc.name} seed={sc.seed} ranks={ranks} world_size={sc.world_size}"),
    ]
