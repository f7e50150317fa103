"""Time ``traceq diff`` of two cached traces against reporting both, and print a markdown table.

    python bench/bench_diff.py                     # two 1 GB Kineto traces, 3 repeats
    python bench/bench_diff.py --mb 100 --repeats 5
    python bench/bench_diff.py --mb 1 --repeats 1  # what tests/test_bench_smoke.py runs

Issue 15: "diffing two 1 GB traces costs no more than reporting both (cached reports are reused)".
Two traces of ``--mb`` MB are written into ``--work-dir`` (kept for later runs; default
``bench/data/``): ``bench/make_big.py``'s synthetic training job in libkineto's pretty layout as the
*before*, and the same document compacted as the *after* (a different file, the same events: the
diff is as large as it can be for that size).  Both are imported into an empty cache directory
first (untimed), as a user's earlier ``traceq report`` runs would have left them, and one untimed
round runs every measurement once (Python's lazy imports, polars' first plans).  Then, in this
process, ``--repeats`` rounds of every measurement in turn (interleaved, so that other work on the
machine weighs on each alike), the median wall time of each kept:

- ``report before`` and ``report after``: ``traceq.report(path)`` from the cache;
- ``diff``: ``traceq.diff(before, after)`` from the cache (both sides reported, every kernel name
  listed, then compared);
- ``compare``: what the diff adds to the two reports: :func:`traceq.diff.compare.diff_sides` on the
  two sides already reported (decomposition, kernel matching, findings, verdict);
- ``render``: the diff's terminal text, HTML page and JSON.

The claim holds when ``diff`` ÷ (``report before`` + ``report after``) is at most about 1: the
comparison itself (decomposition, kernel matching, findings) is small next to the two reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import make_big  # bench/ is on sys.path (this script's folder)

import traceq
from traceq.cache import Cache
from traceq.diff.compare import diff_sides
from traceq.diff.html import render_diff_html
from traceq.diff.sides import ALL_KERNELS, Side
from traceq.diff.text import render_diff_text

BENCH = Path(__file__).resolve().parent


def traces(work: Path, mb: float) -> tuple[Path, Path]:
    """The before (pretty) and after (compact) traces of about ``mb`` MB, written once."""
    work.mkdir(parents=True, exist_ok=True)
    label = f"{mb:g}MB"
    before, after = work / f"kineto-pretty-{label}.json", work / f"kineto-compact-{label}.json"
    if not before.exists():
        make_big.write_kineto_pretty(before, int(mb * 1_000_000))
    if not after.exists():
        make_big.write_blocks(after, make_big.compact_blocks(before))
    return before, after


def medians_s(works: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Each work's median wall time over ``repeats`` interleaved rounds, after one untimed round."""
    times: dict[str, list[float]] = {name: [] for name in works}
    for round_ in range(repeats + 1):
        for name, work in works.items():
            start = time.perf_counter()
            work()
            if round_:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1000.0, help="size of each trace in MB of JSON (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measurement; the median is kept")
    parser.add_argument("--work-dir", type=Path, default=BENCH / "data", help="where the traces are kept")
    args = parser.parse_args(argv)
    before, after = traces(args.work_dir, args.mb)
    with tempfile.TemporaryDirectory(prefix="traceq-bench-diff-") as tmp:
        cache = Cache(Path(tmp))
        for path in (before, after):
            traceq.load(path, cache=cache)  # the earlier runs' cache entries (untimed)
        holder: dict[str, Any] = {}

        def diff() -> None:
            holder["diff"] = traceq.diff(before, after, cache=cache)

        # the sides as the diff reports them (every kernel name listed), for the comparison alone
        holder["diff_before"] = traceq.report(before, cache=cache, top_kernels=ALL_KERNELS)
        holder["diff_after"] = traceq.report(after, cache=cache, top_kernels=ALL_KERNELS)

        def compare() -> None:
            diff_sides(Side("before", "before", holder["diff_before"]), Side("after", "after", holder["diff_after"]))

        def render() -> None:
            d = holder["diff"]
            render_diff_text(d)
            render_diff_html(d)
            json.dumps(d.to_dict())

        works: dict[str, Callable[[], Any]] = {
            "report before": lambda: traceq.report(before, cache=cache),
            "report after": lambda: traceq.report(after, cache=cache),
            "diff": diff,
            "compare": compare,
            "render": render,
        }
        rows = medians_s(works, args.repeats)
    both = rows["report before"] + rows["report after"]
    sizes = f"{before.stat().st_size / 1e6:,.0f} MB and {after.stat().st_size / 1e6:,.0f} MB"
    print(f"traces: {before.name}, {after.name} ({sizes}); median of {args.repeats} run(s)")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}; Python {sys.version.split()[0]}; traceq {traceq.__version__}; load average {load}")
    print()
    print("| step | wall s |")
    print("|---|--:|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.3f} |")
    print(f"| diff ÷ (report before + report after) | {rows['diff'] / both:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
