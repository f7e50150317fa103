"""A report of a trace missing GPU work says so beside the numbers, in the terminal, the HTML and the
JSON, and withholds the findings the missing work undermines (``docs/findings.md``, "Incomplete
data").  The traces are planted scenarios, damaged here with ``sqlite3`` / ``json`` the way real
exports are (kernel rows whose end precedes their start; no kernel table; kernels the profiler
lost), and every count is taken from the damaged file by those libraries, not by traceq."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest

import traceq
from tracegen.planned.scenarios import BY_NAME
from traceq.analyses.completeness import KERNEL_LAUNCH_PATTERN
from traceq.report.html.page import render_html
from traceq.report.model import Report
from traceq.report.text import render_text

from ..conftest import REPO

SCHEMA = json.loads((REPO / "schemas" / "report.schema.json").read_text())
SCENARIO = "launch_bound"
"""A scenario whose intact trace fires ``launch_bound`` (``tracegen/planned/scenarios``)."""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("planted")
    job = BY_NAME[SCENARIO].build()
    return {fmt: job.write(root / fmt, fmt) for fmt in ("nsys", "kineto")}


def _copy(path: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    if path.is_dir():
        shutil.copytree(path, target)
    else:
        shutil.copyfile(path, target)
    return target


def _gpu_rows(db: sqlite3.Connection) -> int:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return sum(
        db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        if t in tables
    )


def _invert_kernels(path: Path, every: int) -> tuple[int, int]:
    """Make every ``every``-th kernel row end before it starts; (rows inverted, GPU rows in all)."""
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE rowid % {every} = 0")
        inverted = db.execute("SELECT changes()").fetchone()[0]
        return inverted, _gpu_rows(db)


def _texts(report: Report) -> tuple[str, str, dict[str, Any]]:
    return click.unstyle(render_text(report)), render_html(report), report.to_dict()


def test_the_intact_trace_has_no_caveat_and_fires_its_finding(planted: dict[str, Path]) -> None:
    for path in planted.values():
        report = traceq.report(path)
        assert report.caveats == () and report.withheld_findings == ()
        assert "launch_bound" in {f.id for f in report.findings}
        assert all(f.caveats == () for f in report.findings)


def test_a_third_of_the_kernels_inverted_is_said_beside_the_numbers_and_withholds_the_findings(
    planted: dict[str, Path], tmp_path: Path
) -> None:
    path = _copy(planted["nsys"], tmp_path, "third.sqlite")
    inverted, gpu_rows = _invert_kernels(path, every=3)
    report = traceq.report(path)
    (caveat,) = report.caveats
    assert (caveat.id, caveat.missing, caveat.expected, caveat.withholds) == (
        "gpu_rows_skipped",
        inverted,
        gpu_rows,
        True,
    )
    assert caveat.reasons == {"invalid interval": inverted}
    assert report.findings == ()
    assert "launch_bound" in {w.id for w in report.withheld_findings}
    text, page, payload = _texts(report)
    jsonschema.validate(payload, SCHEMA)
    assert f"{inverted} of {gpu_rows} GPU activities" in " ".join(text.split())
    breakdown = text[text.index("where the step time went") : text.index("idle time by cause")]
    assert "! incomplete:" in breakdown and "withheld" in breakdown
    assert "withheld findings" in text and "none: every one that fired is withheld" in text
    section = page[page.index('<section id="breakdown">') : page.index('<section id="idle">')]
    assert "<strong>Incomplete:</strong>" in section and f"{inverted} of {gpu_rows} GPU activities" in section
    assert '<ul class="withheld">' in page and "No findings shown" in page
    assert payload["caveats"][0]["missing"] == inverted
    assert [w["id"] for w in payload["withheld_findings"]] == [w.id for w in report.withheld_findings]


def test_a_few_inverted_kernels_leave_the_findings_with_their_caveat(planted: dict[str, Path], tmp_path: Path) -> None:
    path = _copy(planted["nsys"], tmp_path, "few.sqlite")
    with sqlite3.connect(path) as db:
        kernels = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    inverted, _ = _invert_kernels(path, every=kernels // 3)  # 3 rows: well under a quarter
    report = traceq.report(path)
    (caveat,) = report.caveats
    assert caveat.missing == inverted == 3 and not caveat.withholds
    assert report.withheld_findings == ()
    launch_bound = next(f for f in report.findings if f.id == "launch_bound")
    assert launch_bound.caveats == (caveat.text,)
    text, page, _ = _texts(report)
    assert "caveat: " + caveat.text[:40] in " ".join(text.split())
    assert "<strong>Caveat:</strong>" in page


def test_an_export_without_its_kernel_table_names_the_missing_table(planted: dict[str, Path], tmp_path: Path) -> None:
    path = _copy(planted["nsys"], tmp_path, "nokernels.sqlite")
    with sqlite3.connect(path) as db:
        db.create_function("regexp", 2, lambda pattern, value: re.search(pattern, value or "") is not None)
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        held = _gpu_rows(db)
        last = [
            db.execute(f"SELECT MAX(start) FROM {t}").fetchone()[0]
            for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()
        ]
        last_ns = max((v for v in last if v is not None), default=None)
        launches = db.execute(
            "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value REGEXP ? AND (? IS NULL OR r.start <= ?)",
            (KERNEL_LAUNCH_PATTERN.removeprefix("(?i)"), last_ns, last_ns),
        ).fetchone()[0]
    report = traceq.report(path)
    (caveat,) = report.caveats
    assert (caveat.id, caveat.missing, caveat.expected) == ("launched_work_unrecorded", launches, held + launches)
    assert launches > 0 and caveat.withholds
    assert "the export lacks its kernel table" in caveat.text
    assert report.findings == ()
    text, _, _ = _texts(report)
    assert "the export lacks its kernel table" in " ".join(text.split())


def test_kernels_the_profiler_lost_from_a_kineto_trace_are_unrecorded_launches(
    planted: dict[str, Path], tmp_path: Path
) -> None:
    source = planted["kineto"]
    files = sorted(source.glob("*.json*")) if source.is_dir() else [source]
    (path,) = files
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        trace = json.load(f)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    lost = kernels[: len(kernels) // 2]
    lost_ids = {id(e) for e in lost}
    trace["traceEvents"] = [e for e in trace["traceEvents"] if id(e) not in lost_ids]
    damaged = tmp_path / "lost.pt.trace.json"
    damaged.write_text(json.dumps(trace))
    report = traceq.report(damaged)
    (caveat,) = report.caveats
    assert caveat.id == "launched_work_unrecorded"
    last_ts = max(e["ts"] for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    lost_correlations = {e["args"]["correlation"] for e in lost}
    launches = [
        e
        for e in trace["traceEvents"]
        if e.get("cat") == "cuda_runtime"
        and e.get("args", {}).get("correlation") in lost_correlations
        and re.search(KERNEL_LAUNCH_PATTERN, e["name"])
    ]
    assert caveat.missing == sum(1 for e in launches if e["ts"] <= last_ts) > 0
    assert caveat.withholds == (caveat.missing >= 0.25 * caveat.expected)


@pytest.mark.parametrize("sample", ["training_step.nsys.sqlite", "training_step.pt.trace.json.gz", "ranks"])
def test_the_shipped_samples_are_complete(samples: Path, sample: str) -> None:
    report = traceq.report(samples / sample)
    assert report.caveats == () and report.withheld_findings == ()


def _unrecorded_by_sqlite3(path: Path) -> dict[int, int]:
    """Per pid, kernel launches whose correlation id no GPU activity of the process carries, issued
    before its last GPU activity started: counted with plain sqlite3 (pid = globalId >> 24 & 0xFFFFFF)."""
    uri = f"file:{path}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as db:
        db.create_function("regexp", 2, lambda pattern, value: re.search(pattern, value or "") is not None)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        # GRAPH_TRACE rows are whole-graph executions: GPU work of their cudaGraphLaunch.
        kinds = ("KERNEL", "GRAPH_TRACE", "MEMCPY", "MEMSET")
        gpu = [f"CUPTI_ACTIVITY_KIND_{k}" for k in kinds if f"CUPTI_ACTIVITY_KIND_{k}" in tables]
        if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables or not gpu:
            return {}
        activity = " UNION ALL ".join(
            f"SELECT (globalPid >> 24) & 16777215 AS pid, correlationId AS corr, start FROM {t}" for t in gpu
        )
        rows = db.execute(
            f"""
            WITH act AS ({activity}),
                 last AS (SELECT pid, MAX(start) AS last FROM act GROUP BY pid),
                 calls AS (
                     SELECT (r.globalTid >> 24) & 16777215 AS pid, r.correlationId AS corr, r.start
                     FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                     WHERE r.correlationId IS NOT NULL AND s.value REGEXP ?)
            SELECT c.pid, COUNT(*) FROM calls c LEFT JOIN last l ON l.pid = c.pid
            WHERE NOT EXISTS (SELECT 1 FROM act a WHERE a.pid = c.pid AND a.corr = c.corr)
              AND (l.last IS NULL OR c.start <= l.last)
            GROUP BY c.pid
            """,
            (KERNEL_LAUNCH_PATTERN.removeprefix("(?i)"),),
        ).fetchall()
    return {int(pid): int(n) for pid, n in rows if n}


@pytest.mark.real
@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (REPO / ".." / "shared" / "sample_traces" / "nsys").glob("*.sqlite")) or ["(none)"],
)
def test_the_unrecorded_launches_of_real_exports_are_those_sqlite3_counts(shared_traces: Path, name: str) -> None:
    path = shared_traces / "nsys" / name
    report = traceq.report(path)
    got = {c.pid: c.missing for c in report.caveats if c.id == "launched_work_unrecorded"}
    assert [c for c in report.caveats if c.id == "gpu_rows_skipped"] == []
    assert got == _unrecorded_by_sqlite3(path)
