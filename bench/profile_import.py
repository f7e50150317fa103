"""Where one core's time goes in a Kineto import: the scanner, polars, the kernel, Python.

    python bench/profile_import.py bench/data/kineto-pretty-1000MB.json [--json]

The import (``traceq.load(path, cache=False)``) runs in this process pinned to one CPU with polars
on one thread, as ``bench/probes.py import-1core`` runs it, and its CPU time (user + system, all
threads, ``getrusage``) is split three ways:

* **scanner** -- the compiled scanner's passes (``time.thread_time`` of each pass, on its thread);
* **Python** -- traceq's own Python code and the interpreter on the main thread (``cProfile`` with
  a per-thread CPU clock: the own time of every function outside polars and pyarrow);
* **polars** -- the rest: polars and pyarrow, on the main thread and polars' pool thread.

Beside the split, the **system** share (page faults of fresh memory, ``madvise`` of released pages,
reads; it falls inside the three above) and the count of minor faults.  cProfile's overhead lands
in the Python share, so the wall time printed is longer than the bench's.  ``bench/run.py`` does
not run this; its output is quoted in ``docs/performance.md`` ("Where one core's time goes").
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import sys
import time
from pathlib import Path
from typing import Any


def profile(path: Path) -> dict[str, Any]:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    os.environ["POLARS_MAX_THREADS"] = "1"
    import traceq
    from traceq.importers.kineto import fast_parser

    scanner_s: list[float] = []
    real_pass = fast_parser._scan_pass

    def timed_pass(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return real_pass(*args, **kwargs)
        finally:
            scanner_s.append(time.thread_time() - started)

    fast_parser._scan_pass = timed_pass  # type: ignore[assignment]
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    profiler = cProfile.Profile(time.thread_time)  # the main thread's CPU, not its wall time
    profiler.enable()
    trace = traceq.load(path, cache=False)
    profiler.disable()
    wall_s = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    user_s, system_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    stats = pstats.Stats(profiler)
    python_s = 0.0
    for (filename, _line, name), (_cc, _nc, own_s, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        in_library = "/polars/" in filename or "/pyarrow/" in filename
        compiled = filename == "~" and ("Py" in name or "pyarrow" in name or "polars" in name)
        if not (in_library or compiled):
            python_s += own_s
    cpu_s = user_s + system_s
    scanner = sum(scanner_s)
    polars_s = max(0.0, cpu_s - scanner - python_s)
    return {
        "file": path.name,
        "rows": trace.events.height,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "minor_faults": after.ru_minflt - before.ru_minflt,
        "shares": {"scanner": scanner / cpu_s, "polars": polars_s / cpu_s, "Python": python_s / cpu_s},
        "system_share": system_s / cpu_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    result = profile(args.trace)
    if args.json:
        print(json.dumps(result))
        return
    head = f"{result['file']}: {result['rows']:,} rows, {result['cpu_s']:.2f} s CPU"
    print(f"{head} ({result['wall_s']:.2f} s wall)")
    for part, share in result["shares"].items():
        print(f"  {part:<8} {share:6.1%}")
    print(f"  of which system time {result['system_share']:.1%}; {result['minor_faults']:,} minor faults")


if __name__ == "__main__":
    sys.exit(main())
