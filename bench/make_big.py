"""Generate the benchmark's large traces, deterministically, into a data directory.

    python bench/make_big.py                      # the quick preset: small files, a minute on 2 cores
    python bench/make_big.py --preset full        # Kineto 100 MB .. 2 GB, nsys 1 M .. 20 M rows
    python bench/make_big.py --kineto-mb 50 300 --nsys-rows 2e6 --real-mb 100 --data /scratch/tq

Files written (sizes in the names; an existing file is kept unless ``--force``):

* ``kineto-pretty-<N>MB.json`` -- a synthetic PyTorch-profiler trace in libkineto's own multi-line
  layout, as :func:`tracegen.write_kineto_json` writes it; ``N`` MB (10^6 bytes) of JSON,
  a 32-layer training job of ``N / 1.56`` steps (:func:`tracegen.big_scenario`);
* ``kineto-compact-<N>MB.json`` -- the same document on a single line (the pretty file with every
  newline and the indentation after it removed);
* ``kineto-pretty-<N>MB.json.gz`` -- the pretty file, gzip level 6, no name or time in the header;
* ``kineto-rocm-<N>MB.json`` -- the pretty file as a ROCm build spells it (:func:`rocm_blocks`: HIP
  names, integer ``args`` as strings), for the sizes of ``--rocm-mb``;
* ``nsys-<R>rows.sqlite`` -- an Nsight Systems export with the real schema and at least ``R``
  kernel + CUDA API + memcpy rows (:func:`tracegen.write_big_nsys_sqlite`: a few
  simulated steps, replicated inside SQLite with time and correlation-id offsets);
* ``real-kineto-<name>-<N>MB.json`` / ``real-nsys-<name>-<N>MB.sqlite`` -- a real trace from
  ``../shared/sample_traces`` repeated back to back until it is about ``N`` MB (``--real-mb``)
  (timestamps, correlation ids, External ids, flow ids and ``ProfilerStep#N`` numbers offset per
  copy, so every copy stays linked within itself);
* ``manifest.json`` -- one record per file, read by ``bench/run.py``.

The same arguments always give the same bytes.  The generator, ``tracegen`` (which is not
installed with traceq: it is imported from this checkout), is imported only by the functions that
generate, so ``bench/run.py`` can use this module's options without loading polars.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

BENCH: Final = Path(__file__).resolve().parent
# tracegen (the trace generator) is not installed with traceq: the generating functions import it from here.
sys.path.insert(0, str(BENCH.parent))
DEFAULT_DATA: Final = BENCH / "data"
SHARED_TRACES: Final = (BENCH.parent / ".." / "shared" / "sample_traces").resolve()
MB: Final = 1_000_000

PRESETS: Final[dict[str, dict[str, list[float]]]] = {
    "smoke": {"kineto_mb": [2], "nsys_rows": [20_000], "real_mb": [2], "rocm_mb": [2]},
    "quick": {"kineto_mb": [20, 60], "nsys_rows": [200_000, 1_000_000], "real_mb": [70], "rocm_mb": [60]},
    "full": {
        "kineto_mb": [100, 500, 1000, 2000],
        "nsys_rows": [1_000_000, 5_000_000, 20_000_000],
        "real_mb": [300],
        "rocm_mb": [1000],
    },
}
"""Sizes per preset.  ``smoke`` is what the test suite runs; ``full`` is the published table."""

REAL_KINETO: Final = ("hta/trace_diff/control/control.json.gz",)
"""Real Kineto samples replicated (under ``../shared/sample_traces``): rank 3 of an 8-GPU A100 job,
35 MB of JSON, 109 k events, that HTA's own tests load."""
REAL_KINETO_SMOKE: Final = ("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",)
"""The smoke preset's: 0.3 MB of JSON."""
REAL_NSYS: Final = ("nsys/nsysai_h100_2gpu_1s_2026.2.1.sqlite",)
"""Real nsys exports replicated: 2 H100s, 2026.2.1."""

_BLOCK: Final = 16 << 20
_GZIP_LEVEL: Final = 6
_STEP_NAME: Final = re.compile(r"^(ProfilerStep#)(\d+)$")
_ID_ARGS: Final = ("correlation", "External id", "Record function id", "Ev Idx")
_SQL_STEP_PREFIX: Final = "ProfilerStep#"


