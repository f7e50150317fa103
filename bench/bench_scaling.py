"""Time the multi-rank map step and the report of a job, and print a markdown table.

    python bench/bench_scaling.py                                  # import: 8 16 32 64 ranks, both formats
    python bench/bench_scaling.py --ranks 8 16 --formats nsys --steps 48 --layers 32
    python bench/bench_scaling.py --what report --formats nsys     # the report: whole table vs rank by rank

One job of ``max(--ranks)`` ranks is generated (``tracegen``; ``--steps`` steps of
``--layers`` layers cycling through two simulated step templates) into ``--work-dir``, once per
format, and kept there for later runs; a row with R ranks uses the first R files.

Each cell is measured in a fresh Python process, so that its peak RSS is its own.  ``--what
import`` (each file imported by :func:`traceq.loading.load_file` on an executor of
  :mod:`traceq.executors`, the columnar cache off, so every run imports afresh):

- ``jobs=1``: in the driver (executor ``1``);
- ``jobs=2``: a spawned two-process pool (its start-up is inside the timed call);
- ``dask``: a ``LocalCluster`` of 2 single-threaded worker processes, started before the timer.

``--what report`` (each cell with an empty cache directory of its own, as a first report of a job):

- ``whole``: ``traceq.report(traceq.load(files, executor=1))``, the whole table in the driver;
- ``ranks1``: ``traceq.report(files, executor=1)``, rank by rank in the driver;
- ``ranks2``: ``traceq.report(files, executor=2)``, rank by rank on a spawned two-process pool;
- ``ranksdask``: ``traceq.report(files, executor=client)``, rank by rank on a ``LocalCluster`` of 2
  single-threaded worker processes (started before the timer; the workers share the cell's cache).

Wall time is ``time.perf_counter`` around the call; CPU time is user + system time of the driver
and its joined pool workers.  Memory is each process's high-water mark (``VmHWM`` in
``/proc/<pid>/status``, Linux only; unlike ``ru_maxrss`` it is not inherited from the parent
across fork and exec): the driver's own, the largest pool worker's (sampled every 20 ms while
the pool runs; the mark only grows) or the largest Dask worker's (``client.run``).  ``base`` is
the driver's resident size just before the call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# tracegen (the trace generator) is not installed with traceq: generate() imports it from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = ("jobs1", "jobs2", "dask")
REPORT_MODES = ("whole", "ranks1", "ranks2", "ranksdask")
SUFFIX = {"kineto": ".pt.trace.json.gz", "nsys": ".nsys.sqlite"}


def status_mb(field: str, pid: int | str = "self") -> float:
    """``VmHWM`` (peak) or ``VmRSS`` (now) of a process, in MiB; 0 when it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_mb() -> float:
    return status_mb("VmHWM")


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = {int(k) for k in children.read_text().split()}
        except OSError:
            continue
        for kid in kids:
            found |= {kid, *descendants(kid)}
    return found


