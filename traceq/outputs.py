"""The files a command writes: which output paths are allowed, and writing each one whole.

:func:`check_outputs` runs before anything is imported, for every file a command is about to
write (``report -o`` and ``--json``, the default ``<input>.report.html``, ``convert -o``).  It
refuses, with or without ``--force``:

* an output that **is one of the inputs**: the same path, the same file through a symbolic link,
  or a hard link to it (the same device and inode), the files a directory input holds included;
* an output **inside an input directory under a name a directory scan reads as a trace**
  (``traceq report ranks/ --json ranks/job.json``): the next run over that directory would read
  the report as a rank;
* an output named twice, or that is a directory.

An output that exists is replaced only with ``--force``; its directory must exist and be
writable.  Every refusal is a :class:`~traceq.errors.OutputError` naming the output.

:func:`write_output` writes into a temporary file beside the output and renames it over the
output once complete, so a failed write (a full disk, a killed process) leaves the previous file
as it was and no partial file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from traceq.errors import OutputError, OutputExistsError
from traceq.loading import TRACE_SUFFIXES, iter_trace_files

_WRITE_HINT = "pass -o with a path in a writable directory"


def check_outputs(outputs: Sequence[Path], inputs: Sequence[Path], *, force: bool) -> None:
    """Raise :class:`OutputError` for the first of ``outputs`` that may not be written (see the module
    docstring); ``inputs`` are the paths as given, files or directories."""
    files, directories = _input_files(inputs)
    same_file = {ident for ident in map(_identity, files) if ident is not None}
    same_path = {_resolved(f) for f in files}
    scanned = {_resolved(d) for d in directories}
    seen: dict[Path, Path] = {}
    for output in outputs:
        resolved = _resolved(output)
        if output.is_dir():
            raise OutputError("is a directory", path=output, hint="pass -o with a file name")
        if _identity(output) in same_file or resolved in same_path:
            raise OutputError(
                "is one of the inputs, and traceq never writes over an input", path=output, hint="name another output"
            )
        if resolved.parent in scanned and resolved.name.lower().endswith(TRACE_SUFFIXES):
            raise OutputError(
                f"is in the input directory {resolved.parent} under a trace file's name, so the next "
                "run over that directory would read it as an input",
                path=output,
                hint="write it outside that directory",
            )
        if resolved in seen:
            also = "" if seen[resolved] == output else f" (also as {seen[resolved]})"
            raise OutputError(f"is named twice as an output{also}", path=output, hint="name each output once")
        seen[resolved] = output
        if output.exists() and not force:
            raise OutputExistsError("exists", path=output, hint="pass --force to overwrite it")
        _check_directory(output, resolved.parent)


def write_output(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` whole: ``write(temporary)`` fills a new file beside it, which then replaces ``path``.

    A symbolic link is written through (its target is replaced; the link stays).  Raises
    :class:`OutputError` when the file cannot be created or written; nothing is left behind.
    """
    target = path.resolve() if path.is_symlink() else path
    token = secrets.token_hex(4)
    temp = target.with_name(f".{target.name[:100]}.traceq-{token}.tmp")
    try:
        # O_EXCL: never an existing file; mode 0o666 less the umask, as the output itself would get.
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", path=path, hint=_WRITE_HINT) from exc
    try:
        write(temp)
        os.replace(temp, target)
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"cannot be written ({reason})", path=path, hint=_WRITE_HINT) from exc
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


def _input_files(inputs: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """The files the inputs name (a directory's trace files included) and the directories among them.
    Inputs that are missing or unreadable are left to the loader, which says why."""
    files: list[Path] = []
    directories: list[Path] = []
    for item in inputs:
        if item.is_dir():
            directories.append(item)
            with contextlib.suppress(OSError):
                files.extend(iter_trace_files(item))
        else:
            files.append(item)
    return files, directories


def _identity(path: Path) -> tuple[int, int] | None:
    """The file ``path`` names, through any links: (device, inode); None when there is none."""
    try:
        stat = path.stat()
    except (OSError, RuntimeError):  # RuntimeError: a symbolic-link loop
        return None
    return stat.st_dev, stat.st_ino


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _check_directory(output: Path, directory: Path) -> None:
    if not directory.is_dir():
        raise OutputError(
            f"cannot be written: directory {directory} does not exist",
            path=output,
            hint="create it first, or pass -o with a path in an existing directory",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"cannot be written: directory {directory} is not writable", path=output, hint=_WRITE_HINT)
