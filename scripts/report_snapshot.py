"""Write the JSON (and HTML) report of every shipped sample and every real trace, to compare two commits.

```
python scripts/report_snapshot.py write OUT_DIR [--html]   # run on the commit before a change
python scripts/report_snapshot.py write OUT_DIR2 [--html]  # and on the commit after it
python scripts/report_snapshot.py compare OUT_DIR OUT_DIR2 # JSON byte for byte; HTML with whitespace folded
```

What it reports (each through the ``traceq`` command line, in a fresh process, with a fresh cache):

* every file in ``sample_traces/`` (the shipped samples) and in ``../shared/sample_traces/``
  (where that folder exists), one report per file;
* every folder that holds several traces (the shipped ``sample_traces/ranks/``, the real rank pairs,
  and folders of unrelated traces, whose refusal or report must not change either), each with
  ``--jobs 1``, ``--jobs 2`` and on a Dask ``LocalCluster`` (``--scheduler``; skipped, saying so,
  where Dask is not installed).  A failing case's exit status and error line are compared too.

Paths are given relative to the repository root, as a user would type them, so the reports of two
checkouts that stand side by side in one folder (and so see the same ``../shared``) compare byte for
byte.  Every output goes into ``OUT_DIR``; nothing is written next to a trace.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path("..") / "shared" / "sample_traces"
SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".parquet")


def _trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.lower().endswith(SUFFIXES))


def cases() -> Iterator[tuple[str, list[str]]]:
    """(name, traceq report arguments) for every case, relative to the repository root."""
    files = _trace_files(Path("sample_traces"))
    if (ROOT / SHARED).is_dir():
        files += _trace_files(SHARED)
    for path in files:
        yield _slug(path), [str(path)]
    folders = sorted({p.parent for p in files if sum(q.parent == p.parent for q in files) > 1})
    for folder in folders:
        for jobs in ("1", "2"):
            yield f"{_slug(folder)}--jobs{jobs}", [f"{folder}/", "--jobs", jobs]
        yield f"{_slug(folder)}--dask", [f"{folder}/", "--scheduler", "{scheduler}"]


def _slug(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(path).replace("../", "").replace("/", "__"))


def write(out: Path, *, html: bool) -> int:
    """Write ``OUT/<case>.json`` (and ``.html``) for every case; the count of failed cases."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    all_cases = list(cases())
    cluster = _local_cluster() if any("{scheduler}" in a for _, args in all_cases for a in args) else None
    failed = 0
    try:
        for name, args in all_cases:
            if "{scheduler}" in args:
                if cluster is None:
                    print(f"skip {name}: Dask distributed is not installed")
                    continue
                args = [cluster.scheduler_address if a == "{scheduler}" else a for a in args]
            with tempfile.TemporaryDirectory(prefix="traceq-snapshot-") as cache:
                command = [str(Path(sys.executable).parent / "traceq"), "report", *args, "--force"]
                command += ["--json", str(out / f"{name}.json")]
                command += ["-o", str(out / f"{name}.html")] if html else ["--no-html"]
                env = {**os.environ, "TRACEQ_CACHE_DIR": cache, "NO_COLOR": "1"}
                done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            for produced in (out / f"{name}.json", out / f"{name}.html"):
                if produced.exists():  # on Dask, sources are named by absolute path: drop the checkout's
                    produced.write_text(_portable(produced.read_text()))
            (out / f"{name}.stdout").write_text(done.stdout + done.stderr)
            # What is compared of a failing case: its exit status and its error line.
            error = _portable(done.stderr).strip().splitlines()[-1:] if done.returncode else []
            (out / f"{name}.exit").write_text("\n".join([str(done.returncode), *error]) + "\n")
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
            failed += done.returncode != 0
            print(f"{status:8} {name}")
    finally:
        if cluster is not None:
            cluster.close()
    return failed


def _portable(text: str) -> str:
    """``text`` with the checkout's absolute path written ``<checkout>``, so that two checkouts compare."""
    return text.replace(str(ROOT), "<checkout>")


def _local_cluster():  # type: ignore[no-untyped-def]
    try:
        from distributed import LocalCluster
    except ImportError:
        return None
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)


def _folded(text: str) -> str:
    """HTML with every run of whitespace between tags and around lines folded to nothing."""
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", text)).strip()


def compare(before: Path, after: Path) -> int:
    """Print the comparison; the number of reports that differ (JSON bytes, or folded HTML)."""
    differ = 0
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    counts = {"json": 0, "html": 0, "exit": 0}
    for name in names:
        kind = name.rsplit(".", 1)[-1]
        if kind not in counts:
            continue
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"missing  {name} ({'before' if not a.exists() else 'after'})")
            differ += 1
            continue
        counts[kind] += 1
        same = a.read_bytes() == b.read_bytes()
        if not same and kind == "html" and _folded(a.read_text()) == _folded(b.read_text()):
            print(f"ws-only  {name}")
            continue
        if not same:
            print(f"DIFFERS  {name}")
            differ += 1
    print(
        f"{counts['json']} JSON and {counts['html']} HTML reports and {counts['exit']} exit statuses compared; "
        f"{differ} differ"
    )
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write every case's reports into OUT_DIR")
    w.add_argument("out", type=Path)
    w.add_argument("--html", action="store_true", help="also write the HTML reports")
    c = sub.add_parser("compare", help="compare two OUT_DIRs")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        return 1 if write(args.out, html=args.html) else 0
    return 1 if compare(args.before, args.after) else 0


if __name__ == "__main__":
    raise SystemExit(main())