class ChildPeaks:
    """Samples the high-water mark of every descendant process while it lives."""

    def __init__(self) -> None:
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ChildPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.02):
            for pid in descendants(me):
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), status_mb("VmHWM", pid))

    def largest(self) -> float:
        return max(self.peaks.values(), default=0.0)


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def generate(work_dir: Path, fmt: str, ranks: int, steps: int, layers: int) -> list[Path]:
    """The job's per-rank files, written unless a previous run left the same job there."""
    from tracegen import Scenario, build_timeline, write_kineto_json, write_nsys_sqlite

    folder = work_dir / f"{fmt}-r{ranks}-s{steps}-l{layers}"
    files = [folder / f"rank{r}{SUFFIX[fmt]}" for r in range(ranks)]
    done = folder / "complete"
    if done.exists():
        return files
    t0 = time.perf_counter()
    timeline = build_timeline(
        Scenario("scaling", ranks=ranks, world_size=ranks, steps=steps, layers=layers, distinct_steps=2)
    )
    for rank, path in enumerate(files):
        if fmt == "kineto":
            write_kineto_json(timeline, path, rank=rank)
        else:
            write_nsys_sqlite(timeline, path, ranks=(rank,), vacuum=False)
    done.write_text("")
    print(f"generated {ranks} {fmt} ranks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return files


def import_each(files: list[Path], executor: Any) -> list[Any]:
    """Each file imported afresh (no cache) by the loader's own task, on ``executor``."""
    from traceq import loading
    from traceq.executors import open_executor

    with open_executor(executor, files) as tasks:
        return tasks.map(loading._load_task, [(f, (None, False)) for f in files])


def measure(mode: str, files: list[Path]) -> dict[str, Any]:
    """One cell, in this (fresh) process."""
    load_before = os.getloadavg()[0]
    if mode == "dask":
        import dask
        from distributed import Client, LocalCluster

        # The workers' sampling profiler keeps finished frames alive, which can pin a buffer the
        # Kineto fast path resizes (see docs/scaling.md); it is off here as in the tests.
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            t0 = time.perf_counter()
            with (
                LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
                Client(cluster, set_as_default=False) as client,
            ):
                started = time.perf_counter() - t0
                idle_workers = max(client.run(peak_mb).values())
                base = status_mb("VmRSS")
                t0 = time.perf_counter()
                traces = import_each(files, client)
                wall = time.perf_counter() - t0
                worker = max(client.run(peak_mb).values())
        extra = {"cluster_start_s": started, "worker_base_mb": idle_workers}
    else:
        base = status_mb("VmRSS")
        cpu0 = cpu_s()
        t0 = time.perf_counter()
        with ChildPeaks() as children:
            traces = import_each(files, 1 if mode == "jobs1" else 2)
        wall = time.perf_counter() - t0
        worker = children.largest()
        extra = {"cpu_s": cpu_s() - cpu0}
    return {
        "wall_s": wall,
        "driver_peak_mb": peak_mb(),
        "driver_base_mb": base,
        "worker_peak_mb": worker,
        "table_mb": sum(t.events.estimated_size() for t in traces) / 1e6,
        "rows": sum(t.events.height for t in traces),
        "loadavg_before": load_before,
        **extra,
    }


def measure_report(mode: str, files: list[Path]) -> dict[str, Any]:
    """One report cell, in this (fresh) process, with a fresh cache directory."""
    import tempfile

    import traceq
    from traceq.cache import Cache

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="traceq-bench-cache-") as folder:
        cache = Cache(folder)
        if mode == "ranksdask":
            import dask
            from distributed import Client, LocalCluster

            # The workers' sampling profiler can pin a buffer the Kineto fast path resizes (docs/scaling.md).
            with (
                dask.config.set({"distributed.worker.profile.enabled": False}),
                LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
                Client(cluster, set_as_default=False) as client,
            ):
                base = status_mb("VmRSS")
                cpu0 = cpu_s()
                t0 = time.perf_counter()
                report = traceq.report(files, executor=client, cache=cache)
                wall = time.perf_counter() - t0
                worker = max(client.run(peak_mb).values())
            table_mb = 0.0
        else:
            base = status_mb("VmRSS")
            cpu0 = cpu_s()
            t0 = time.perf_counter()
            with ChildPeaks() as children:
                if mode == "whole":
                    trace = traceq.load(files, executor=1, cache=cache)
                    report = traceq.report(trace)
                    table_mb = trace.events.estimated_size() / 1e6
                    del trace
                else:
                    report = traceq.report(files, executor=1 if mode == "ranks1" else 2, cache=cache)
                    table_mb = 0.0
            wall = time.perf_counter() - t0
            worker = children.largest()
    job = report.job
    return {
        "wall_s": wall,
        "cpu_s": cpu_s() - cpu0,  # the driver and its pool; not the Dask workers
        "driver_peak_mb": peak_mb(),
        "driver_base_mb": base,
        "worker_peak_mb": worker,
        "table_mb": table_mb,
        "verdict": None if job is None else job.verdict,
        "findings": [f.id for f in report.findings],
        "loadavg_before": load_before,
    }


