"""The one error hierarchy of traceq.

Every failure a user can cause (a missing file, a truncated gzip, an SQLite file that is not an
nsys export, ...) is raised as a subclass of :class:`TraceqError`. The CLI translates these once,
at its edge, into a single line on stderr and a non-zero exit code; tracebacks are shown only with
``--debug``.  A message always names the file and says what to do about it.
"""

from __future__ import annotations

from pathlib import Path

_LOWERCASE_NAMES = ("traceq", "nsys", "pip", "python", "-")
"""Hints may start with a command name, which keeps its lower case."""


class TraceqError(Exception):
    """Base class: a problem with the user's input or request, explained in one line."""

    exit_code: int = 2

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


class OutputExistsError(TraceqError):
    """An output file exists and ``--force`` was not given."""


class DuplicateRankError(TraceqError):
    """Two input files claim the same rank."""


class InvalidArgumentError(TraceqError):
    """A parameter value is malformed (a bad regex, an unknown kind, ...)."""
