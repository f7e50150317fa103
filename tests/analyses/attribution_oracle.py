"""A brute-force oracle of issue 13's attribution model: every idle ns of every device, and its cause.

It implements ``docs/analyses.md`` ("Idle time by cause") literally and slowly, from the event
table alone (``traceq.load(path).events``), sharing no code with ``traceq.analyses``:

1. Per device (source, pid, GPU): busy = the union of its kernels, memcpys and memsets; span = from
   the earlier of the first step window's and the first activity's start to the later of the last
   window's and the last activity's end; the idle intervals are span minus busy (leading and
   trailing ones included).
2. Per idle interval ``[a, b)``: ``A`` the activity starting at ``b`` (lowest correlation on ties),
   ``L`` its launching call, ``T`` the thread of ``L`` (else of the launch of the activity ending at
   ``a``), ``E`` the innermost op/range on ``T`` around ``L``, ``S`` the latest sync call on ``T``
   that started before ``a``.
3. The launch latency of the device: the 10th percentile of ``A.start - L.end`` over its idle
   intervals whose ``A`` is the first activity of its launch, where that lies in ``[0, 50 us]``.
4. Each interval is cut into elementary segments at every boundary that can change a rule's answer
   (every CPU event of the process, the windows, ``L.end + latency``, ``E.start``, ``S.end``); each
   segment gets the cause of the first rule (spec table, priorities 1..9) that holds at its start.

Readings of the spec where it is open (each said in the report to the lead): rules 6 and 7 need an
``L``, so trailing idle after a sync is ``cpu`` (rule 8), not ``sync``; the activity "that precedes"
an interval is the one ending at ``a`` with the lowest correlation; "the latest sync" is the one
that started last; rule 4's second case holds when ``T`` is inside no recorded CPU event other than
step ranges (inside or outside a step); a range named like a DataLoader or compile range may be
``E`` (it is a range around ``L``); warm-up compares step ``k`` with the median of the steps after
it.  The percentile method is a parameter, so tests can show a truth does not depend on it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from ..spans import merge, subtract

CAUSES: Final = ("input", "sync", "compile", "launch", "cpu", "dependency", "unknown")
LAUNCH_LATENCY_CAP_NS: Final = 50_000
STEP_PATTERN: Final = re.compile(r"^(ProfilerStep#\d+|step[ _#]?\d+|iteration[ _#]?\d+)$", re.IGNORECASE)
SYNC_PATTERN: Final = re.compile(
    r"^(?:(?:cuda|hip)(?:Stream|Device|Event|Ctx|Thread)Synchronize|cu(?:Stream|Ctx|Event)Synchronize"
    r"|(?:cuda|hip)Memcpy(?:2D|3D)?(?:To|From)?(?:Symbol|Array)?(?:Peer)?|hipMemcpyWithStream"
    r"|cuMemcpy(?:[DHA]to[DHA]|2D|3D|Peer)?(?:Unaligned)?)(?:_v\d+)?$"
)
INPUT_PATTERNS: Final = (r"^enumerate\(DataLoader\)#.*\.__next__$",)
COMPILE_ALWAYS: Final = re.compile(
    r"^TorchDynamo$|^torch\._dynamo\.|^_compile\.|^compile_fx|^OutputGraph\.call_user_compiler|^aot_autograd"
    r"|^create_aot_dispatcher_function|^[Ii]nductor|^async_compile"
)
COMPILE_FIRST_ONLY: Final = re.compile(r"^Torch-Compiled Region")
NCCL: Final = (r"^nccl",)
ACTIVITY: Final = ("kernel", "memcpy", "memset")

Row = dict[str, Any]
DeviceKey = tuple[str, int, int]
"""(source, pid, device)."""


@dataclass(frozen=True)
class Gap:
    """One idle interval of a device and how its ns split by cause."""

    start_ns: int
    end_ns: int
    kind: str
    """``leading``, ``between`` or ``trailing``."""
    causes_ns: dict[str, int]
    next: Row | None
    launch: Row | None
    sync: Row | None
    """The blocked or drained sync call, when a ``sync`` cause has ns in the gap."""

    @property
    def dominant(self) -> str:
        return max(CAUSES, key=lambda c: (self.causes_ns[c], -CAUSES.index(c)))


@dataclass(frozen=True)
class Window:
    """One step window of a device (or its activity window) and its numbers."""

    name: str
    start_ns: int
    end_ns: int
    idle_ns: int
    causes_ns: dict[str, int]
    comm_ns: int
    exposed_comm_ns: int


@dataclass(frozen=True)
class Device:
    key: DeviceKey
    launch_latency_ns: int
    windows: tuple[Window, ...]
    gaps: tuple[Gap, ...]
    warmup: tuple[str, ...]
    """Names of the leading windows that are warm-up (spec section 5)."""
    activities: int = 0
    unlaunched: int = 0
    """Activities whose correlation matches no call of their process."""


def _length_in(spans: Sequence[tuple[int, int]], lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in merge(spans))


def _inside(ev: Row, t: int) -> bool:
    return bool(ev["start_ns"] <= t < ev["end_ns"])


@dataclass
class _Process:
    """The CPU side of one process: its events per thread and its calls by correlation."""

    threads: dict[int, list[Row]] = field(default_factory=dict)
    calls: dict[int, Row] = field(default_factory=dict)
    windows: list[tuple[str, int, int]] = field(default_factory=list)
    compile_ids: set[int] = field(default_factory=set)
    """``id()`` of the rows that are compile ranges."""


def _processes(rows: list[Row], input_patterns: Sequence[str]) -> dict[tuple[str, int], _Process]:
    procs: dict[tuple[str, int], _Process] = {}
    loader = [re.compile(p) for p in input_patterns]
    # The first instance of a compiled region's name in its process: every range of that name that
    # starts at its earliest start (ranges that start together cannot be told apart).
    first_start: dict[tuple[str, int, str], int] = {}
    for r in rows:
        if r["kind"] in ("range", "cpu_op") and r["tid"] is not None and r["device"] is None and r["pid"] is not None:
            key = (r["source"], r["pid"], r["name"])
            first_start[key] = min(first_start.get(key, r["start_ns"]), r["start_ns"])
    for r in sorted(rows, key=lambda r: (r["start_ns"], -r["end_ns"])):
        if r["tid"] is None or r["device"] is not None or r["pid"] is None:
            continue
        p = procs.setdefault((r["source"], r["pid"]), _Process())
        p.threads.setdefault(r["tid"], []).append(r)
        name = r["name"]
        r["is_sync"] = r["kind"] == "cuda_api" and bool(SYNC_PATTERN.match(name))
        r["is_step"] = r["kind"] == "range" and bool(STEP_PATTERN.match(name))
        r["is_loader"] = r["kind"] in ("range", "cpu_op") and any(x.search(name) for x in loader)
        if r["kind"] == "cuda_api" and r["correlation"] is not None:
            p.calls.setdefault(r["correlation"], r)
        if r["is_step"] and (name, r["start_ns"], r["end_ns"]) not in p.windows:
            p.windows.append((name, r["start_ns"], r["end_ns"]))
        if r["kind"] in ("range", "cpu_op"):
            key = (r["source"], r["pid"], name)
            if COMPILE_ALWAYS.search(name) or (COMPILE_FIRST_ONLY.match(name) and r["start_ns"] == first_start[key]):
                p.compile_ids.add(id(r))
    for p in procs.values():
        p.windows.sort(key=lambda w: (w[1], w[2]))
    return procs


class _Interval:
    """The matched events of one idle interval and the rules of the spec's table at a time t."""

    def __init__(
        self, a: int, b: int, proc: _Process, nxt: Row | None, prev: Row | None, lat: int, dev_corrs: set[int]
    ):
        self.a, self.b, self.proc, self.lat = a, b, proc, lat
        self.launch = proc.calls.get(nxt["correlation"]) if nxt and nxt["correlation"] is not None else None
        prev_launch = proc.calls.get(prev["correlation"]) if prev and prev["correlation"] is not None else None
        source = self.launch or prev_launch
        self.tid: int | None = None if source is None else source["tid"]
        self.events = [] if self.tid is None else proc.threads.get(self.tid, [])
        self.enclosing: Row | None = None
        self.drained: Row | None = None
        if self.launch is None:
            return
        L = self.launch
        around = [
            e
            for e in self.events
            if e["kind"] in ("cpu_op", "range")
            and not e["is_step"]
            and e["start_ns"] <= L["start_ns"]
            and L["end_ns"] <= e["end_ns"]
        ]
        self.enclosing = max(around, key=lambda e: (e["start_ns"], -e["end_ns"]), default=None)
        syncs = [e for e in self.events if e["is_sync"] and e["start_ns"] < a]
        s = max(syncs, key=lambda e: (e["start_ns"], e["end_ns"]), default=None)
        if s is not None and s["end_ns"] <= L["start_ns"]:
            launches_between = [
                e
                for e in self.events
                if e["kind"] == "cuda_api"
                and e["correlation"] in dev_corrs
                and s["end_ns"] <= e["start_ns"] < L["start_ns"]
            ]
            if not launches_between:
                self.drained = s

    def boundaries(self) -> set[int]:
        out = {self.a, self.b}
        for evs in self.proc.threads.values():
            for e in evs:
                out.update((e["start_ns"], e["end_ns"]))
        if self.launch is not None:
            out.add(self.launch["end_ns"] + self.lat)
            out.add((self.enclosing or self.launch)["start_ns"])
        if self.drained is not None:
            out.add(self.drained["end_ns"])
        return {t for t in out if self.a <= t < self.b}

    def blocked_in(self, t: int) -> Row | None:
        return next((e for e in self.events if e["is_sync"] and _inside(e, t)), None)

    def cause(self, t: int) -> str:
        if self.tid is None:
            return "unknown"
        L = self.launch
        if L is not None and t >= L["end_ns"] + self.lat:
            return "dependency"
        if self.blocked_in(t) is not None:
            return "sync"
        if any(e["is_loader"] and _inside(e, t) for e in self.events):
            return "input"
        busy_here = [e for e in self.events if _inside(e, t) and not e["is_step"]]
        if not busy_here:
            for tid, evs in self.proc.threads.items():
                if tid != self.tid and any(e["is_loader"] and _inside(e, t) for e in evs):
                    return "input"
        if any(id(e) in self.proc.compile_ids and _inside(e, t) for e in self.events):
            return "compile"
        if self.drained is not None and t >= self.drained["end_ns"]:
            return "sync"
        if L is not None and t >= (self.enclosing or L)["start_ns"]:
            return "launch"
        if any(_inside(e, t) for e in self.events):
            return "cpu"
        return "unknown"


