"""What ``bench/run.py`` measures, one probe per fresh child process.

    python bench/probes.py PROBE TRACE [--cache-dir DIR] [--hta-dir DIR]

Each probe does one thing to one trace and prints one JSON line on stdout: ``wall_s``
(``time.perf_counter`` around the work only, not the interpreter's start or imports) and
``cpu_s`` (user + system CPU of the process, all threads, over the same span), plus what it
counted.  Peak RSS is not measured here: the parent reads it from ``os.wait4`` of this process.

Probes (the traceq ones run in traceq's environment; ``hta`` and ``pandas`` in bench/.venv-hta):

* ``idle``    -- import traceq and do nothing: the baseline RSS of an interpreter with traceq;
* ``machine`` -- how fast this machine is now (TRACE is not read): the cost of a fresh page of
  memory and SHA-256's MB/s, printed with a run's tables so that runs of different days compare;
* ``import``  -- ``traceq.load(TRACE, cache=False)``: rows, the GPU activity and API rows, and the
  size of the imported columns (polars' ``estimated_size``);
* ``import-1core`` -- the same, pinned to one CPU with polars on one thread;
* ``store``   -- ``traceq.load(TRACE, cache=Cache(DIR, write_behind=True))`` on an empty cache, as the
  CLI's first run: until the trace is returned, and (``written_s``) until its entry is written;
* ``cached``  -- the same on the filled cache; fails unless it was served without importing;
* ``report``  -- a cached load (not timed), then ``traceq.report`` (analysis, findings, timeline)
  and rendering it as HTML and JSON, timed apart;
* ``hta``     -- HTA's ``TraceAnalysis(trace_dir=DIR)`` on a folder that holds only TRACE;
* ``pandas``  -- ``json.load`` and ``pandas.DataFrame(traceEvents)``: the plain baseline.

Only the standard library is imported at module level, so the file runs in either environment.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    cpu, wall = _cpu_s(), time.perf_counter()
    counted = work()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": _cpu_s() - cpu, **counted}


def _rows(trace: Any) -> dict[str, Any]:
    counts = trace.kind_counts()
    return {
        "rows": int(trace.events.height),
        "activity_rows": int(counts["kernel"] + counts["memcpy"] + counts["memset"] + counts["cuda_api"]),
        "warnings": len(trace.meta.warnings),
        "table_bytes": int(trace.events.estimated_size()),
    }


def probe_idle(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    import traceq  # noqa: F401

    return _timed(dict)


CALIBRATION_BYTES = 256 << 20
"""Fresh memory written by each of the ``machine`` probe's three tries (64 k pages of 4 KiB)."""


