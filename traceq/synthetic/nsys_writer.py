"""Write a synthetic :class:`~traceq.synthetic.timeline.Timeline` as an Nsight Systems SQLite export.

The file mirrors what ``nsys export --type sqlite`` 2026.2 writes (schema 3.25.0): the table DDL
below is copied verbatim, comments included, from real exports (2026.2.1; ``TARGET_INFO_GPU``,
``TARGET_INFO_CUDA_DEVICE`` and ``TARGET_INFO_CUDA_CONTEXT_INFO`` from 2026.1.1, whose 2026.2
sample lacks them), and the data follows the exporter's conventions: strings interned in
``StringIds``; runtime API names with their ``_v3020``-style suffix and ``eventClass`` 0;
``globalTid = (vm << 48) | (pid << 24) | tid`` and ``globalPid`` the same with ``tid = 0``;
``ProfilerStep#N`` and the other ``record_function`` ranges as NVTX push/pop ranges
(``eventType`` 59) with inline ``text``; one ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` row per
``cudaStreamSynchronize``/``cudaStreamWaitEvent``, linked by ``correlationId`` (``syncType`` 3 and
2, the 2026.2 numbering); ``META_DATA_EXPORT`` names a plausible product version and says, in a
``GENERATED_BY`` row, that traceq's generator wrote the file.  Tables the synthetic job has no
rows for are not created (the exporter is lazy too); ``ENUM_NSYS_EVENT_CLASS`` and
``ENUM_NSYS_EVENT_TYPE`` hold only the values the file uses and their neighbours.

Determinism: same timeline, same bytes.  Rows are inserted in a stable order, the page size is
fixed, the file is VACUUMed, no timestamp of "now" is written (the export time is derived from
the capture), and the library-version field of the SQLite header is pinned to the value real
2026.x exports carry, so the bytes do not depend on the local SQLite build.

One file per node by default (every rank's process in one export, like a multi-GPU capture of
``torchrun``); :func:`write_nsys_per_rank` writes one export per rank instead, each saying its
rank in ``META_DATA_CAPTURE`` environment variables.
"""
# ruff: noqa: E501  -- the DDL below is verbatim from real exports, long comment lines included.

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from traceq.synthetic.timeline import (
    KINETO_BASE_TIME_NS,
    MEM_DEVICE,
    Event,
    ProcessInfo,
    Timeline,
)

NSYS_PRODUCT_VERSION: Final = "2026.2.1.210"
NSYS_SCHEMA_VERSION: Final = "3.25.0"
GENERATOR: Final = "traceq.synthetic"

_VM: Final = 1
_VM_GLOBAL_ID: Final = _VM << 48
_SQLITE_VERSION_IN_HEADER: Final = 3_046_000
_NO_EVENT: Final = 4_294_967_295
_CUDA_EVENT_ID_BASE: Final = 6_800
_STREAM_SYNC_TYPE: Final = {"stream_synchronize": 3, "stream_wait_event": 2}
_COPY_KIND: Final = {"HtoD": 1, "DtoH": 2, "DtoD": 8}
_SHARED_MEMORY_CARVEOUTS: Final = (32_768, 65_536, 102_400, 135_168, 167_936, 200_704, 233_472)
_BUS_IDS: Final = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_LOCAL_MEMORY_TOTAL: Final = 250_871_808
_EXPORT_DELAY_NS: Final = 41_000_000_000
"""The export is stamped this long after the capture ends (deterministic, not "now")."""

