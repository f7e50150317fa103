"""WAL-mode exports: the transactions an export's ``-wal`` file holds that its database file lacks.

An export is read through an ``immutable=1`` URI (:func:`~traceq.importers.nsys.export_db.sqlite_uri`),
so that SQLite writes nothing: no journal, no lock, no ``-shm``.  An immutable connection reads only
the database file, though, and a database in WAL mode keeps its latest transactions in
``<file>-wal`` until a checkpoint copies them in: a copy taken while the writer was running, or
left by a writer that died, holds frames the database file does not.  Reading such a file without
``immutable`` would not do either: SQLite then creates or updates ``<file>-shm`` (and, for a writable
directory, may checkpoint), which changes the input's directory.

So :func:`checkpointed_copy` copies the database and its ``-wal`` (reading both, writing nothing
beside them) into a private temporary directory, checkpoints the copy there (SQLite applies the
committed frames and ignores the others, as any reader of the original would) and hands back the
copy to read as usual.  Only a database whose header says WAL mode and that has a non-empty
``-wal`` pays for the copy (:func:`has_wal_frames`); an export ``nsys`` finished writing has none.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Final

_HEADER_BYTES: Final = 20
_WAL_VERSION: Final = 2
"""The header's file-format read/write versions (bytes 18 and 19): 1 legacy, 2 WAL."""


def has_wal_frames(path: Path) -> bool:
    """Whether ``path`` is a WAL-mode database with a non-empty ``-wal`` beside it."""
    try:
        with path.open("rb") as fh:
            header = fh.read(_HEADER_BYTES)
        wal = Path(f"{path}-wal")
        in_wal_mode = len(header) == _HEADER_BYTES and _WAL_VERSION in header[18:20]
        return in_wal_mode and wal.is_file() and wal.stat().st_size > 0
    except OSError:
        return False


class CheckpointedCopy:
    """A private, checkpointed copy of a WAL-mode database (see the module docstring); :meth:`close`
    removes it."""

    def __init__(self, path: Path) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="traceq-wal-")
        try:
            self.path = Path(self._folder.name) / "export.sqlite"
            shutil.copyfile(path, self.path)
            shutil.copyfile(f"{path}-wal", f"{self.path}-wal")
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                # Back to a rollback journal: SQLite checkpoints the committed frames into the
                # copy and removes its -wal, so that the copy reads whole through immutable=1.
                conn.execute("PRAGMA journal_mode=DELETE").fetchall()
            finally:
                conn.close()
        except BaseException:
            self._folder.cleanup()
            raise

    def close(self) -> None:
        self._folder.cleanup()


def checkpointed_copy(path: Path) -> CheckpointedCopy | None:
    """A checkpointed copy of ``path`` when it has WAL frames (:func:`has_wal_frames`), else None.
    Raises ``sqlite3.DatabaseError`` (and ``OSError``) as SQLite and the copy do."""
    return CheckpointedCopy(path) if has_wal_frames(path) else None
