"""What the compiled readers buy: the same imports with and without them, in the same run.

    python bench/bench_pure.py                 # a 50 MB Kineto trace (JSON and .json.gz), a 1 M-row nsys export
    python bench/bench_pure.py --write-docs    # and put the table into docs/performance.md

An install without a C compiler has neither compiled reader (``setup.py``; ``docs/performance.md``,
"Without the compiled readers"): the Kineto JSON is read by the lenient pure-Python parser and nsys
exports through ``sqlite3``.  Each import (``traceq.load(path, cache=False)``) runs ``--repeat``
times in a fresh child process -- with the compiled modules, and with them hidden (``sys.modules``
set to None, so that importing them raises ImportError, as on such an install) -- and the median
wall time is kept.  The files come from ``bench/make_big.py`` into ``--data`` (reused when there).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import make_big  # bench/ is on sys.path (this script's folder)

BENCH: Final = Path(__file__).resolve().parent
REPO: Final = BENCH.parent
DOCS: Final = REPO / "docs" / "performance.md"
BEGIN: Final = "<!-- bench-pure:begin (written by bench/bench_pure.py --write-docs) -->"
END: Final = "<!-- bench-pure:end -->"
HIDE: Final = (
    "import sys\n"
    "sys.modules['traceq.importers.kineto._scanner'] = None\n"
    "sys.modules['traceq.importers.nsys._column_reader'] = None\n"
)
LOAD: Final = "import sys, traceq\ntraceq.load(sys.argv[1], cache=False)\n"


def _seconds(path: Path, *, pure: bool, repeat: int) -> float:
    """Median wall time of a child process that imports traceq and loads ``path`` (Python's start-up included)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", (HIDE if pure else "") + LOAD, str(path)], check=True, cwd=REPO)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=make_big.DEFAULT_DATA, help="trace folder (default: bench/data)")
    parser.add_argument("--kineto-mb", type=float, default=50.0, help="size of the Kineto trace, MB (default 50)")
    parser.add_argument("--nsys-rows", type=int, default=1_000_000, help="rows of the nsys export (default 1 M)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per import; the median is kept (default 3)")
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()

    files = make_big.generate(args.data, kineto_mb=[args.kineto_mb], nsys_rows=[args.nsys_rows], real_mb=[])
    rows = ["| file | size | compiled readers | pure Python | pure / compiled |", "| --- | ---: | ---: | ---: | ---: |"]
    for record in files:
        if record.layout == "pretty":
            continue  # the compact JSON and the .json.gz of the same trace are enough
        path = args.data / record.name
        compiled = _seconds(path, pure=False, repeat=args.repeat)
        pure = _seconds(path, pure=True, repeat=args.repeat)
        size = f"{(record.json_bytes or record.bytes) / 1e6:.0f} MB" + (" JSON" if record.family == "kineto" else "")
        rows.append(f"| `{record.name}` | {size} | {compiled:.2f} s | {pure:.2f} s | {pure / compiled:.1f}x |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.write_docs:
        text = DOCS.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        DOCS.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")
        print(f"wrote {DOCS.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