_DDL: Final[dict[str, str]] = {
    "StringIds": """\
CREATE TABLE StringIds (
    -- Consolidation of repetitive string values.

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- ID reference value.
    value                       TEXT      NOT NULL                     -- String value.
)""",
    "TARGET_INFO_SYSTEM_ENV": """\
CREATE TABLE TARGET_INFO_SYSTEM_ENV (
    globalVid                   INTEGER,                               -- Serialized GlobalId.
    devStateName                TEXT      NOT NULL,                    -- Device state name.
    name                        TEXT      NOT NULL,                    -- Property name.
    nameEnum                    INTEGER   NOT NULL,                    -- Property enum value.
    value                       TEXT      NOT NULL                     -- Property value.
)""",
    "TARGET_INFO_SESSION_START_TIME": """\
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs                  INTEGER,                               -- UTC Epoch timestamp at start of the capture (ns).
    utcTime                     TEXT,                                  -- Start of the capture in UTC.
    localTime                   TEXT,                                  -- Start of the capture in local time of target.
    systemClockNs               INTEGER                                -- Target system clock timestamp at start of the capture (ns).
)""",
    "ANALYSIS_DETAILS": """\
CREATE TABLE ANALYSIS_DETAILS (
    -- Details about the analysis session.

    globalVid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    duration                    INTEGER   NOT NULL,                    -- The total time span of the entire trace (ns).
    startTime                   INTEGER   NOT NULL,                    -- Trace start timestamp in nanoseconds.
    stopTime                    INTEGER   NOT NULL                     -- Trace stop timestamp in nanoseconds.
)""",
    "CUPTI_ACTIVITY_KIND_KERNEL": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    demangledName               INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Kernel function name w/ templates
    shortName                   INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Base kernel function name
    mangledName                 INTEGER,                               -- REFERENCES StringIds(id) -- Raw C++ mangled kernel function name
    launchType                  INTEGER,                               -- REFERENCES ENUM_CUDA_KERNEL_LAUNCH_TYPE(id)
    cacheConfig                 INTEGER,                               -- REFERENCES ENUM_CUDA_FUNC_CACHE_CONFIG(id)
    registersPerThread          INTEGER   NOT NULL,                    -- Number of registers required for each thread executing the kernel.
    gridX                       INTEGER   NOT NULL,                    -- X-dimension grid size.
    gridY                       INTEGER   NOT NULL,                    -- Y-dimension grid size.
    gridZ                       INTEGER   NOT NULL,                    -- Z-dimension grid size.
    blockX                      INTEGER   NOT NULL,                    -- X-dimension block size.
    blockY                      INTEGER   NOT NULL,                    -- Y-dimension block size.
    blockZ                      INTEGER   NOT NULL,                    -- Z-dimension block size.
    staticSharedMemory          INTEGER   NOT NULL,                    -- Static shared memory allocated for the kernel (B).
    dynamicSharedMemory         INTEGER   NOT NULL,                    -- Dynamic shared memory reserved for the kernel (B).
    localMemoryPerThread        INTEGER   NOT NULL,                    -- Amount of local memory reserved for each thread (B).
    localMemoryTotal            INTEGER   NOT NULL,                    -- Total amount of local memory reserved for the kernel (B).
    gridId                      INTEGER   NOT NULL,                    -- Unique grid ID of the kernel assigned at runtime.
    sharedMemoryExecuted        INTEGER,                               -- Shared memory size set by the driver.
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    sharedMemoryLimitConfig     INTEGER,                               -- REFERENCES ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG(id)
    qmdBulkReleaseDone          INTEGER,                               -- QMD bulk release done timestamp from CWD events.
    qmdPreexitDone              INTEGER,                               -- QMD pre-exit done timestamp from CWD events.
    qmdLastCtaDone              INTEGER,                               -- QMD last CTA done timestamp from CWD events.
    graphId                     INTEGER,                               -- Kernel graph ID.
    clusterX                    INTEGER,                               -- Cluster X dimension.
    clusterY                    INTEGER,                               -- Cluster Y dimension.
    clusterZ                    INTEGER,                               -- Cluster Z dimension.
    clusterSchedulingPolicy     INTEGER,                               -- Cluster scheduling policy.
    maxPotentialClusterSize     INTEGER,                               -- Maximum potential cluster size.
    maxActiveClusters           INTEGER,                               -- Maximum active clusters.
    sharedMemoryRequestedPercentage   INTEGER,                         -- Shared memory requested percentage.
    tensorSizeMinusOneElements   TEXT      NOT NULL                    -- TMA descriptor tensor size minus one elements array.
)""",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- Correlation ID of the synchronization API to which this result is associated.
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    deprecatedSyncType          INTEGER,                               -- Deprecated, use syncType instead. For older report, REFERENCES ENUM_CUPTI_SYNC_TYPE(id)
    syncType                    INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUPTI_SYNC_TYPE(id)
    eventId                     INTEGER   NOT NULL,                    -- Event ID for which the synchronization API is called.
    eventSyncId                 INTEGER                                -- CUDA Event Sync ID to link the synchronization API to associated event record API.
)""",
    "CUPTI_ACTIVITY_KIND_MEMSET": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    value                       INTEGER   NOT NULL,                    -- Value assigned to memory.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes set (B).
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    memKind                     INTEGER                                -- REFERENCES ENUM_CUDA_MEM_KIND(id)
)""",
    "CUPTI_ACTIVITY_KIND_MEMCPY": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes transferred (B).
    copyKind                    INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_MEMCPY_OPER(id)
    deprecatedSrcId             INTEGER,                               -- Deprecated, use srcDeviceId instead.
    srcKind                     INTEGER,                               -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    dstKind                     INTEGER,                               -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    srcDeviceId                 INTEGER,                               -- Source device ID.
    srcContextId                INTEGER,                               -- Source context ID.
    dstDeviceId                 INTEGER,                               -- Destination device ID.
    dstContextId                INTEGER,                               -- Destination context ID.
    migrationCause              INTEGER,                               -- REFERENCES ENUM_CUDA_UNIF_MEM_MIGRATION(id)
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    virtualAddress              INTEGER,                               -- Virtual base address of the page/s being transferred.
    copyCount                   INTEGER                                -- The total number of memcopy operations traced in this record. In CUDA MemcpyBatchAsync APIs, multiple memcpy operations may be batched together for optimization purposes based on certain heuristics.
)""",
    "PROCESSES": """\
CREATE TABLE PROCESSES (
    -- Names and identifiers of processes captured in the report.

    globalPid                   INTEGER,                               -- Serialized GlobalId.
    pid                         INTEGER,                               -- The process ID.
    name                        TEXT                                   -- The process name.
)""",
    "CUPTI_ACTIVITY_KIND_RUNTIME": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    eventClass                  INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_CLASS(id)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    correlationId               INTEGER,                               -- ID used to identify events that this function call has triggered.
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Function name
    returnValue                 INTEGER   NOT NULL,                    -- Return value of the function call.
    callchainId                 INTEGER                                -- REFERENCES CUDA_CALLCHAINS(id)
)""",
    "NVTX_EVENTS": """\