def _percentile(samples: list[int], method: str) -> int:
    if not samples:
        return 0
    return int(np.percentile(np.array(samples, dtype=np.int64), 10, method=method))  # type: ignore[call-overload]


def _lowest_corr(rows: list[Row]) -> Row | None:
    return min(rows, key=lambda r: (r["correlation"] is None, r["correlation"] or 0), default=None)


def _device(
    key: DeviceKey,
    acts: list[Row],
    proc: _Process,
    comm: list[re.Pattern[str]],
    percentile_method: str,
) -> Device:
    acts = sorted(acts, key=lambda r: (r["start_ns"], r["end_ns"]))
    busy = merge([(r["start_ns"], r["end_ns"]) for r in acts])
    windows = proc.windows or [("activity", acts[0]["start_ns"], max(r["end_ns"] for r in acts))]
    lo = min(min(w[1] for w in windows), acts[0]["start_ns"])
    hi = max(max(w[2] for w in windows), max(r["end_ns"] for r in acts))
    idle = subtract([(lo, hi)], busy)
    dev_corrs = {r["correlation"] for r in acts if r["correlation"] is not None}
    starts: dict[int, list[Row]] = {}
    ends: dict[int, list[Row]] = {}
    for r in acts:
        starts.setdefault(r["start_ns"], []).append(r)
        ends.setdefault(r["end_ns"], []).append(r)
    matched = [(a, b, _lowest_corr(starts.get(b, [])), _lowest_corr(ends.get(a, []))) for a, b in idle]
    first_of_launch: dict[int, int] = {}
    for r in acts:
        if r["correlation"] is not None:
            first_of_launch[r["correlation"]] = min(first_of_launch.get(r["correlation"], r["start_ns"]), r["start_ns"])
    samples = []
    for _, _, nxt, _ in matched:
        launch = proc.calls.get(nxt["correlation"]) if nxt and nxt["correlation"] is not None else None
        if (
            nxt is not None
            and launch is not None
            and nxt["start_ns"] == first_of_launch[nxt["correlation"]]  # a graph's later nodes wait for the earlier
            and 0 <= nxt["start_ns"] - launch["end_ns"] <= LAUNCH_LATENCY_CAP_NS
        ):
            samples.append(nxt["start_ns"] - launch["end_ns"])
    lat = _percentile(samples, percentile_method)
    per_window = [dict.fromkeys(CAUSES, 0) for _ in windows]
    gaps = []
    for a, b, nxt, prev in matched:
        iv = _Interval(a, b, proc, nxt, prev, lat, dev_corrs)
        points = sorted(iv.boundaries() | {w for _, s, e in windows for w in (s, e) if a < w < b})
        causes = dict.fromkeys(CAUSES, 0)
        sync: Row | None = None
        for p, q in zip(points, [*points[1:], b], strict=True):
            c = iv.cause(p)
            causes[c] += q - p
            if c == "sync":
                sync = sync or iv.blocked_in(p) or iv.drained
            for i, (_, ws, we) in enumerate(windows):
                per_window[i][c] += max(0, min(q, we) - max(p, ws))
        kind = "trailing" if nxt is None else "leading" if prev is None else "between"
        gaps.append(Gap(a, b, kind, causes, nxt, iv.launch, sync))
    is_comm = [r["kind"] == "kernel" and any(c.search(r["name"]) for c in comm) for r in acts]
    comm_spans = [(r["start_ns"], r["end_ns"]) for r, c in zip(acts, is_comm, strict=True) if c]
    compute = [(r["start_ns"], r["end_ns"]) for r, c in zip(acts, is_comm, strict=True) if not c]
    exposed = subtract(comm_spans, compute)
    out_windows = tuple(
        Window(
            name,
            s,
            e,
            (e - s) - _length_in(busy, s, e),
            per_window[i],
            _length_in(comm_spans, s, e),
            _length_in(exposed, s, e),
        )
        for i, (name, s, e) in enumerate(windows)
    )
    unlaunched = sum(1 for r in acts if r["correlation"] is None or r["correlation"] not in proc.calls)
    return Device(key, lat, out_windows, tuple(gaps), _warmup(out_windows, proc), len(acts), unlaunched)


