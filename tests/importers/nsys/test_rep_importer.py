"""Specification of the .nsys-rep importer (traceq.importers.nsys.rep_importer).

No real ``nsys`` is needed: a fake one, written by the tests, records its arguments and copies a
real export to the ``--output`` path, which is all ``nsys export --type sqlite`` does as far as
traceq can tell.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import polars as pl
import pytest

from traceq import schema
from traceq.errors import ExternalToolError, NsysNotFoundError
from traceq.importers import read_file
from traceq.importers.nsys import rep_importer
from traceq.importers.nsys.rep_importer import read_nsys_rep
from traceq.importers.nsys.sqlite_importer import read_nsys_sqlite

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "sample_traces" / "nsys"
SAMPLE = "nsysai_mock_2026.1.1_rtx3080.sqlite"

FAKE_NSYS = """\
#!{python}
import json, os, shutil, sys
with open(os.environ["FAKE_NSYS_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_NSYS_FAIL"):
    print("Processing [====] 100%")
    print("Exporting events...", file=sys.stderr)
    print("Error: the report file is damaged", file=sys.stderr)
    sys.exit(3)
shutil.copyfile(os.environ["FAKE_NSYS_SOURCE"], sys.argv[sys.argv.index("--output") + 1])
"""


@pytest.fixture
def sample_export() -> Path:
    path = SAMPLES / SAMPLE
    if not path.is_file():
        pytest.skip(f"../shared/sample_traces not present ({SAMPLES.resolve()}); the fake nsys copies a real export")
    return path


@pytest.fixture
def fake_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_export: Path) -> Path:
    """An ``nsys`` on PATH that logs each call to ``calls.log``; returns the log's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nsys"
    script.write_text(FAKE_NSYS.format(python=sys.executable))
    script.chmod(0o755)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_SOURCE", str(sample_export))
    monkeypatch.setenv("TRACEQ_CACHE_DIR", str(tmp_path / "cache"))
    return log


@pytest.fixture
def report(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    path = folder / "run1.nsys-rep"
    path.write_bytes(b"an opaque nsys report")
    return path


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_missing_nsys_names_the_command_to_run(report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("TRACEQ_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(NsysNotFoundError) as info:
        read_nsys_rep(report)
    message = str(info.value)
    assert "\n" not in message and str(report) in message
    assert f"nsys export --type sqlite --force-overwrite true --output {report}.sqlite {report}" in message


def test_nsys_variable_pointing_nowhere(report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSYS", str(tmp_path / "no" / "nsys"))
    monkeypatch.setenv("TRACEQ_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(NsysNotFoundError, match=r"\$NSYS is set to .* not an executable file"):
        read_nsys_rep(report)


def test_export_runs_nsys_with_this_argument_list(report: Path, fake_nsys: Path, sample_export: Path) -> None:
    result = read_nsys_rep(report)
    ((argv),) = calls(fake_nsys)
    output = Path(argv[6])
    assert argv == ["export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]
    # written under a temporary name beside the report, then renamed into place
    assert output.parent == report.parent and output.name.endswith(".sqlite") and output.name.startswith(".")
    export = report.parent / "run1.nsys-rep.sqlite"
    assert sorted(p.name for p in report.parent.iterdir()) == ["run1.nsys-rep", "run1.nsys-rep.sqlite"]
    assert export.read_bytes() == sample_export.read_bytes()

    assert (result.meta.format, result.meta.path) == ("nsys-rep", str(report))
    assert result.meta.properties["sqlite_export"] == str(export)
    assert {c.source for c in result.stats.counts} == {str(report)}
    events = schema.to_polars(result.events)
    assert events["source"].cast(pl.String).unique().to_list() == [str(report)]
    direct = schema.to_polars(read_nsys_sqlite(sample_export).events)
    assert events.drop("source").equals(direct.drop("source"))


def test_cached_export_is_reused_while_newer_than_the_report(
    report: Path, fake_nsys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = read_nsys_rep(report)
    monkeypatch.setenv("PATH", "")  # nsys is not needed to read a fresh export
    second = read_nsys_rep(report)
    assert len(calls(fake_nsys)) == 1
    assert second.events.equals(first.events)


def test_report_newer_than_its_export_is_exported_again(report: Path, fake_nsys: Path) -> None:
    read_nsys_rep(report)
    export = report.parent / "run1.nsys-rep.sqlite"
    earlier = report.stat().st_mtime_ns - 1_000_000_000  # as if the report was rewritten after its export
    os.utime(export, ns=(earlier, earlier))
    read_nsys_rep(report)
    assert len(calls(fake_nsys)) == 2
    assert export.stat().st_mtime_ns > report.stat().st_mtime_ns


def test_read_only_report_folder_exports_into_the_cache_dir(
    report: Path, fake_nsys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rep_importer, "folder_is_writable", lambda folder: folder != report.parent)
    result = read_nsys_rep(report)
    export = Path(result.meta.properties["sqlite_export"])
    assert export.parent == tmp_path / "cache"
    assert export.name.startswith("run1.nsys-rep-") and export.suffix == ".sqlite"
    assert sorted(p.name for p in report.parent.iterdir()) == ["run1.nsys-rep"]
    read_nsys_rep(report)
    assert len(calls(fake_nsys)) == 1  # the cached copy is found again


def test_failed_export_reports_nsys_last_stderr_line(
    report: Path, fake_nsys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS_FAIL", "1")
    with pytest.raises(ExternalToolError, match=r"nsys export failed \(exit 3\): Error: the report file is damaged"):
        read_nsys_rep(report)
    assert sorted(p.name for p in report.parent.iterdir()) == ["run1.nsys-rep"]  # nothing half-written left


def test_nsys_from_the_environment_variable(
    report: Path, fake_nsys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NSYS", str(tmp_path / "bin" / "nsys"))
    monkeypatch.setenv("PATH", "")
    assert read_nsys_rep(report).meta.format == "nsys-rep"
    assert len(calls(fake_nsys)) == 1


def test_read_file_dispatches_reports_by_suffix(report: Path, fake_nsys: Path) -> None:
    assert read_file(report).meta.format == "nsys-rep"