CREATE TABLE NVTX_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER,                               -- Event end timestamp (ns).
    eventType                   INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_TYPE(id)
    rangeId                     INTEGER,                               -- Correlation ID returned from a nvtxRangeStart call.
    category                    INTEGER,                               -- User-controlled ID that can be used to group events.
    color                       INTEGER,                               -- Encoded ARGB color value.
    text                        TEXT,                                  -- Explicit name/text (non-registered string)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    endGlobalTid                INTEGER,                               -- Serialized GlobalId.
    textId                      INTEGER,                               -- REFERENCES StringIds(id) -- Registered NVTX domain/string
    domainId                    INTEGER,                               -- User-controlled ID that can be used to group events.
    uint64Value                 INTEGER,                               -- One of possible payload value union members.
    int64Value                  INTEGER,                               -- One of possible payload value union members.
    doubleValue                 REAL,                                  -- One of possible payload value union members.
    uint32Value                 INTEGER,                               -- One of possible payload value union members.
    int32Value                  INTEGER,                               -- One of possible payload value union members.
    floatValue                  REAL,                                  -- One of possible payload value union members.
    jsonTextId                  INTEGER,                               -- One of possible payload value union members.
    jsonText                    TEXT,                                  -- One of possible payload value union members.
    binaryData                  TEXT                                   -- Binary payload. See docs for format.
)""",
    "ThreadNames": """\
CREATE TABLE ThreadNames (
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Thread name
    priority                    INTEGER,                               -- Priority of the thread.
    globalTid                   INTEGER                                -- Serialized GlobalId.
)""",
    "TARGET_INFO_GPU": """\