def _warmup(windows: tuple[Window, ...], proc: _Process) -> tuple[str, ...]:
    """Spec section 5: the leading windows that hold a compile range or last > 1.5x the median of the
    windows after them; the prefix stops at the first that is neither, at most half the windows."""
    compile_spans = [
        (e["start_ns"], e["end_ns"]) for evs in proc.threads.values() for e in evs if id(e) in proc.compile_ids
    ]
    out: list[str] = []
    for k, w in enumerate(windows[: len(windows) // 2]):
        holds = any(s < w.end_ns and e > w.start_ns for s, e in compile_spans)
        rest = [x.end_ns - x.start_ns for x in windows[k + 1 :]]
        if not (holds or (rest and w.end_ns - w.start_ns > 1.5 * statistics.median(rest))):
            break
        out.append(w.name)
    return tuple(out)


def attribute(
    events: pl.DataFrame,
    *,
    comm_patterns: Sequence[str] = NCCL,
    input_patterns: Sequence[str] = INPUT_PATTERNS,
    percentile_method: str = "lower",
) -> dict[DeviceKey, Device]:
    """Every device of ``events`` (a traceq event table) with its windows, gaps and causes.

    ``comm_patterns`` (regexes searched in kernel names) say which kernels are communication, for
    ``comm_ns``/``exposed_comm_ns``; ``input_patterns`` name the data-loader ranges.
    """
    cols = ["kind", "start_ns", "end_ns", "name", "pid", "tid", "device", "stream", "correlation", "source"]
    rows = events.select(cols).with_columns(pl.col("kind", "name", "source").cast(pl.String)).rows(named=True)
    procs = _processes(rows, input_patterns)
    acts: dict[DeviceKey, list[Row]] = {}
    for r in rows:
        if r["kind"] in ACTIVITY and r["device"] is not None and r["pid"] is not None:
            acts.setdefault((r["source"], r["pid"], r["device"]), []).append(r)
    comm = [re.compile(p) for p in comm_patterns]
    return {
        key: _device(key, rows_, procs.get((key[0], key[1]), _Process()), comm, percentile_method)
        for key, rows_ in sorted(acts.items())
    }
