"""Write a synthetic :class:`~tracegen.timeline.Timeline` as an Nsight Systems SQLite export.

The file mirrors what ``nsys export --type sqlite`` 2026.2 writes (schema 3.25.0): the tables
of :mod:`tracegen.nsys.ddl`, the activity rows of :mod:`tracegen.nsys.activity` and the
capture's description from :mod:`tracegen.nsys.target_info`.  Tables the synthetic job has no
rows for are not created (the exporter is lazy too).

Determinism: same timeline, same bytes.  Rows are inserted in a stable order, the page size is
fixed, the file is VACUUMed, no timestamp of "now" is written (the export time is derived from
the capture), and the library-version field of the SQLite header is pinned to the value real
2026.x exports carry, so the bytes do not depend on the local SQLite build.

One file per node by default (every rank's process in one export, like a multi-GPU capture of
``torchrun``); :func:`write_nsys_per_rank` writes one export per rank instead, each saying its
rank in ``META_DATA_CAPTURE`` environment variables.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tracegen.nsys.activity import write_activity
from tracegen.nsys.ddl import DDL
from tracegen.nsys.ids import StringTable
from tracegen.nsys.target_info import write_target_info
from tracegen.timeline import Timeline

_SQLITE_VERSION_IN_HEADER: Final = 3_046_000


def write_nsys_sqlite(
    timeline: Timeline, path: str | Path, *, ranks: Sequence[int] | None = None, vacuum: bool = True
) -> Path:
    """Write ``timeline`` as an nsys SQLite export at ``path`` (replaced if it exists; its folder is
    created if needed).

    ``ranks`` selects the processes written (default: all, one file for the node).  ``vacuum``
    compacts the file at the end; turn it off for very large benchmark exports.
    Returns the path.
    """
    out = Path(path)
    procs = timeline.processes if ranks is None else tuple(timeline.processes[r] for r in ranks)
    if not procs:
        raise ValueError("no ranks to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in (out, out.with_name(out.name + "-journal")):
        stale.unlink(missing_ok=True)
    conn = sqlite3.connect(out)
    try:
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(";\n".join(DDL.values()) + ";\n")
        strings = StringTable()
        write_activity(conn, timeline, procs, strings)
        write_target_info(conn, timeline, procs, strings, out)
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.rows())
        conn.commit()
        if vacuum:
            conn.execute("VACUUM")
    finally:
        conn.close()
    _pin_header_version(out)
    return out


def write_nsys_per_rank(
    timeline: Timeline, directory: str | Path, *, pattern: str = "rank{rank}.nsys.sqlite", vacuum: bool = True
) -> tuple[Path, ...]:
    """One export per rank in ``directory`` (created if needed), named by ``pattern``."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(
        write_nsys_sqlite(timeline, folder / pattern.format(rank=p.rank), ranks=(p.rank,), vacuum=vacuum)
        for p in timeline.processes
    )


def _pin_header_version(path: Path) -> None:
    """Set the "SQLite version that last wrote the file" header field to a fixed value."""
    with path.open("r+b") as fh:
        header = fh.read(100)
        if header[92:96] != header[24:28]:  # version-valid-for must match the change counter
            raise RuntimeError(f"{path}: unexpected SQLite header after writing")
        fh.seek(96)
        fh.write(struct.pack(">I", _SQLITE_VERSION_IN_HEADER))