def report_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| format | ranks | on disk (GB) | table (GB) | wall s: whole table / by rank jobs=1 / jobs=2 / dask "
        "| driver peak MB: whole / by rank jobs=1 / jobs=2 / dask (base) | worker peak MB: jobs=2 / dask "
        "| load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [r["cells"][m] for m in REPORT_MODES]
        whole, _, two, dsk = cells
        loads = [c["loadavg_before"] for c in cells]
        walls = " / ".join(f"{c['wall_s']:.1f}" for c in cells)
        peaks = " / ".join(f"{c['driver_peak_mb']:.0f}" for c in cells)
        lines.append(
            f"| {r['format']} | {r['ranks']} | {r['disk_bytes'] / 1e9:.3f} | {whole['table_mb'] / 1e3:.3f} "
            f"| {walls} | {peaks} ({whole['driver_base_mb']:.0f}) "
            f"| {two['worker_peak_mb']:.0f} / {dsk['worker_peak_mb']:.0f} | {min(loads):.1f}-{max(loads):.1f} |"
        )
    return "\n".join(lines)


def idle_worker_mb() -> float:
    """Peak RSS of a process that only imported traceq: the floor of every pool worker."""
    code = "import re, traceq.loading; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return int(out) / 1024


def run_cell(mode: str, files: list[Path]) -> dict[str, Any]:
    listing = json.dumps([str(f) for f in files])
    out = subprocess.run(
        [sys.executable, __file__, "--measure-report" if mode in REPORT_MODES else "--measure", mode],
        input=listing,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"measuring {mode} on {len(files)} files failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| format | ranks | on disk (GB) | tables (GB) | jobs=1: wall (CPU) s | jobs=2: wall (CPU) s "
        "| LocalCluster s | speed-up jobs=2 / dask | driver peak MB: jobs=1 / 2 / dask (base) "
        "| worker peak MB: jobs=2 / dask | load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        one, two, dsk = (r["cells"][m] for m in MODES)
        loads = [c["loadavg_before"] for c in (one, two, dsk)]
        lines.append(
            f"| {r['format']} | {r['ranks']} | {r['disk_bytes'] / 1e9:.3f} | {one['table_mb'] / 1e3:.3f} "
            f"| {one['wall_s']:.1f} ({one['cpu_s']:.0f}) | {two['wall_s']:.1f} ({two['cpu_s']:.0f}) "
            f"| {dsk['wall_s']:.1f} | {one['wall_s'] / two['wall_s']:.2f}x / {one['wall_s'] / dsk['wall_s']:.2f}x "
            f"| {one['driver_peak_mb']:.0f} / {two['driver_peak_mb']:.0f} / {dsk['driver_peak_mb']:.0f} "
            f"({one['driver_base_mb']:.0f}) "
            f"| {two['worker_peak_mb']:.0f} / {dsk['worker_peak_mb']:.0f} "
            f"| {min(loads):.1f}-{max(loads):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--formats", nargs="+", choices=sorted(SUFFIX), default=["kineto", "nsys"])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--what", choices=("import", "report"), default="import")
    parser.add_argument("--modes", nargs="+", choices=MODES + REPORT_MODES, help="default: every mode of --what")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/traceq-bench-scaling"))
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument("--measure", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--measure-report", choices=REPORT_MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure or args.measure_report:
        files = [Path(p) for p in json.loads(sys.stdin.read())]
        cell = measure(args.measure, files) if args.measure else measure_report(args.measure_report, files)
        print(json.dumps(cell))
        return
    every = REPORT_MODES if args.what == "report" else MODES
    args.modes = args.modes or list(every)

    rows = []
    for fmt in args.formats:
        job = generate(args.work_dir, fmt, max(args.ranks), args.steps, args.layers)
        for ranks in sorted(args.ranks):
            files = job[:ranks]
            cells = {}
            for mode in args.modes:
                cells[mode] = run_cell(mode, files)
                print(f"{fmt} {ranks} {mode}: {json.dumps(cells[mode])}", file=sys.stderr)
            rows.append(
                {"format": fmt, "ranks": ranks, "disk_bytes": sum(f.stat().st_size for f in files), "cells": cells}
            )
    print(
        f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.steps} steps x {args.layers} layers per rank; idle worker {idle_worker_mb():.0f} MB\n"
    )
    if set(args.modes) == set(MODES):
        print(table(rows))
    elif set(args.modes) == set(REPORT_MODES):
        print(report_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