CREATE TABLE TARGET_INFO_GPU (
    vmId                        INTEGER   NOT NULL,                    -- Serialized GlobalId.
    id                          INTEGER   NOT NULL,                    -- Device ID.
    name                        TEXT,                                  -- Device name.
    busLocation                 TEXT,                                  -- PCI bus location.
    isDiscrete                  INTEGER,                               -- True if discrete, false if integrated.
    l2CacheSize                 INTEGER,                               -- Size of L2 cache (B).
    totalMemory                 INTEGER,                               -- Total amount of memory on the device (B).
    memoryBandwidth             INTEGER,                               -- Amount of memory transferred (B).
    clockRate                   INTEGER,                               -- Clock frequency (Hz).
    smCount                     INTEGER,                               -- Number of multiprocessors on the device.
    pwGpuId                     INTEGER,                               -- PerfWorks GPU ID.
    uuid                        TEXT,                                  -- Device UUID.
    luid                        INTEGER,                               -- Device LUID.
    chipName                    TEXT,                                  -- Chip name.
    cuDevice                    INTEGER,                               -- CUDA device ID.
    ctxswDevPath                TEXT,                                  -- GPU context switch device node path.
    ctrlDevPath                 TEXT,                                  -- GPU control device node path.
    revision                    INTEGER,                               -- Revision number.
    nodeMask                    INTEGER,                               -- Device node mask.
    constantMemory              INTEGER,                               -- Memory available on device for __constant__ variables (B).
    maxIPC                      INTEGER,                               -- Maximum instructions per count.
    maxRegistersPerBlock        INTEGER,                               -- Maximum number of 32-bit registers available per block.
    maxShmemPerBlock            INTEGER,                               -- Maximum optin shared memory per block.
    maxShmemPerBlockOptin       INTEGER,                               -- Maximum optin shared memory per block.
    maxShmemPerSm               INTEGER,                               -- Maximum shared memory available per multiprocessor (B).
    maxRegistersPerSm           INTEGER,                               -- Maximum number of 32-bit registers available per multiprocessor.
    threadsPerWarp              INTEGER,                               -- Warp size in threads.
    asyncEngines                INTEGER,                               -- Number of asynchronous engines.
    maxWarpsPerSm               INTEGER,                               -- Maximum number of warps per multiprocessor.
    maxBlocksPerSm              INTEGER,                               -- Maximum number of blocks per multiprocessor.
    maxThreadsPerBlock          INTEGER,                               -- Maximum number of threads per block.
    maxBlockDimX                INTEGER,                               -- Maximum X-dimension of a block.
    maxBlockDimY                INTEGER,                               -- Maximum Y-dimension of a block.
    maxBlockDimZ                INTEGER,                               -- Maximum Z-dimension of a block.
    maxGridDimX                 INTEGER,                               -- Maximum X-dimension of a grid.
    maxGridDimY                 INTEGER,                               -- Maximum Y-dimension of a grid.
    maxGridDimZ                 INTEGER,                               -- Maximum Z-dimension of a grid.
    computeMajor                INTEGER,                               -- Major compute capability version number.
    computeMinor                INTEGER,                               -- Minor compute capability version number.
    smMajor                     INTEGER,                               -- Major multiprocessor version number.
    smMinor                     INTEGER                                -- Minor multiprocessor version number.
)""",
    "TARGET_INFO_CUDA_DEVICE": """\
CREATE TABLE TARGET_INFO_CUDA_DEVICE (
    gpuId                       INTEGER,                               -- GPU ID.
    cudaId                      INTEGER   NOT NULL,                    -- CUDA device ID.
    pid                         INTEGER   NOT NULL,                    -- Process ID.
    uuid                        TEXT,                                  -- Device UUID.
    numMultiprocessors          INTEGER                                -- Number of SMs available on the device.
)""",
    "TARGET_INFO_CUDA_CONTEXT_INFO": """\
