"""Time the interval engine at 1e5, 1e6 and 1e7 intervals and print a markdown table.

    python bench/bench_intervals.py                       # defaults: sizes 1e5 1e6 1e7, 5 repeats
    python bench/bench_intervals.py --sizes 1e6 --repeats 9

Each cell is the median wall time of ``--repeats`` runs (``time.perf_counter``), single-threaded.
Inputs are random: ``n`` starts uniform in ``[0, 1000 n)`` ns with lengths uniform in
``[0, 2000)`` ns, so about 63 % of the span is covered and most intervals overlap a neighbour;
``n`` windows of up to 100 µs are placed the same way.
A plain-Python merge (sort the pairs, sweep) is timed up to ``--python-max`` for the ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from traceq.intervals import (
    Intervals,
    intersect,
    measure,
    measure_in_windows,
    merge,
    merge_by_key,
    subtract,
    union,
)


def random_intervals(rng: np.random.Generator, n: int) -> Intervals:
    start = rng.integers(0, 1000 * n, n, dtype=np.int64)
    return Intervals(start, start + rng.integers(0, 2000, n, dtype=np.int64))


def python_merge(starts: list[int], ends: list[int]) -> list[list[int]]:
    """The obvious pure-Python merge: the baseline the vectorised engine is compared with."""
    merged: list[list[int]] = []
    for s, e in sorted(zip(starts, ends, strict=True)):
        if s == e:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def bench_size(n: int, repeats: int, python_max: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    a, b = random_intervals(rng, n), random_intervals(rng, n)
    by_start = np.argsort(a.start_ns)
    a_sorted = Intervals(a.start_ns[by_start], a.end_ns[by_start])
    a_merged, b_merged = merge(a), merge(b)
    w0 = rng.integers(0, 1000 * n, n, dtype=np.int64)
    windows = Intervals(w0, w0 + rng.integers(0, 100_000, n, dtype=np.int64))
    w_order = np.argsort(windows.start_ns)
    windows_sorted = Intervals(windows.start_ns[w_order], windows.end_ns[w_order])
    keys = rng.integers(0, 8, n, dtype=np.int64)

    cases: dict[str, Callable[[], object]] = {
        "merge (unsorted)": lambda: merge(a),
        "merge (sorted by start)": lambda: merge(a_sorted),
        "measure (unsorted)": lambda: measure(a),
        "union(a, b) (unsorted, 2n)": lambda: union(a, b),
        "intersect (merged inputs)": lambda: intersect(a_merged, b_merged),
        "subtract (merged inputs)": lambda: subtract(a_merged, b_merged),
        "measure_in_windows (n windows, sorted by start)": lambda: measure_in_windows(a_merged, windows_sorted),
        "measure_in_windows (n windows, random order)": lambda: measure_in_windows(a_merged, windows),
        "merge_by_key (8 keys, unsorted)": lambda: merge_by_key(a, keys),
    }
    results = {name: median_seconds(fn, repeats) for name, fn in cases.items()}
    if n <= python_max:
        starts, ends = a.start_ns.tolist(), a.end_ns.tolist()
        reference = python_merge(starts, ends)
        assert reference == np.column_stack((a_merged.start_ns, a_merged.end_ns)).tolist(), "engine disagrees"
        results["plain-Python merge (reference)"] = median_seconds(lambda: python_merge(starts, ends), repeats)
    return results


def format_size(n: int) -> str:
    exponent = len(str(n)) - 1
    return f"1e{exponent}" if n == 10**exponent else f"{n:,}"


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6, 1e7], help="numbers of intervals")
    parser.add_argument("--repeats", type=int, default=5, help="runs per cell; the median is reported")
    parser.add_argument("--python-max", type=float, default=1e6, help="largest size for the plain-Python merge")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    sizes = [int(s) for s in args.sizes]
    columns = {n: bench_size(n, args.repeats, int(args.python_max), args.seed) for n in sizes}
    names = list(dict.fromkeys(name for results in columns.values() for name in results))

    print(
        f"CPU: {cpu_name()} ({os.cpu_count()} cores, single-threaded run); Python {platform.python_version()}, "
        f"numpy {np.__version__}; median of {args.repeats} repeats\n"
    )
    print("| operation | " + " | ".join(f"n = {format_size(n)}" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(format_seconds(columns[n].get(name)) for n in sizes) + " |")
    ratios = [
        f"{columns[n]['plain-Python merge (reference)'] / columns[n]['merge (unsorted)']:.0f}×"
        if "plain-Python merge (reference)" in columns[n]
        else "–"
        for n in sizes
    ]
    print("| plain-Python / merge (unsorted) | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
