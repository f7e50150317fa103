"""Types of the compiled SQLite reader (``_column_reader.c``); see :mod:`traceq.importers.nsys.export_db`."""

from collections.abc import Sequence
from typing import Final

from typing_extensions import Buffer

FUNCTIONS: Final[tuple[str, ...]]
"""The SQLite C functions whose addresses :class:`Connection` takes, in that order."""

Column = tuple[Buffer, Buffer | None, int]
"""A result column: int64 values, Arrow validity bitmap (None where it has no NULL), null count."""

class SQLiteError(Exception):
    """SQLite failed (the message is ``sqlite3_errmsg``'s)."""

class Connection:
    """One read-only connection (``SQLITE_OPEN_READONLY | SQLITE_OPEN_URI``), for one thread at a time."""

    def __init__(self, uri: str, functions: Sequence[int]) -> None: ...
    def read(self, sql: str, rows_hint: int = 0, /) -> tuple[int, list[Column]] | str:
        """``(rows, columns)``, or the reason to decline (a value that is not an integer or NULL)."""

    def close(self) -> None: ...

def trim() -> None:
    """Free the buffers kept for the next read (call once an export is read)."""
