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

    Every error prints one ``traceq: error:`` line naming the file; the status says whose move it
    is, in the numbers of BSD's sysexits.h where one fits: 2 the command line (click's usage errors
    and malformed option values), 65 an input traceq cannot read (missing, not a trace, damaged, an
    unsupported version, empty, past a limit), 69 a tool traceq needs (``nsys``) missing or failing,
    73 an output refused or not writable; 70 (EX_SOFTWARE) is only ever a traceq bug.  130 and 141
    are what a shell reports for a process that SIGINT or SIGPIPE ended: traceq exits with them
    itself, having cleaned up.  1 is ``traceq check``'s alone: a budget exceeded.
    """

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    BAD_INPUT = 65
    TOOL_UNAVAILABLE = 69
    INTERNAL = 70
    OUTPUT_REFUSED = 73
    INTERRUPTED = 130
    STDOUT_CLOSED = 141

    @property
    def meaning(self) -> str:
        return _EXIT_CODE_MEANINGS[self]


_EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.CHECK_FAILED: "`traceq check` only: a budget was exceeded",
    ExitCode.USAGE: "bad usage: an unknown option, a malformed option value",
    ExitCode.BAD_INPUT: "an input cannot be read: missing, not a trace, damaged, unsupported, empty, past a limit",
    ExitCode.TOOL_UNAVAILABLE: "a tool traceq needs is missing or failed (nsys, to export a .nsys-rep)",
    ExitCode.INTERNAL: "internal error: a traceq bug (rerun with --debug and report it)",
    ExitCode.OUTPUT_REFUSED: "an output is refused (it exists, it is an input) or cannot be written",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.STDOUT_CLOSED: "stdout closed early (a pipe into head): stopped quietly, as SIGPIPE would",
}

_LOWERCASE_NAMES = ("traceq", "nsys", "pip", "python", "-")
"""Hints may start with a command name, which keeps its lower case."""


class TraceqError(Exception):
    """Base class: a problem with the user's input or request, explained in one line."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

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

    exit_code = ExitCode.TOOL_UNAVAILABLE


class ExternalToolError(TraceqError):
    """An external tool (``nsys export``) ran and failed."""

    exit_code = ExitCode.TOOL_UNAVAILABLE


class OutputError(TraceqError):
    """An output is refused (it is one of the inputs, or would be read as one) or cannot be written."""

    exit_code = ExitCode.OUTPUT_REFUSED


class OutputExistsError(OutputError):
    """An output file exists and ``--force`` was not given."""


class DuplicateRankError(TraceqError):
    """Two input files claim the same rank."""


class InvalidArgumentError(TraceqError):
    """A parameter value is malformed (a bad regex, an unknown kind, ...)."""

    exit_code = ExitCode.USAGE


class LimitExceededError(TraceqError):
    """Reading the input would pass one of traceq's documented limits (a gzip file that inflates far
    beyond its size, nesting deeper than the JSON reader follows); the message names the setting
    that raises the limit, where there is one."""


class NotARegularFileError(TraceqError):
    """The input is a FIFO, a device, a socket: something that is not a regular file, which traceq
    does not read unless asked to (it might never end, or never start)."""