def probe_machine(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``fresh_page_us``: the median of three tries of the time per page to first write fresh
    anonymous memory (the kernel's fault and zeroing, paid for every page an import or a report
    allocates; on a VM it moves with the host from hour to hour); ``sha256_mb_s``: the best of
    three SHA-256 passes over 64 MiB already written (the CPU alone)."""
    import ctypes
    import hashlib
    import mmap
    import statistics

    def measure() -> dict[str, Any]:
        pages = CALIBRATION_BYTES // mmap.PAGESIZE
        tries: list[float] = []
        for _ in range(3):
            with mmap.mmap(-1, CALIBRATION_BYTES) as memory:
                view = (ctypes.c_char * CALIBRATION_BYTES).from_buffer(memory)
                start = time.perf_counter()
                ctypes.memset(view, 1, CALIBRATION_BYTES)
                tries.append((time.perf_counter() - start) / pages * 1e6)
                del view  # (the mapping cannot close while a view of it is alive)
        data = bytes(range(256)) * (64 << 12)
        hashed: list[float] = []
        for _ in range(3):
            start = time.perf_counter()
            hashlib.sha256(data).digest()
            hashed.append(len(data) / 1e6 / (time.perf_counter() - start))
        return {"fresh_page_us": round(statistics.median(tries), 2), "sha256_mb_s": round(max(hashed))}

    return _timed(measure)


def probe_import(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    import traceq

    return _timed(lambda: _rows(traceq.load(trace, cache=False)))


def probe_import_one_core(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``import`` held to one core: this process pinned to one CPU and polars to one thread (set
    before polars is imported), so the scanner's helper thread and polars share that core."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    os.environ["POLARS_MAX_THREADS"] = "1"
    return probe_import(trace, args)


def probe_store(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A first default run's load: into an empty cache that writes behind, as the CLI's does.
    ``wall_s`` is until the trace is returned (the report starts); ``written_s`` until its entry
    is written too (the CLI writes it after its output)."""
    import traceq
    from traceq.cache import Cache

    store = Cache(args.cache_dir, write_behind=True)
    cpu, wall = _cpu_s(), time.perf_counter()
    loaded = _timed(lambda: _rows(traceq.load(trace, cache=store)))
    store.wait()
    return {**loaded, "written_s": time.perf_counter() - wall, "written_cpu_s": _cpu_s() - cpu}


def probe_cached(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    import traceq
    import traceq.loading
    from traceq.cache import Cache

    imported: list[Path] = []
    namespace = vars(traceq.loading)
    real = namespace["read_file"]

    def counting(path: Path, fmt: Any = None) -> Any:
        imported.append(path)
        return real(path, fmt)

    namespace["read_file"] = counting  # so that an import behind the cache's back shows
    result = _timed(lambda: _rows(traceq.load(trace, cache=Cache(args.cache_dir))))
    if imported:
        raise SystemExit(
            f"{trace}: the cached load imported the source again: no valid entry "
            "(was traceq's code edited during the run? an edit invalidates the cache)"
        )
    entries = sorted(Path(args.cache_dir).glob("*.parquet"))
    return {**result, "entry_bytes": sum(p.stat().st_size for p in entries)}


def probe_report(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    import traceq
    from traceq.cache import Cache
    from traceq.report.render import renderer_for

    loaded = traceq.load(trace, cache=Cache(args.cache_dir))
    holder: dict[str, Any] = {}

    def analyse() -> dict[str, Any]:
        holder["report"] = traceq.report(loaded)
        return {"findings": len(holder["report"].findings)}

    def render() -> dict[str, Any]:
        html = renderer_for(Path("r.html")).render(holder["report"])
        text = renderer_for(Path("r.json")).render(holder["report"])
        return {"html_bytes": len(html), "json_bytes": len(text)}

    analysed = _timed(analyse)
    rendered = _timed(render)
    return {**analysed, "render_s": rendered["wall_s"], "render_cpu_s": rendered["cpu_s"], **_rows(loaded)}


def probe_hta(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    import logging

    hta: Any = importlib.import_module("hta.trace_analysis")
    logging.disable(logging.INFO)

    def load() -> dict[str, Any]:
        analysis = hta.TraceAnalysis(trace_dir=str(args.hta_dir))
        frames = [analysis.t.get_trace(rank) for rank in analysis.t.get_ranks()]
        return {"rows": int(sum(len(f) for f in frames))}

    return _timed(load)


def probe_pandas(trace: Path, args: argparse.Namespace) -> dict[str, Any]:
    pd: Any = importlib.import_module("pandas")

    def load() -> dict[str, Any]:
        opener = gzip.open if trace.name.endswith(".gz") else open
        with opener(trace, "rb") as fh:
            document = json.load(fh)
        frame = pd.DataFrame(document["traceEvents"])
        return {"rows": len(frame)}

    return _timed(load)


PROBES: dict[str, Callable[[Path, argparse.Namespace], dict[str, Any]]] = {
    "idle": probe_idle,
    "machine": probe_machine,
    "import": probe_import,
    "import-1core": probe_import_one_core,
    "store": probe_store,
    "cached": probe_cached,
    "report": probe_report,
    "hta": probe_hta,
    "pandas": probe_pandas,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run one benchmark probe and print its JSON line.")
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("trace", type=Path)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--hta-dir", type=Path)
    args = parser.parse_args(argv)
    result = PROBES[args.probe](args.trace, args)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
