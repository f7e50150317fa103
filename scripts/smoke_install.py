"""Smoke test of an installed traceq (a wheel, or a build without a C compiler), run outside the source tree.

    python scripts/smoke_install.py --expect compiled   # cibuildwheel's test command
    python scripts/smoke_install.py --expect pure       # .ci/run, after an install with no compiler

It reports the shipped samples (both formats and the ranks folder) through the installed CLI and checks
that the install has (or lacks) the compiled readers and the interval kernel as expected, with the
one warning where it lacks the readers (tests/importers/test_compiled.py checks that both ways give
the same reports).  Outputs go to a temporary folder.  Exit status 0 when every check holds; the
first failure is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TRACES = ("training_step.pt.trace.json.gz", "training_step.nsys.sqlite", "ranks")
WARNING = "traceq: warning: traceq was installed without"


def _report(trace: Path, out: Path) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-m", "traceq", "report", "--no-cache", "--no-html", "--json", str(out), str(trace)],
        capture_output=True,
        text=True,
        check=False,
        cwd=out.parent,  # not the checkout: the installed package is the one imported
    )
    if done.returncode != 0:
        raise SystemExit(f"smoke: traceq report {trace.name} exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(out.read_text()), done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", choices=("compiled", "pure"), required=True)
    expect = parser.parse_args().expect

    probe = (
        "import traceq, traceq.importers.compiled as c, traceq.interval_union as u; "
        "print(traceq.__file__); print(*c.build().missing); print(u.COMPILED)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        where, missing, kernel = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp
        ).stdout.split("\n")[:3]
        print(f"smoke: traceq imported from {where}; missing compiled readers: {missing or 'none'}; kernel: {kernel}")
        if (expect == "compiled") != (missing == ""):
            raise SystemExit(f"smoke: expected an install with {expect} readers, found missing: {missing!r}")
        if (expect == "compiled") != (kernel == "True"):
            raise SystemExit(f"smoke: expected an install with {expect} intervals, found the kernel built: {kernel}")
        for name in TRACES:
            report, stderr = _report(SAMPLES / name, Path(tmp) / f"{name}.json")
            warned = stderr.count(WARNING)
            if warned != (1 if expect == "pure" else 0):
                raise SystemExit(f"smoke: {name}: the compiled-readers warning appeared {warned} times: {stderr!r}")
            if not report.get("devices"):
                raise SystemExit(f"smoke: {name}: the report has no devices")
            print(f"smoke: {name}: {len(report['devices'])} devices, findings: {len(report.get('findings', []))}")  # type: ignore[arg-type]
    print("smoke: ok")


if __name__ == "__main__":
    main()