@dataclass(frozen=True)
class DataFile:
    """One generated trace, as listed in ``manifest.json``."""

    name: str
    family: str
    """``kineto`` or ``nsys``."""
    layout: str
    """``pretty``, ``compact``, ``gz``, ``lines`` (one event per line) or ``sqlite``."""
    origin: str
    """``synthetic`` or the real sample's path under ``../shared/sample_traces``."""
    bytes: int
    json_bytes: int | None
    """Uncompressed JSON bytes (Kineto files only)."""


# --------------------------------------------------------------------------------------------
# synthetic Kineto


def kineto_steps_for(target_bytes: int) -> int:
    """Steps of :func:`big_scenario` whose pretty Kineto trace is closest to ``target_bytes``."""
    from tracegen import big_scenario, build_timeline, write_kineto_json

    with tempfile.TemporaryDirectory() as tmp:
        sizes = []
        for steps in (2, 6):
            path = write_kineto_json(build_timeline(big_scenario(steps)), Path(tmp) / f"probe{steps}.json")
            sizes.append(path.stat().st_size)
    per_step = (sizes[1] - sizes[0]) / 4
    header = sizes[0] - 2 * per_step
    return max(2, round((target_bytes - header) / per_step))


def write_kineto_pretty(path: Path, target_bytes: int) -> None:
    from tracegen import big_scenario, build_timeline, write_kineto_json

    timeline = build_timeline(big_scenario(kineto_steps_for(target_bytes)))
    _atomic(path, lambda tmp: write_kineto_json(timeline, tmp))


def compact_blocks(pretty: Path) -> Iterator[bytes]:
    """The bytes of ``pretty`` with every newline and the indentation after it removed.

    JSON strings cannot hold a raw newline, so this never touches a string's content; the result
    is the same document on one line.
    """
    newline_indent = re.compile(rb"\n[ \t]*")
    carry = b""
    with pretty.open("rb") as fh:
        while block := fh.read(_BLOCK):
            data = carry + block
            cut = data.rfind(b"\n")  # keep the last newline with what follows it
            if cut <= 0:
                carry = data
                continue
            carry = data[cut:]
            yield newline_indent.sub(b"", data[:cut])
    yield newline_indent.sub(b"", carry) + b"\n"


_HIP_NAME: Final = re.compile(rb'"name": "cuda')
_STRING_ARGS: Final = re.compile(rb'"(bytes|correlation|External id)": (-?\d+)')


def rocm_blocks(pretty: Path) -> Iterator[bytes]:
    """The bytes of ``pretty`` as a ROCm build would spell them: HIP runtime names (``cudaX`` ->
    ``hipX``) and the integer ``args`` ROCm's roctracer rows may write as strings -- here every
    ``bytes``, ``correlation`` and ``External id`` (``"bytes": "616"``), a stress case for the
    scanner's strings-in-number-fields path.  Line by line: no key and value span a newline."""
    with pretty.open("rb") as fh:
        while block := fh.read(_BLOCK):
            block += fh.readline()
            yield _STRING_ARGS.sub(rb'"\1": "\2"', _HIP_NAME.sub(b'"name": "hip', block))


def write_blocks(path: Path, blocks: Iterator[bytes]) -> None:
    """``path`` written (atomically) from ``blocks``: :func:`compact_blocks`, :func:`rocm_blocks`."""

    def write(tmp: Path) -> None:
        with tmp.open("wb") as out:
            for block in blocks:
                out.write(block)

    _atomic(path, write)


def write_gzip(path: Path, source: Path) -> None:
    def write(tmp: Path) -> None:
        with (
            source.open("rb") as src,
            tmp.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0) as gz,
        ):
            shutil.copyfileobj(src, gz, _BLOCK)

    _atomic(path, write)


# --------------------------------------------------------------------------------------------
# real traces, replicated


def _load_kineto(source: Path) -> dict[str, Any]:
    opener = gzip.open if source.name.endswith(".gz") else open
    with opener(source, "rb") as fh:
        document: dict[str, Any] = json.load(fh)
    return document


def kineto_copies(source: Path, target_bytes: int) -> int:
    """How many copies of the real Kineto trace ``source`` make about ``target_bytes`` of JSON."""
    one_copy = len(json.dumps(_load_kineto(source)["traceEvents"], ensure_ascii=False).encode())
    return max(1, round(target_bytes / max(one_copy, 1)))


