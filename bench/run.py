"""The benchmark suite: traceq's import, cached re-open and report on large traces, next to HTA.

    python bench/run.py --quick                  # ~20-70 MB files; minutes on 2 cores
    python bench/run.py --full --write-docs      # 100 MB .. 2 GB and 20 M nsys rows; the published table
    python bench/run.py --preset smoke --no-hta  # what tests/test_bench_smoke.py runs

Steps: (0) traceq's modules are byte-compiled, as ``pip install`` leaves them (where
``PYTHONDONTWRITEBYTECODE`` is set, every timed import would otherwise compile the importer's
modules, which are imported on first use, from source: 20-30 ms); (1) ``bench/make_big.py``
writes the preset's traces into ``--data`` (default ``bench/data/``, git-ignored; files already
there are reused); (2) HTA 0.5.0 is installed into ``bench/.venv-hta`` (never into traceq's
environment) unless ``--no-hta``; (3) every file is read once so that all tools start from the
page cache; (4) each probe of ``bench/probes.py`` runs ``--repeat`` times in a fresh child
process, and the median wall time is kept; (5) before the first file and after the last, its
``machine`` probe measures the machine's speed (a fresh page's cost, SHA-256's MB/s), printed
with the tables: on a VM both move from hour to hour, and runs of different days compare only
beside them.  Per file:

* import (``traceq.load(..., cache=False)``): wall and CPU s, MB/s of uncompressed JSON, rows/s,
  peak RSS (``os.wait4`` of the child: its ``ru_maxrss``);
* import + store into an empty cache, then the cached re-open;
* the full report (analysis, findings, timeline) and its HTML + JSON rendering;
* for Kineto files, HTA's ``TraceAnalysis`` load of a folder holding only that file, and a
  plain ``json.load`` + ``pandas.DataFrame`` baseline.

The results print as markdown tables and are saved as ``<data>/results-<preset>.json``;
``--write-docs`` also puts them into ``docs/performance.md``, between its ``bench:begin`` and
``bench:end`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import make_big  # bench/ is on sys.path (this script's folder); it imports tracegen only to generate
from make_big import DataFile

BENCH: Final = Path(__file__).resolve().parent
REPO: Final = BENCH.parent
PROBES: Final = BENCH / "probes.py"
HTA_VENV: Final = BENCH / ".venv-hta"
HTA_REQUIREMENT: Final = "HolisticTraceAnalysis==0.5.0"
DOCS: Final = REPO / "docs" / "performance.md"
BEGIN: Final = "<!-- bench:begin (written by bench/run.py --write-docs) -->"
END: Final = "<!-- bench:end -->"
MB: Final = 1_000_000
MIB: Final = 1 << 20


@dataclass
class Measured:
    """One probe's outcome: the median of its runs, or why there is none."""

    wall_s: float | None = None
    cpu_s: float | None = None
    peak_rss_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> Measured:
        return cls(saved["wall_s"], saved["cpu_s"], saved["peak_rss_bytes"], saved["extra"], saved["error"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "peak_rss_bytes": self.peak_rss_bytes,
            "extra": self.extra,
            "error": self.error,
        }


@dataclass
class FileResult:
    """Every probe of one trace file."""

    name: str
    family: str
    layout: str
    origin: str
    bytes: int
    json_bytes: int | None
    probes: dict[str, Measured] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> FileResult:
        probes = {k: Measured.from_dict(v) for k, v in saved["probes"].items()}
        fields = ("name", "family", "layout", "origin", "bytes", "json_bytes")
        return cls(*(saved[f] for f in fields), probes=probes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "layout": self.layout,
            "origin": self.origin,
            "bytes": self.bytes,
            "json_bytes": self.json_bytes,
            "probes": {k: v.to_dict() for k, v in self.probes.items()},
        }


# --------------------------------------------------------------------------------------------
# running a probe in a child process


def run_child(argv: Sequence[str], timeout_s: float) -> Measured:
    """Run ``argv`` (a probe) and return its JSON line with the child's peak RSS from ``wait4``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        env = {**os.environ, "PYTHONHASHSEED": "0", "CI": "1"}  # CI: no progress line
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=REPO, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -signal.SIGKILL
                return Measured(peak_rss_bytes=usage.ru_maxrss * 1024, error=f"timed out after {timeout_s:.0f} s")
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        peak = usage.ru_maxrss * 1024  # kilobytes on Linux
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace").strip()
        stderr = err.read().decode(errors="replace").strip()
    if proc.returncode != 0 or not stdout:
        last = stderr.splitlines()[-1] if stderr else f"exit {proc.returncode}"
        if proc.returncode == -signal.SIGKILL:
            last = "killed (out of memory?)"
        return Measured(peak_rss_bytes=peak, error=last[:200])
    data = json.loads(stdout.splitlines()[-1])
    wall, cpu = data.pop("wall_s"), data.pop("cpu_s")
    return Measured(wall_s=float(wall), cpu_s=float(cpu), peak_rss_bytes=peak, extra=data)


def median_of(runs: list[Measured]) -> Measured:
    """The run with the median wall time (all runs must have succeeded, else the first failure)."""
    failed = [r for r in runs if r.error is not None]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r.wall_s or 0.0)
    middle = ordered[(len(ordered) - 1) // 2]
    middle.peak_rss_bytes = max(r.peak_rss_bytes or 0 for r in runs)
    middle.extra["runs_wall_s"] = [round(r.wall_s or 0.0, 3) for r in runs]
    return middle


def probe(python: str, name: str, trace: Path, *, repeat: int, timeout_s: float, **options: Path) -> Measured:
    argv = [python, str(PROBES), name, str(trace)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return median_of([run_child(argv, timeout_s) for _ in range(repeat)])


# --------------------------------------------------------------------------------------------
# HTA in its own environment


def ensure_hta(log: Path) -> str | None:
    """The python of bench/.venv-hta with HTA 0.5.0 installed (installing it if needed), or None."""
    python = HTA_VENV / "bin" / "python"
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"]
    if python.exists():
        done = subprocess.run(check, capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == HTA_REQUIREMENT.split("==")[1]:
            return str(python)
    print(f"installing {HTA_REQUIREMENT} into {HTA_VENV} (log: {log}) ...", file=sys.stderr, flush=True)
    base = getattr(sys, "_base_executable", sys.executable)
    with log.open("w") as out:
        steps = [
            [base, "-m", "venv", "--clear", str(HTA_VENV)],
            [str(python), "-m", "pip", "install", "--quiet", HTA_REQUIREMENT],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                print(f"HTA could not be installed; see {log}. Continuing without it.", file=sys.stderr)
                return None
    return str(python)


def hta_folder(work: Path, trace: Path) -> Path:
    """A folder holding only ``trace`` (a symbolic link): HTA loads every trace in a folder."""
    folder = work / "hta" / trace.name.replace(".", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / trace.name).symlink_to(trace.resolve())
    return folder


# --------------------------------------------------------------------------------------------
# the run


def warm_page_cache(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(16 * MIB):
            pass


def bench_file(
    record: DataFile,
    data: Path,
    *,
    hta_python: str | None,
    hta_max_mb: float,
    pandas_max_mb: float,
    repeat: int,
    timeout_s: float,
) -> FileResult:
    path = data / record.name
    result = FileResult(record.name, record.family, record.layout, record.origin, record.bytes, record.json_bytes)
    python = sys.executable
    warm_page_cache(path)
    cache_dir = data / "cache" / path.name.replace(".", "_")

    def step(label: str, measured: Measured) -> None:
        result.probes[label] = measured
        shown = f"{measured.wall_s:.2f} s" if measured.wall_s is not None else measured.error
        print(f"  {label:<7} {shown}", file=sys.stderr, flush=True)

    print(f"{record.name} ({record.bytes / MB:,.1f} MB)", file=sys.stderr, flush=True)
    step("import", probe(python, "import", path, repeat=repeat, timeout_s=timeout_s))
    step("1 core", probe(python, "import-1core", path, repeat=repeat, timeout_s=timeout_s))
    stores = []
    for _ in range(repeat):
        shutil.rmtree(cache_dir, ignore_errors=True)
        stores.append(probe(python, "store", path, repeat=1, timeout_s=timeout_s, cache_dir=cache_dir))
    step("store", median_of(stores))
    step("cached", probe(python, "cached", path, repeat=repeat, timeout_s=timeout_s, cache_dir=cache_dir))
    step("report", probe(python, "report", path, repeat=repeat, timeout_s=timeout_s, cache_dir=cache_dir))
    shutil.rmtree(cache_dir, ignore_errors=True)
    if record.family == "kineto" and hta_python is not None and (record.json_bytes or record.bytes) <= hta_max_mb * MB:
        folder = hta_folder(data, path)
        step("hta", probe(hta_python, "hta", path, repeat=repeat, timeout_s=timeout_s, hta_dir=folder))
        shutil.rmtree(folder, ignore_errors=True)
        if (record.json_bytes or record.bytes) <= pandas_max_mb * MB:
            step("pandas", probe(hta_python, "pandas", path, repeat=repeat, timeout_s=timeout_s))
    return result


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = platform.processor() or platform.machine()
    memory = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    versions: dict[str, str] = {}
    import importlib.metadata

    for package in ("traceq", "polars", "pyarrow"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "absent"
    revision = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout.strip()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_bytes": memory,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions,
        "revision": revision or "unknown",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def machine_speed() -> dict[str, Any]:
    """The ``machine`` probe's figures (a fresh page's cost, SHA-256's MB/s), from a child process:
    its 256 MiB of fresh memory must not raise the peak RSS that later children start from."""
    measured = probe(sys.executable, "machine", PROBES, repeat=1, timeout_s=120)
    if measured.error is not None:
        raise SystemExit(f"the machine probe failed: {measured.error}")
    return {k: measured.extra[k] for k in ("fresh_page_us", "sha256_mb_s")}


def speed_line(info: dict[str, Any]) -> str:
    """The header's sentence on how fast the machine was at the run's start and end (empty for a
    results file saved before runs measured it)."""
    speed = info.get("speed", {})
    if "start" not in speed or "end" not in speed:
        return ""
    start, end = speed["start"], speed["end"]
    return (
        f" Its speed at the start and the end of the run (`bench/probes.py machine`): a fresh 4 KiB page "
        f"{start['fresh_page_us']:.2f} and {end['fresh_page_us']:.2f} µs, SHA-256 "
        f"{start['sha256_mb_s']:,} and {end['sha256_mb_s']:,} MB/s."
    )


# --------------------------------------------------------------------------------------------
# tables


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / MIB:,.0f}"


def _speed(size: int | None, measured: Measured | None) -> float | None:
    if size is None or measured is None or not measured.wall_s:
        return None
    return size / MB / measured.wall_s


def _cell(measured: Measured | None, digits: int = 2) -> str:
    if measured is None:
        return "–"
    if measured.error is not None:
        return f"failed: {measured.error}"[:60]
    return _num(measured.wall_s, digits)


def kineto_table(results: Sequence[FileResult], idle_rss: int | None) -> str:
    header = (
        "| file | layout | MB on disk | MB of JSON | rows | import s | CPU s | MB/s | MB/s on 1 core | rows/s "
        "| peak RSS MiB | RSS ÷ JSON | (RSS − idle) ÷ JSON | cached open s | report s | HTA s | HTA peak MiB "
        "| × faster than HTA | pandas s |\n"
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    )
    rows = []
    for r in results:
        if r.family != "kineto":
            continue
        imp, hta = r.probes.get("import"), r.probes.get("hta")
        json_bytes = r.json_bytes or r.bytes
        ratio = hta.wall_s / imp.wall_s if hta and imp and hta.wall_s and imp.wall_s else None
        n_rows = imp.extra.get("rows") if imp else None
        rss = imp.peak_rss_bytes if imp else None
        over = (rss - idle_rss) / json_bytes if rss and idle_rss else None
        rows.append(
            f"| {r.name} | {r.layout} | {r.bytes / MB:,.0f} | {json_bytes / MB:,.0f} | "
            f"{'–' if n_rows is None else f'{n_rows:,}'} | {_cell(imp)} | {_num(imp.cpu_s if imp else None)} | "
            f"{_num(_speed(json_bytes, imp), 0)} | {_num(_speed(json_bytes, r.probes.get('1 core')), 0)} | "
            f"{_rate(n_rows, imp)} | {_mb(rss)} | "
            f"{_num(rss / json_bytes if rss else None, 1)} | {_num(over, 1)} | {_cell(r.probes.get('cached'), 3)} | "
            f"{_cell(r.probes.get('report'))} | {_cell(hta)} | {_mb(hta.peak_rss_bytes if hta else None)} | "
            f"{_num(ratio, 1)} | {_cell(r.probes.get('pandas'))} |"
        )
    return header + "\n".join(rows) + "\n" if rows else ""


def _rate(count: int | None, measured: Measured | None) -> str:
    if count is None or measured is None or not measured.wall_s:
        return "–"
    return f"{count / measured.wall_s:,.0f}"


def nsys_table(results: Sequence[FileResult], idle_rss: int | None) -> str:
    header = (
        "| file | MB | rows | activity rows | import s | CPU s | activity rows/s | rows/s on 1 core | table MiB "
        "| peak RSS MiB | RSS ÷ table | (RSS − idle) ÷ table | cached open s | report s | render s |\n"
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    )
    rows = []
    for r in results:
        if r.family != "nsys":
            continue
        imp, rep = r.probes.get("import"), r.probes.get("report")
        n_rows = imp.extra.get("rows") if imp else None
        activity = imp.extra.get("activity_rows") if imp else None
        render = rep.extra.get("render_s") if rep and rep.error is None else None
        table = imp.extra.get("table_bytes") if imp else None
        rss = imp.peak_rss_bytes if imp else None
        over = (rss - idle_rss) / table if rss and idle_rss and table else None
        rows.append(
            f"| {r.name} | {r.bytes / MB:,.0f} | {'–' if n_rows is None else f'{n_rows:,}'} | "
            f"{'–' if activity is None else f'{activity:,}'} | {_cell(imp)} | {_num(imp.cpu_s if imp else None)} | "
            f"{_rate(activity, imp)} | {_rate(activity, r.probes.get('1 core'))} | {_mb(table)} | {_mb(rss)} | "
            f"{_num(rss / table if rss and table else None)} | "
            f"{_num(over)} | {_cell(r.probes.get('cached'), 3)} | {_cell(rep)} | {_num(render)} |"
        )
    return header + "\n".join(rows) + "\n" if rows else ""


def cache_table(results: Sequence[FileResult]) -> str:
    header = (
        "| file | MB | import s | first run: load s | first run ÷ import | entry written after s "
        "| cached open s | cached open CPU s | entry MB | open ÷ import |\n"
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    )
    rows = []
    for r in results:
        imp, store, cached = r.probes.get("import"), r.probes.get("store"), r.probes.get("cached")
        entry = cached.extra.get("entry_bytes") if cached and cached.error is None else None
        share = cached.wall_s / imp.wall_s if cached and imp and cached.wall_s and imp.wall_s else None
        first = store.wall_s / imp.wall_s if store and imp and store.wall_s and imp.wall_s else None
        written = store.extra.get("written_s") if store and store.error is None else None
        rows.append(
            f"| {r.name} | {r.bytes / MB:,.0f} | {_cell(imp)} | {_cell(store)} | {_num(first)} | {_num(written)} | "
            f"{_cell(cached, 3)} | {_num(cached.cpu_s if cached else None, 3)} | "
            f"{_num(entry / MB if entry else None, 1)} | {_num(share, 3)} |"
        )
    return header + "\n".join(rows) + "\n"


def _find(results: Sequence[FileResult], name: str) -> FileResult | None:
    return next((r for r in results if r.name == name), None)


def _wall(result: FileResult | None, probe_name: str) -> float | None:
    measured = result.probes.get(probe_name) if result else None
    return measured.wall_s if measured is not None and measured.error is None else None


def goals_table(results: Sequence[FileResult]) -> str:
    """Issue 18's goals, each against what this run measured ("–" where the run lacks the file)."""
    rows: list[tuple[str, str, float | None, bool | None]] = []

    def mb_per_s(r: FileResult | None, probe_name: str) -> float | None:
        wall = _wall(r, probe_name)
        return (r.json_bytes or r.bytes) / MB / wall if r and wall else None

    def goal(what: str, target: str, value: float | None, met: Callable[[float], bool]) -> None:
        rows.append((what, target, value, None if value is None else met(value)))

    gig = _find(results, "kineto-pretty-1000MB.json")
    goal("Kineto import, 1 GB, two cores (MB/s)", "≥ 400", mb_per_s(gig, "import"), lambda v: v >= 400)
    big = [r for r in results if r.family == "kineto" and r.origin == "synthetic" and (r.json_bytes or 0) >= 100 * MB]
    one_core = [v for r in big if (v := mb_per_s(r, "1 core")) is not None]
    goal(
        "Kineto import, one core, slowest file ≥ 100 MB (MB/s)",
        "≥ 250",
        min(one_core, default=None),
        lambda v: v >= 250,
    )
    ratios = [
        m.peak_rss_bytes / (r.json_bytes or r.bytes)
        for r in results
        if r.family == "kineto" and (r.json_bytes or 0) >= 1000 * MB
        for m in [r.probes.get("import")]
        if m is not None and m.peak_rss_bytes
    ]
    goal("Kineto peak RSS at ≥ 1 GB, worst (× the JSON)", "≤ 0.5", max(ratios, default=None), lambda v: v <= 0.5)
    packed = _find(results, "kineto-pretty-4000MB.json.gz")
    goal("4 GB .json.gz import (s)", "≤ 12", _wall(packed, "import"), lambda v: v <= 12)
    packed_rss = packed.probes["import"].peak_rss_bytes if packed and "import" in packed.probes else None
    goal("4 GB .json.gz peak RSS (GB)", "≤ 2", packed_rss / 1e9 if packed_rss else None, lambda v: v <= 2)
    rocm, cuda = mb_per_s(_find(results, "kineto-rocm-1000MB.json"), "import"), mb_per_s(gig, "import")
    goal("ROCm 1 GB MB/s ÷ CUDA 1 GB MB/s", "≥ 0.95", rocm / cuda if rocm and cuda else None, lambda v: v >= 0.95)
    nsys = _find(results, "nsys-20Mrows.sqlite")
    nsys_imp = nsys.probes.get("import") if nsys else None
    activity = nsys_imp.extra.get("activity_rows") if nsys_imp else None
    wall = _wall(nsys, "import")
    goal(
        "nsys import, 20 M rows (M rows/s)",
        "≥ 2.5",
        activity / wall / 1e6 if activity and wall else None,
        lambda v: v >= 2.5,
    )
    goal("full report, 10 M GPU + 10 M API events (s)", "≤ 4", _wall(nsys, "report"), lambda v: v <= 4)
    report = nsys.probes.get("report") if nsys else None
    render = report.extra.get("render_s") if report and report.error is None else None
    goal("its HTML + JSON render (s)", "≤ 1", render, lambda v: v <= 1)
    goal("cached re-open, 1 GB trace (s)", "≤ 0.2", _wall(gig, "cached"), lambda v: v <= 0.2)
    for label, r in (("Kineto 1 GB", gig), ("nsys 20 M", nsys)):
        store, imp = _wall(r, "store"), _wall(r, "import")
        goal(
            f"first default run ÷ --no-cache, {label}",
            "≤ 1.1",
            store / imp if store and imp else None,
            lambda v: v <= 1.1,
        )
    lines = ["| goal (issue 18) | target | measured | met |", "|---|--:|--:|:-:|"]
    for what, target, value, met in rows:
        verdict = "–" if met is None else "yes" if met else "**no**"
        lines.append(f"| {what} | {target} | {_num(value)} | {verdict} |")
    return "\n".join(lines) + "\n"


def scaling_table(results: Sequence[FileResult]) -> str:
    """Import time against size for each synthetic layout, with a bar per row: linear means flat s/GB."""
    lines = []
    for layout in ("pretty", "compact", "gz"):
        imports = [
            (r.json_bytes or r.bytes, r.probes["import"])
            for r in results
            if r.origin == "synthetic" and r.family == "kineto" and r.layout == layout and "import" in r.probes
        ]
        timed = sorted((size, m.wall_s) for size, m in imports if m.wall_s)
        if len(timed) < 2:
            continue
        longest = max(wall for _, wall in timed)
        lines.append(f"Kineto {layout}: import time against JSON size (one `#` = {longest / 40:.2f} s)\n")
        lines.append("```")
        for size, wall in timed:
            bar = "#" * max(1, round(40 * wall / longest))
            lines.append(f"{size / MB:>8,.0f} MB  {wall:>7.2f} s  {wall / (size / 1e9):>6.2f} s/GB  {bar}")
        slope, intercept, r2 = _fit(timed)
        lines.append(f"least squares: {slope * 1e9:.2f} s/GB + {intercept:.2f} s, R² = {r2:.3f}")
        measured = sorted((size, float(m.peak_rss_bytes)) for size, m in imports if m.peak_rss_bytes)
        if len(measured) >= 2:
            slope, intercept, _ = _fit(measured)
            lines.append(
                f"peak RSS: {slope * MB / MIB:.2f} MiB per MB of JSON + {intercept / MIB:,.0f} MiB "
                "(the line through the peaks: what grows with the trace, and what does not)"
            )
        lines.append("```\n")
    return "\n".join(lines)


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares line through ``points``: slope, intercept and R²."""
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, intercept, 1.0 - residual / total if total else 1.0


def render_markdown(results: Sequence[FileResult], info: dict[str, Any], preset: str, command: str) -> str:
    gib = (info["memory_bytes"] or 0) / (1 << 30)
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    idle = info.get("idle_rss_bytes")
    parts = [
        f"Measured with `{command}` (preset `{preset}`) at revision `{info['revision']}`.\n",
        f"**Machine**: {info['cpu']}, {info['cores']} cores, {gib:.0f} GiB RAM; {info['os']}; "
        f"Python {info['python']}; {versions}; HTA {info.get('hta', 'not run')}. "
        f"Load average at the start: {', '.join(str(x) for x in info['load_average'])}.{speed_line(info)}\n",
        f"Peak RSS includes the interpreter with traceq, polars and pyarrow loaded "
        f"({_mb(idle)} MiB when idle). Wall times are medians of {info['repeat']} run(s), each in a fresh process.\n",
    ]
    for title, table in (
        ("### Against the goals", goals_table(results)),
        ("### Kineto JSON import, next to HTA 0.5.0", kineto_table(results, idle)),
        ("### nsys SQLite import and the full report", nsys_table(results, idle)),
        ("### The columnar cache", cache_table(results)),
        ("### Scaling", scaling_table(results)),
    ):
        if table:
            parts.append(f"{title}\n\n{table}")
    return "\n".join(parts)


def render_saved(path: Path, *, write: bool) -> None:
    """The tables of a results file that ``main`` saved (to change their layout without measuring again)."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    results = [FileResult.from_dict(f) for f in saved["files"]]
    command = saved.get("command", f"python bench/run.py (preset {saved['preset']})")
    markdown = render_markdown(results, saved["machine"], saved["preset"], command)
    print(markdown)
    if write:
        write_docs(markdown)


def write_docs(markdown: str) -> None:
    """Put ``markdown`` between the markers of docs/performance.md (the rest is left as it is)."""
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS} lacks the markers {BEGIN!r} and {END!r}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{markdown.rstrip()}\n{END}{tail}", encoding="utf-8")
    print(f"wrote {DOCS.relative_to(REPO)}", file=sys.stderr)


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    make_big.add_size_arguments(parser)
    parser.add_argument("--only", default=None, help="only files whose name contains this text")
    parser.add_argument("--repeat", type=int, default=1, help="runs per probe; the median is kept (default 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per probe run (default 1800)")
    parser.add_argument("--no-hta", action="store_true", help="skip HTA and the pandas baseline")
    parser.add_argument(
        "--pandas-max-mb", type=float, default=600.0, help="skip the pandas baseline above this JSON size (RAM)"
    )
    parser.add_argument(
        "--hta-max-mb",
        type=float,
        default=float("inf"),
        help="skip HTA (and pandas) above this JSON size: HTA takes minutes per GB (default: no limit)",
    )
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="RESULTS_JSON",
        help="measure nothing: print (and with --write-docs, publish) the tables of a saved results file",
    )
    args = parser.parse_args(argv)
    if args.render is not None:
        render_saved(args.render, write=args.write_docs)
        return

    # Generated in a child: this process stays small, because a child's ru_maxrss starts from the
    # size of the process it was forked from (Linux keeps the high-water mark across exec).
    subprocess.run([sys.executable, str(BENCH / "make_big.py"), *make_big.size_argv(args)], check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceq")], check=True)
    records = make_big.read_manifest(args.data)
    if args.only:
        records = [r for r in records if args.only in r.name]
    hta_python = None if args.no_hta else ensure_hta(args.data / "hta-install.log")
    info = machine()
    info["repeat"] = args.repeat
    if hta_python is not None:
        info["hta"] = HTA_REQUIREMENT.split("==")[1]
    idle = probe(sys.executable, "idle", PROBES, repeat=1, timeout_s=120)
    info["idle_rss_bytes"] = idle.peak_rss_bytes
    info["speed"] = {"start": machine_speed()}
    results = [
        bench_file(
            record,
            args.data,
            hta_python=hta_python,
            hta_max_mb=args.hta_max_mb,
            pandas_max_mb=args.pandas_max_mb,
            repeat=args.repeat,
            timeout_s=args.timeout,
        )
        for record in records
    ]
    info["speed"]["end"] = machine_speed()
    command = "python bench/run.py " + " ".join(sys.argv[1:] if argv is None else argv)
    custom = any(getattr(args, o) is not None for o in ("kineto_mb", "nsys_rows", "real_mb", "rocm_mb")) or args.only
    saved = args.data / f"results-{'custom' if custom else args.preset}.json"
    files = [r.to_dict() for r in results]
    saved.write_text(
        json.dumps({"machine": info, "preset": args.preset, "command": command.strip(), "files": files}, indent=1)
        + "\n"
    )
    markdown = render_markdown(results, info, args.preset, command.strip())
    print(markdown)
    print(f"results saved in {saved}", file=sys.stderr)
    if args.write_docs:
        write_docs(markdown)
    failures = [
        (r.name, k, m.error) for r in results for k, m in r.probes.items() if m.error and k not in ("hta", "pandas")
    ]
    if failures:
        for name, key, error in failures:
            print(f"FAILED {name} {key}: {error}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