CREATE TABLE TARGET_INFO_CUDA_CONTEXT_INFO (
    nullStreamId                INTEGER   NOT NULL,                    -- Stream ID.
    hwId                        INTEGER   NOT NULL,                    -- Hardware ID.
    vmId                        INTEGER   NOT NULL,                    -- VM ID.
    processId                   INTEGER   NOT NULL,                    -- Process ID.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    parentContextId             INTEGER,                               -- For green context, this is the parent context id.
    isGreenContext              INTEGER,                               -- Is this a Green Context?
    numMultiprocessors          INTEGER                                -- For green context, number of SMs allocated.
)""",
    "TARGET_INFO_CUDA_STREAM": """\
CREATE TABLE TARGET_INFO_CUDA_STREAM (
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    hwId                        INTEGER   NOT NULL,                    -- Hardware ID.
    vmId                        INTEGER   NOT NULL,                    -- VM ID.
    processId                   INTEGER   NOT NULL,                    -- Process ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    priority                    INTEGER   NOT NULL,                    -- Priority of the stream.
    flag                        INTEGER   NOT NULL                     -- REFERENCES ENUM_CUPTI_STREAM_TYPE(id)
)""",
    "ENUM_NSYS_EVENT_TYPE": """\
CREATE TABLE ENUM_NSYS_EVENT_TYPE (
    -- Nsys event type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_NSYS_EVENT_CLASS": """\
CREATE TABLE ENUM_NSYS_EVENT_CLASS (
    -- Nsys event class labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUDA_MEMCPY_OPER": """\
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (
    -- CUDA memcpy operation labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUDA_MEM_KIND": """\
CREATE TABLE ENUM_CUDA_MEM_KIND (
    -- CUDA memory kind labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": """\
CREATE TABLE ENUM_CUDA_KERNEL_LAUNCH_TYPE (
    -- CUDA kernel launch type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG": """\
CREATE TABLE ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG (
    -- CUDA shared memory limit config labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUDA_FUNC_CACHE_CONFIG": """\
CREATE TABLE ENUM_CUDA_FUNC_CACHE_CONFIG (
    -- CUDA function cache config labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUPTI_STREAM_TYPE": """\
CREATE TABLE ENUM_CUPTI_STREAM_TYPE (
    -- CUPTI stream type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "ENUM_CUPTI_SYNC_TYPE": """\
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (
    -- CUPTI synchronization type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
)""",
    "META_DATA_CAPTURE": """\
CREATE TABLE META_DATA_CAPTURE (
    -- information about nsys capture parameters

    name                        TEXT      NOT NULL,                    -- Name of meta-data record
    value                       TEXT                                   -- Value of meta-data record
)""",
    "META_DATA_EXPORT": """\
CREATE TABLE META_DATA_EXPORT (
    -- information about nsys export process

    name                        TEXT      NOT NULL,                    -- Name of meta-data record
    value                       TEXT                                   -- Value of meta-data record
)""",
}
"""``CREATE TABLE`` statements of the tables written, in the order a real export creates them."""

_ENUMS: Final[dict[str, tuple[tuple[int, str, str], ...]]] = {
    "ENUM_NSYS_EVENT_TYPE": (
        (33, "NvtxCategory", "NvtxCategory"),
        (34, "NvtxMark", "NvtxMark"),
        (35, "NvtxPushRange", "NvtxPushRange"),
        (36, "NvtxPopRange", "NvtxPopRange"),
        (37, "NvtxStartRange", "NvtxStartRange"),
        (38, "NvtxEndRange", "NvtxEndRange"),
        (39, "NvtxThread", "NvtxThread"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
        (76, "NvtxDomainDestroy", "NvtxDomainDestroy"),
    ),
    "ENUM_NSYS_EVENT_CLASS": (
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        (13, "TRACE_PROCESS_EVENT_CUDA_EGL_DRIVER", "CUDA EGL driver"),
        (26, "TRACE_PROCESS_EVENT_CUDA_API", "CUDA API"),
    ),
    "ENUM_CUDA_MEMCPY_OPER": (
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
        (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
        (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
        (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
        (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
        (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
        (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
        (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
    ),
    "ENUM_CUDA_MEM_KIND": (
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ),
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": (
        (0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
        (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"),
        (2, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE", "Coop Single Device"),
        (3, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE", "Coop Multi Device"),
    ),
    "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG": (
        (0, "CUDA_SHARED_MEM_LIMIT_DEFAULT", "Default"),
        (1, "CUDA_SHARED_MEM_LIMIT_OPTIN", "Opt in"),
    ),
    "ENUM_CUDA_FUNC_CACHE_CONFIG": (
        (0, "CU_FUNC_CACHE_PREFER_NONE", "None"),
        (1, "CU_FUNC_CACHE_PREFER_SHARED", "Shared"),
        (2, "CU_FUNC_CACHE_PREFER_L1", "L1"),
        (3, "CU_FUNC_CACHE_PREFER_EQUAL", "Equal"),
    ),
    "ENUM_CUPTI_STREAM_TYPE": (
        (0, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_UNKNOWN", "Unknown stream type"),
        (1, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT", "Default stream"),
        (2, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING", "Non-blocking stream"),
        (3, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL", "Null stream"),
    ),
    "ENUM_CUPTI_SYNC_TYPE": (
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ),
}

TABLES: Final = tuple(_DDL)
"""Names of the tables every export written here contains."""


def global_tid(pid: int, tid: int) -> int:
    """nsys's serialized thread id: ``(vm << 48) | (pid << 24) | tid``."""
    return _VM_GLOBAL_ID | (pid << 24) | tid


def global_pid(pid: int) -> int:
    """nsys's serialized process id (``global_tid`` with ``tid = 0``)."""
    return _VM_GLOBAL_ID | (pid << 24)


def write_nsys_sqlite(
    timeline: Timeline, path: str | Path, *, ranks: Sequence[int] | None = None, vacuum: bool = True
) -> Path:
    """Write ``timeline`` as an nsys SQLite export at ``path`` (replaced if it exists; its folder is
    created if needed).

    ``ranks`` selects the processes written (default: all, one file for the node).  ``vacuum``
    compacts the file at the end; turn it off for very large benchmark exports.
    Returns the path.
    """
    out = Path(path)
    procs = timeline.processes if ranks is None else tuple(timeline.processes[r] for r in ranks)
    if not procs:
        raise ValueError("no ranks to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in (out, out.with_name(out.name + "-journal")):
        stale.unlink(missing_ok=True)
    conn = sqlite3.connect(out)
    try:
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(";\n".join(_DDL.values()) + ";\n")
        strings = _StringTable()
        _write_events(conn, timeline, procs, strings)
        _write_target_info(conn, timeline, procs, strings, out)
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.rows())
        conn.commit()
        if vacuum:
            conn.execute("VACUUM")
    finally:
        conn.close()
    _pin_header_version(out)
    return out


def write_nsys_per_rank(
    timeline: Timeline, directory: str | Path, *, pattern: str = "rank{rank}.nsys.sqlite", vacuum: bool = True
) -> tuple[Path, ...]:
    """One export per rank in ``directory`` (created if needed), named by ``pattern``."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(
        write_nsys_sqlite(timeline, folder / pattern.format(rank=p.rank), ranks=(p.rank,), vacuum=vacuum)
        for p in timeline.processes
    )


class _StringTable:
    """StringIds: ids handed out in first-use order, from 0."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        found = self._ids.get(value)
        if found is None:
            found = self._ids[value] = len(self._ids)
        return found

    def rows(self) -> Iterator[tuple[int, str]]:
        return ((i, v) for v, i in self._ids.items())


def _pin_header_version(path: Path) -> None:
    """Set the "SQLite version that last wrote the file" header field to a fixed value."""
    with path.open("r+b") as fh:
        header = fh.read(100)
        if header[92:96] != header[24:28]:  # version-valid-for must match the change counter
            raise RuntimeError(f"{path}: unexpected SQLite header after writing")
        fh.seek(96)
        fh.write(struct.pack(">I", _SQLITE_VERSION_IN_HEADER))


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


def _write_events(
    conn: sqlite3.Connection, timeline: Timeline, procs: tuple[ProcessInfo, ...], strings: _StringTable
) -> None:
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
    timeline: Timeline, procs: Iterable[ProcessInfo], strings: _StringTable
) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        grid_id = 1_000 + 7_919 * proc.rank
        statics: dict[int, tuple[tuple[object, ...], tuple[object, ...]]] = {}
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
                    (executed, None, 1 if smem > 49_152 else 0, None, None, None, None, 0, 0, 0, 0, 0, 0, None, "[]"),
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
            )


def _sync_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gpid = global_pid(proc.pid)
        for off, corr, e in _instances(timeline, proc, "gpu_sync"):
            assert e.sync_kind is not None and e.correlation is not None
            if e.cuda_event_id is None:
                event_id, event_sync_id = _NO_EVENT, 0
            else:  # the wait follows its cudaEventRecord, whose correlation links the two
                event_id, event_sync_id = _CUDA_EVENT_ID_BASE + e.cuda_event_id, e.correlation + corr - 1
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
        gtid = global_tid(proc.pid, proc.tid)
        for off, corr, e in _instances(timeline, proc, "cuda_api"):
            assert e.api is not None and e.correlation is not None
            yield (e.start_ns + off, e.end_ns + off, 0, gtid, e.correlation + corr, api_names[e.api.nsys_name], 0, None)


def _nvtx_rows(timeline: Timeline, procs: Iterable[ProcessInfo]) -> Iterator[tuple[object, ...]]:
    for proc in procs:
        gtid = global_tid(proc.pid, proc.tid)
        for inst, events in timeline.rank_steps(proc.rank):
            off = inst.offset_ns
            for e in events:
                if e.kind != "range" or e.is_gpu_projection:
                    continue
                text = inst.step_name if e.step_range else e.name
                yield (
                    e.start_ns + off,
                    e.end_ns + off,
                    59,
                    None,
                    None,
                    None,
                    text,
                    gtid,
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


def _utc_text(epoch_ns: int) -> str:
    return datetime.fromtimestamp(epoch_ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _gpu_uuid(hostname: str, device: int) -> str:
    h = hashlib.sha256(f"{hostname}/gpu{device}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _write_target_info(
    conn: sqlite3.Connection, timeline: Timeline, procs: tuple[ProcessInfo, ...], strings: _StringTable, out: Path
) -> None:
    sc, gpu = timeline.scenario, timeline.scenario.gpu
    start, stop = timeline.capture_start_ns, timeline.capture_end_ns
    conn.executemany(
        "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, 'Local (CLI)', ?, ?, ?)",
        [
            (_VM_GLOBAL_ID, "CpuCores", 1, "224"),
            (_VM_GLOBAL_ID, "CpuArchitecture", 3, "x86_64"),
            (_VM_GLOBAL_ID, "TargetInstallDir", 170, "/opt/nvidia/nsight-systems-cli/2026.2.1/target-linux-x64"),
            (_VM_GLOBAL_ID, "NvDriverVersion", 205, "570.124.06"),
            (_VM_GLOBAL_ID, "HardwarePlatform", 600, "x86_64"),
            (_VM_GLOBAL_ID, "SoftwarePlatform", 601, "L4X"),
            (_VM_GLOBAL_ID, "OsDescription", 605, "Ubuntu 22.04.5 LTS"),
            (_VM_GLOBAL_ID, "CudaDriverVersion", 611, "12080"),
            (_VM_GLOBAL_ID, "Hostname", 619, sc.hostname),
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
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, ?, ?)", (_VM_GLOBAL_ID, stop - start, start, stop))
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
        "INSERT INTO ThreadNames VALUES (?, 20, ?)", [(strings(p.name), global_tid(p.pid, p.tid)) for p in procs]
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_GPU VALUES (" + ",".join("?" * 41) + ")",
        [
            (
                _VM_GLOBAL_ID,
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
        [(sc.compute_stream, _VM, p.pid, p.device, p.context) for p in procs],
    )
    conn.executemany(
        "INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?, 0, ?, ?, ?, 0, ?)",
        [
            row
            for p in procs
            for row in ((sc.nccl_stream, _VM, p.pid, p.context, 2), (sc.compute_stream, _VM, p.pid, p.context, 3))
        ],
    )
    for table, rows in _ENUMS.items():
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
