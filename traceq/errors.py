"""The one error hierarchy of traceq.

Every failure a user can cause (a missing file, a truncated gzip, an SQLite file that is not an
nsys export, ...) is raised as a subclass of :class:`TraceqError`. The CLI translates these once,
at its edge, into a single line on stderr and a non-zero exit code; tracebacks are shown only with
``--debug``.  A message always names the file and says what to do about it.

:class:`ExitCode` is the command line's exit status, one value per kind of outcome; every error
carries the one it ends the CLI with (``exit_code``).
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path


class ExitCode(IntEnum):
    """The exit status of ``traceq``; :attr:`meaning` says what each value means (``traceq --help``).

    2 is every error the user can fix -- click's usage errors and every :class:`TraceqError` -- with
    one ``traceq: error:`` line naming the file; 70 (sysexits' EX_SOFTWARE) is only ever a traceq
    bug.  130 and 141 are what a shell reports for a process that SIGINT or SIGPIPE ended: traceq
    exits with them itself, having cleaned up.  1 is kept for ``traceq check`` (a budget exceeded).
    """

    OK = 0
    CHECK_FAILED = 1
    USAGE_OR_INPUT = 2
    INTERNAL = 70
    INTERRUPTED = 130
    STDOUT_CLOSED = 141

    @property
    def meaning(self) -> str:
        return _EXIT_CODE_MEANINGS[self]


_EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.CHECK_FAILED: "reserved for `traceq check`: a budget was exceeded",
    ExitCode.USAGE_OR_INPUT: "bad usage, an unreadable or undecodable input, a refused or unwritable output",
    ExitCode.INTERNAL: "internal error: a traceq bug (rerun with --debug and report it)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.STDOUT_CLOSED: "stdout closed early (a pipe into head): stopped quietly, as SIGPIPE would",
}

_LOWERCASE_NAMES = ("traceq", "nsys", "pip", "python", "-")
"""Hints may start with a command name, which keeps its lower case."""


class TraceqError(Exception):
    """Base class: a problem with the user's input or request, explained in one line."""

    exit_code: ExitCode = ExitCode.USAGE_OR_INPUT

    def __init__(self, message: str, *, path: str | Path | None = None, hint: str | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """``<path>: <what is wrong>. <what to do>`` on a single line."""
        text = self.message.rstrip(".")
        if self.path is not None:
            text = f"{self.path}: {text}"
        if self.hint:
            hint = self.hint.rstrip(".")
            if not hint.startswith(_LOWERCASE_NAMES):
                hint = hint[:1].upper() + hint[1:]
            text = f"{text}. {hint}"
        return " ".join(text.split()) + "."


class InputNotFoundError(TraceqError):
    """The path does not exist, or a directory holds no trace files."""


class UnsupportedFormatError(TraceqError):
    """The file is readable but is not a trace format traceq knows."""


class CorruptTraceError(TraceqError):
    """The file looks like a known format but cannot be decoded (truncated gzip, invalid JSON)."""


class UnsupportedVersionError(TraceqError):
    """The trace comes from a producer version whose layout traceq cannot read."""


class EmptyTraceError(TraceqError):
    """The trace holds no events at all."""


class NsysNotFoundError(TraceqError):
    """A ``.nsys-rep`` needs the ``nsys`` binary to be exported to SQLite, and it is not available."""


class ExternalToolError(TraceqError):
    """An external tool (``nsys export``) ran and failed."""


class OutputError(TraceqError):
    """An output is refused (it is one of the inputs, or would be read as one) or cannot be written."""


class OutputExistsError(OutputError):
    """An output file exists and ``--force`` was not given."""


class DuplicateRankError(TraceqError):
    """Two input files claim the same rank."""


class InvalidArgumentError(TraceqError):
    """A parameter value is malformed (a bad regex, an unknown kind, ...)."""


class LimitExceededError(TraceqError):
    """Reading the input would pass one of traceq's documented limits (a gzip file that inflates far
    beyond its size, nesting deeper than the JSON reader follows); the message names the setting
    that raises the limit, where there is one."""


class NotARegularFileError(TraceqError):
    """The input is a FIFO, a device, a socket: something that is not a regular file, which traceq
    does not read unless asked to (it might never end, or never start)."""