def replicate_kineto(source: Path, path: Path, copies: int) -> None:
    """Write ``source`` (a real Kineto trace) repeated ``copies`` times back to back, one event a line.

    Each copy is shifted past the previous one in time and its ids are offset, so that no id of
    one copy links to another copy; metadata events appear once.
    """
    document = _load_kineto(source)
    events: list[dict[str, Any]] = document["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    begin = min(float(e["ts"]) for e in timed)
    end = max(float(e["ts"]) + float(e.get("dur") or 0) for e in timed)
    period = math.ceil(end - begin) + 1000  # µs: one millisecond between copies
    strides = _id_strides(events)
    step_span = _step_span(events)
    top = {k: v for k, v in document.items() if k != "traceEvents"}

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as out:
            out.write("{\n")
            for key, value in top.items():
                out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
            out.write('  "traceEvents": [\n')
            first = True
            for k in range(copies):
                for event in events:
                    shifted = _shift_event(event, k, period, strides, step_span)
                    if shifted is None:
                        continue
                    out.write(("  " if first else ",\n  ") + json.dumps(shifted, ensure_ascii=False))
                    first = False
            out.write("\n  ]\n}\n")

    _atomic(path, write)


def _id_strides(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Per id field, one more than its largest value: the offset between copies."""
    largest: dict[str, int] = {"id": 0, **dict.fromkeys(_ID_ARGS, 0)}
    for event in events:
        if isinstance(event.get("id"), int):
            largest["id"] = max(largest["id"], event["id"])
        args = event.get("args")
        if isinstance(args, dict):
            for key in _ID_ARGS:
                if isinstance(args.get(key), int):
                    largest[key] = max(largest[key], args[key])
    return {key: value + 1 for key, value in largest.items()}


def _step_span(events: Sequence[dict[str, Any]]) -> int:
    numbers = [int(m.group(2)) for e in events if (m := _STEP_NAME.match(str(e.get("name", ""))))]
    return max(numbers) - min(numbers) + 1 if numbers else 0


def _shift_event(
    event: dict[str, Any], copy: int, period: int, strides: dict[str, int], step_span: int
) -> dict[str, Any] | None:
    if copy == 0:
        return event
    if not isinstance(event.get("ts"), int | float) or event.get("ph") == "M":
        return None  # metadata and untimed events appear once
    out = dict(event)
    out["ts"] = event["ts"] + copy * period
    if isinstance(event.get("id"), int):
        out["id"] = event["id"] + copy * strides["id"]
    args = event.get("args")
    if isinstance(args, dict):
        shifted = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                shifted[key] = args[key] + copy * strides[key]
        out["args"] = shifted
    match = _STEP_NAME.match(str(event.get("name", "")))
    if match and step_span:
        out["name"] = f"{match.group(1)}{int(match.group(2)) + copy * step_span}"
    return out


def nsys_copies(source: Path, target_bytes: int) -> int:
    """How many copies of the export ``source`` make about ``target_bytes``."""
    return max(1, round(target_bytes / source.stat().st_size))


def replicate_nsys(source: Path, path: Path, copies: int) -> None:
    """Copy the nsys export ``source`` to ``path`` with its timed rows repeated ``copies`` times.

    Every table with ``start`` and ``end`` columns is repeated with times shifted past the
    previous copy and correlation ids offset; ``ProfilerStep#N`` texts are renumbered.
    """

    def write(tmp: Path) -> None:
        shutil.copyfile(source, tmp)
        tmp.chmod(0o644)
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            if copies > 1:
                _replicate_tables(conn, copies)
            conn.commit()
        finally:
            conn.close()

    _atomic(path, write)


def _replicate_tables(conn: sqlite3.Connection, copies: int) -> None:
    tables = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    info = {t: conn.execute(f'PRAGMA table_info("{t}")').fetchall() for t in tables}
    timed = [t for t in tables if {"start", "end"} <= {str(c[1]) for c in info[t]}]
    if not timed:
        return
    spans = [conn.execute(f'SELECT MIN("start"), MAX("end") FROM "{t}"').fetchone() for t in timed]
    begin = min(int(s[0]) for s in spans if s[0] is not None)
    end = max(int(s[1]) for s in spans if s[1] is not None)
    period = end - begin + 1_000_000  # ns: one millisecond between copies
    corr = [
        conn.execute(f'SELECT MAX(correlationId) FROM "{t}"').fetchone()[0]
        for t in timed
        if "correlationId" in {str(c[1]) for c in info[t]}
    ]
    corr_stride = max((int(c) for c in corr if c is not None), default=0) + 1
    number = f"CAST(substr(text, {len(_SQL_STEP_PREFIX) + 1}) AS INTEGER)"
    steps = 0
    if "text" in {str(c[1]) for c in info.get("NVTX_EVENTS", [])}:
        (span,) = conn.execute(
            f"SELECT MAX({number}) - MIN({number}) + 1 FROM NVTX_EVENTS WHERE text LIKE '{_SQL_STEP_PREFIX}%'"
        ).fetchone()
        steps = int(span or 0)
    conn.execute(
        "CREATE TEMP TABLE copy_index AS WITH RECURSIVE k(i) AS "
        f"(SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {copies - 1}) SELECT i FROM k"
    )
    for table in timed:
        columns = [(str(c[1]), str(c[2]).upper(), int(c[5])) for c in info[table]]
        keys = [c for c in columns if c[2] > 0]
        if keys and (len(keys) > 1 or keys[0][1] != "INTEGER"):
            print(f"  {table}: not replicated (its primary key is not a row id)", file=sys.stderr)
            continue
        names, exprs = [], []
        for name, _type, pk in columns:
            if pk:
                continue  # a row id: SQLite numbers the copies
            names.append(f'"{name}"')
            if name in ("start", "end"):
                exprs.append(f'b."{name}" + k.i * {period}')
            elif name == "correlationId":
                exprs.append(f"b.correlationId + k.i * {corr_stride}")
            elif name == "text" and table == "NVTX_EVENTS" and steps:
                exprs.append(
                    f"CASE WHEN b.text LIKE '{_SQL_STEP_PREFIX}%' THEN '{_SQL_STEP_PREFIX}' || "
                    f"({number.replace('text', 'b.text')} + k.i * {steps}) ELSE b.text END"
                )
            else:
                exprs.append(f'b."{name}"')
        conn.execute(f'CREATE TEMP TABLE base AS SELECT * FROM "{table}"')
        try:
            conn.execute(
                f'INSERT INTO "{table}" ({", ".join(names)}) '
                f"SELECT {', '.join(exprs)} FROM copy_index AS k CROSS JOIN base AS b"
            )
        except sqlite3.IntegrityError as exc:
            print(f"  {table}: not replicated ({exc})", file=sys.stderr)
        conn.execute("DROP TABLE base")
    conn.execute("DROP TABLE copy_index")


# --------------------------------------------------------------------------------------------
# the whole data set


def _atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Run ``write(tmp)`` and rename ``tmp`` to ``path``: an interrupted run leaves no half file."""
    tmp = path.with_name(f".partial-{path.name}")
    tmp.unlink(missing_ok=True)
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _label(n: float) -> str:
    return f"{n:g}"


def _rows_label(rows: int) -> str:
    if rows % 1_000_000 == 0:
        return f"{rows // 1_000_000}M"
    if rows % 1_000 == 0:
        return f"{rows // 1_000}k"
    return str(rows)


def _record(path: Path, family: str, layout: str, origin: str, json_bytes: int | None = None) -> DataFile:
    return DataFile(path.name, family, layout, origin, path.stat().st_size, json_bytes)


def generate(
    data: Path,
    *,
    kineto_mb: Sequence[float],
    nsys_rows: Sequence[int],
    real_mb: Sequence[float],
    real_kineto: Sequence[str] = REAL_KINETO,
    real_nsys: Sequence[str] = REAL_NSYS,
    rocm_mb: Sequence[float] = (),
    force: bool = False,
) -> list[DataFile]:
    """Write the requested files into ``data`` (kept when present, unless ``force``) and the manifest."""
    data.mkdir(parents=True, exist_ok=True)
    files: list[DataFile] = []

    def need(path: Path) -> bool:
        todo = force or not path.exists()
        if todo:
            print(f"writing {path.name} ...", file=sys.stderr, flush=True)
        return todo

    for mb in kineto_mb:
        pretty = data / f"kineto-pretty-{_label(mb)}MB.json"
        if need(pretty):
            write_kineto_pretty(pretty, int(mb * MB))
        files.append(_record(pretty, "kineto", "pretty", "synthetic", pretty.stat().st_size))
        compact = data / f"kineto-compact-{_label(mb)}MB.json"
        if need(compact):
            write_blocks(compact, compact_blocks(pretty))
        files.append(_record(compact, "kineto", "compact", "synthetic", compact.stat().st_size))
        packed = data / f"kineto-pretty-{_label(mb)}MB.json.gz"
        if need(packed):
            write_gzip(packed, pretty)
        files.append(_record(packed, "kineto", "gz", "synthetic", pretty.stat().st_size))
        if mb in rocm_mb:
            rocm = data / f"kineto-rocm-{_label(mb)}MB.json"
            if need(rocm):
                write_blocks(rocm, rocm_blocks(pretty))
            files.append(_record(rocm, "kineto", "rocm", "synthetic", rocm.stat().st_size))
    for rows in nsys_rows:
        export = data / f"nsys-{_rows_label(int(rows))}rows.sqlite"
        if need(export):
            from tracegen import write_big_nsys_sqlite

            _atomic(export, functools.partial(write_big_nsys_sqlite, activity_rows=int(rows)))
        files.append(_record(export, "nsys", "sqlite", "synthetic"))
    if real_mb and not SHARED_TRACES.is_dir():
        print(f"skipping the real samples: {SHARED_TRACES} does not exist", file=sys.stderr)
        real_mb = ()
    for mb in real_mb:
        for rel in real_kineto:
            source = SHARED_TRACES / rel
            copies = kineto_copies(source, int(mb * MB))
            path = data / f"real-kineto-{_sample_stem(source)}-{_label(mb)}MB.json"
            if need(path):
                replicate_kineto(source, path, copies)
            files.append(_record(path, "kineto", "lines", f"{rel} x{copies}", path.stat().st_size))
        for rel in real_nsys:
            source = SHARED_TRACES / rel
            copies = nsys_copies(source, int(mb * MB))
            path = data / f"real-nsys-{_sample_stem(source)}-{_label(mb)}MB.sqlite"
            if need(path):
                replicate_nsys(source, path, copies)
            files.append(_record(path, "nsys", "sqlite", f"{rel} x{copies}"))
    manifest = data / "manifest.json"
    manifest.write_text(json.dumps([asdict(f) for f in files], indent=1) + "\n", encoding="utf-8")
    return files


def _sample_stem(path: Path) -> str:
    """A short name for a real sample: its folder for HTA's and Kineto's samples, else its file name."""
    if path.suffix == ".gz" or path.suffix == ".json":
        return re.sub(r"[^A-Za-z0-9]+", "_", path.parent.name)
    return re.sub(r"[^A-Za-z0-9]+", "_", path.stem)


def read_manifest(data: Path) -> list[DataFile]:
    """The files that the last run listed in ``data/manifest.json``."""
    records = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    return [DataFile(**r) for r in records]


def size_argv(args: argparse.Namespace) -> list[str]:
    """The command-line options that give :func:`generate_for` the same sizes as ``args``."""
    argv = ["--data", str(args.data), "--preset", args.preset]
    for option in ("kineto_mb", "nsys_rows", "real_mb", "rocm_mb"):
        values = getattr(args, option)
        if values is not None:
            argv += [f"--{option.replace('_', '-')}", *(f"{v:g}" for v in values)]
    return argv


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the data folder and the sizes (shared with ``bench/run.py``)."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="trace folder (default: bench/data)")
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--preset", choices=sorted(PRESETS), default="quick", help="sizes (default: quick)")
    preset.add_argument("--quick", action="store_const", const="quick", dest="preset", help="= --preset quick")
    preset.add_argument("--full", action="store_const", const="full", dest="preset", help="= --preset full")
    parser.add_argument("--kineto-mb", type=float, nargs="*", help="synthetic Kineto sizes, MB (overrides the preset)")
    parser.add_argument("--nsys-rows", type=float, nargs="*", help="nsys kernel+API+memcpy rows (overrides the preset)")
    parser.add_argument(
        "--real-mb", type=float, nargs="*", help="replicated real-sample sizes, MB (overrides the preset)"
    )
    parser.add_argument(
        "--rocm-mb", type=float, nargs="*", help="synthetic sizes also written as ROCm spells them (of --kineto-mb)"
    )


def generate_for(args: argparse.Namespace, *, force: bool = False) -> list[DataFile]:
    """:func:`generate` with the sizes chosen by :func:`add_size_arguments`' options."""
    preset = PRESETS[args.preset]

    def chosen(option: list[float] | None, key: str) -> list[float]:
        return [n for n in (preset[key] if option is None else option) if n > 0]

    return generate(
        args.data,
        kineto_mb=chosen(args.kineto_mb, "kineto_mb"),
        nsys_rows=[int(n) for n in chosen(args.nsys_rows, "nsys_rows")],
        real_mb=chosen(args.real_mb, "real_mb"),
        rocm_mb=chosen(args.rocm_mb, "rocm_mb"),
        real_kineto=REAL_KINETO_SMOKE if args.preset == "smoke" else REAL_KINETO,
        force=force,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_size_arguments(parser)
    parser.add_argument("--force", action="store_true", help="rewrite files that exist")
    args = parser.parse_args(argv)
    started = time.monotonic()
    files = generate_for(args, force=args.force)
    total = sum(f.bytes for f in files)
    print(f"{len(files)} files, {total / MB:,.0f} MB in {args.data} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
