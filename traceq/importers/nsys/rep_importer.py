"""The Nsight Systems report importer: ``.nsys-rep`` (or ``.qdrep``) -> ``nsys export`` -> SQLite importer.

A report's container is opaque; only NVIDIA's ``nsys`` binary can read it.  :func:`read_nsys_rep`
runs ``nsys export --type sqlite`` once, keeps the export as a cache, and imports it with
:func:`~traceq.importers.nsys.sqlite_importer.load_nsys_export` so that rows, stats and meta name the
report, not the cache (``meta.format`` is ``nsys-rep``; ``meta.properties["sqlite_export"]`` says
where the export lies).

Where the export goes: ``<report>.sqlite`` beside the report (``run.nsys-rep`` ->
``run.nsys-rep.sqlite``, a name ``nsys`` itself never picks, so a user's own export is never taken
for ours), or, when that folder is not writable, ``$TRACEQ_CACHE_DIR`` (default
``~/.cache/traceq/nsys-export/``) under a name made from the report's absolute path.  An export is
reused while its modification time is newer than the report's.  It is written under a temporary
name and renamed into place, so an interrupted export is never mistaken for a finished one.

Which ``nsys``: ``$NSYS`` when set, else the first ``nsys`` on ``PATH``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from traceq.errors import ExternalToolError, InputNotFoundError, NsysNotFoundError, TraceqError
from traceq.importers.nsys.sqlite_importer import load_nsys_export
from traceq.importers.result import ImportResult

DEFAULT_CACHE_DIR = Path("~/.cache/traceq/nsys-export")


def read_nsys_rep(path: Path) -> ImportResult:
    """Import an Nsight Systems report by exporting it to SQLite with ``nsys`` (cached).

    Raises :class:`~traceq.errors.NsysNotFoundError` when an export is needed and no ``nsys`` is
    available, :class:`~traceq.errors.ExternalToolError` when ``nsys export`` fails, and whatever
    :func:`~traceq.importers.nsys.sqlite_importer.read_nsys_sqlite` raises for the export.
    """
    if not path.is_file():
        raise InputNotFoundError("no such report file", path=path, hint="check the path")
    export = fresh_export(path)
    if export is None:
        export = export_target(path)
        run_nsys_export(find_nsys(path), path, export)
    result = load_nsys_export(export, source=path, fmt="nsys-rep")
    meta = replace(result.meta, properties={**result.meta.properties, "sqlite_export": str(export)})
    return replace(result, meta=meta)


def beside_path(report: Path) -> Path:
    """``<report>.sqlite`` next to the report."""
    return report.with_name(report.name + ".sqlite")


def cache_path(report: Path) -> Path:
    """The export's place in the cache folder, unique per absolute report path."""
    digest = hashlib.sha256(str(report.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / f"{report.name}-{digest}.sqlite"


def cache_dir() -> Path:
    configured = os.environ.get("TRACEQ_CACHE_DIR")
    return Path(configured).expanduser() if configured else DEFAULT_CACHE_DIR.expanduser()


def fresh_export(report: Path) -> Path | None:
    """An existing export of ``report`` newer than it (beside it first, then in the cache), else None."""
    report_mtime_ns = report.stat().st_mtime_ns
    for candidate in (beside_path(report), cache_path(report)):
        try:
            if candidate.is_file() and candidate.stat().st_mtime_ns > report_mtime_ns:
                return candidate
        except OSError:
            continue
    return None


def export_target(report: Path) -> Path:
    """Where a new export goes: beside the report when that folder is writable, else the cache."""
    if folder_is_writable(report.parent):
        return beside_path(report)
    target = cache_path(report)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceqError(
            f"no writable place for the SQLite export: the report's folder is read-only and the cache "
            f"folder {target.parent} cannot be created ({exc.strerror})",
            path=report,
            hint="set TRACEQ_CACHE_DIR to a writable folder",
        ) from exc
    return target


def folder_is_writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried, since permission bits lie for root and
    read-only mounts)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".traceq-probe-"):
            return True
    except OSError:
        return False


def find_nsys(report: Path) -> str:
    """The ``nsys`` to run: ``$NSYS``, else ``nsys`` on ``PATH``; NsysNotFoundError naming the manual command."""
    manual = export_command("nsys", report, beside_path(report))
    configured = os.environ.get("NSYS")
    if configured:
        if Path(configured).is_file() and os.access(configured, os.X_OK):
            return configured
        raise NsysNotFoundError(
            f"$NSYS is set to {configured!r}, which is not an executable file",
            path=report,
            hint=f"point NSYS at the nsys binary, or export the report yourself: {shlex.join(manual)}",
        )
    found = shutil.which("nsys")
    if found is None:
        raise NsysNotFoundError(
            "reading a .nsys-rep needs Nsight Systems' nsys to export it to SQLite, and nsys is not on PATH",
            path=report,
            hint=f"install Nsight Systems or set NSYS, or run {shlex.join(manual)} and pass the .sqlite file",
        )
    return found


def export_command(nsys: str, report: Path, output: Path) -> list[str]:
    """The argument list of one export (no shell involved)."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]


def run_nsys_export(nsys: str, report: Path, export: Path) -> None:
    """Export ``report`` to ``export`` through a temporary file renamed into place on success."""
    # nsys appends ".sqlite" to an output name without it, so the temporary name keeps the suffix.
    temporary = export.with_name(f".{export.name}.{os.getpid()}.tmp.sqlite")
    command = export_command(nsys, report, temporary)
    try:
        completed = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise ExternalToolError(
            f"could not run {nsys} ({exc.strerror or exc})", path=report, hint="check that nsys is installed and runs"
        ) from exc
    if completed.returncode != 0 or not temporary.is_file():
        temporary.unlink(missing_ok=True)
        last_line = _last_line(completed.stderr) or _last_line(completed.stdout) or "no output"
        status = f"exit {completed.returncode}" if completed.returncode else "no output file written"
        raise ExternalToolError(
            f"nsys export failed ({status}): {last_line}",
            path=report,
            hint=f"run it yourself to see everything it says: {shlex.join(export_command(nsys, report, export))}",
        )
    os.replace(temporary, export)


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
