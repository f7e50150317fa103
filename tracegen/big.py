"""Large synthetic traces for benchmarks: millions of rows in seconds, by replication.

Simulating and writing every step of a ten-million-row trace row by row takes minutes; these
helpers simulate a few steps once and repeat them at time offsets instead:

* :func:`big_events` returns the event table (``Timeline.events("nsys")``) of a job long enough
  to hold ``gpu_activities`` kernels, memcpys and memsets; the tiling is vectorised polars;
* :func:`write_big_nsys_sqlite` writes a small nsys export of ``base_steps`` steps, then copies
  its event rows inside SQLite (``INSERT ... SELECT`` with time, correlation-id and step-number
  offsets) until the file holds ``activity_rows`` kernel + API + memcpy rows.

The result is a valid export whose steps repeat the base's steps; keep such files outside the
repository (they are hundreds of megabytes).
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Final

import polars as pl

from tracegen.nsys.writer import write_nsys_sqlite
from tracegen.scenario import Scenario
from tracegen.simulator.job import build_timeline
from tracegen.timeline import Timeline

DEFAULT_LAYERS: Final = 32
"""About a thousand GPU activities and eleven hundred API calls per step and rank."""

_ACTIVITY_TABLES: Final = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY")
_EVENT_TABLES: Final = (
    *_ACTIVITY_TABLES,
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
)
_STEP_PREFIX: Final = "ProfilerStep#"
_GPU_KINDS: Final = ("kernel", "memcpy", "memset")


def big_scenario(steps: int, *, ranks: int = 1, layers: int = DEFAULT_LAYERS) -> Scenario:
    """The benchmark job: ``steps`` steps cycling through two simulated step templates."""
    return Scenario("big", steps=steps, distinct_steps=2, layers=layers, ranks=ranks, world_size=max(ranks, 8))


def _gpu_rows_per_step(ranks: int, layers: int) -> float:
    probe = build_timeline(big_scenario(2, ranks=ranks, layers=layers))
    counts = [sum(1 for e in events if e.kind in _GPU_KINDS) for t in probe.templates for events in t.events]
    return sum(counts) / len(probe.templates)


def big_events(gpu_activities: int, *, ranks: int = 1, layers: int = DEFAULT_LAYERS) -> pl.DataFrame:
    """An nsys-view event table with at least ``gpu_activities`` GPU activity rows (all ranks)."""
    steps = max(2, math.ceil(gpu_activities / _gpu_rows_per_step(ranks, layers)))
    return build_timeline(big_scenario(steps, ranks=ranks, layers=layers)).events("nsys", source="big.sqlite")


def write_big_nsys_sqlite(
    path: str | Path,
    activity_rows: int,
    *,
    base_steps: int = 8,
    ranks: int = 1,
    layers: int = DEFAULT_LAYERS,
) -> Path:
    """An nsys export at ``path`` with at least ``activity_rows`` kernel + API + memcpy rows.

    ``base_steps`` steps are simulated and written, then repeated as often as needed.
    """
    if base_steps < 2:
        raise ValueError("base_steps must be at least 2")
    timeline = build_timeline(big_scenario(base_steps, ranks=ranks, layers=layers))
    out = write_nsys_sqlite(timeline, path, vacuum=False)
    conn = sqlite3.connect(out)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        base_rows = sum(_count(conn, t) for t in _ACTIVITY_TABLES)
        copies = max(1, math.ceil(activity_rows / base_rows))
        if copies > 1:
            _replicate(conn, timeline, copies, base_steps)
        conn.commit()
    finally:
        conn.close()
    return out


def _count(conn: sqlite3.Connection, table: str) -> int:
    (n,) = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
    return int(n)


def _span_ns(timeline: Timeline) -> int:
    first, last = timeline.instances[0], timeline.instances[-1]
    return last.offset_ns + timeline.templates[last.template].period_ns - first.offset_ns


def _replicate(conn: sqlite3.Connection, timeline: Timeline, copies: int, base_steps: int) -> None:
    """Append copies 1 .. copies-1 of every event table's rows, each shifted past the previous."""
    (lo, hi) = conn.execute("SELECT MIN(correlationId), MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    corr_shift = int(hi) - int(lo) + 1
    span = _span_ns(timeline)
    conn.execute(
        "CREATE TEMP TABLE copy_index AS WITH RECURSIVE k(i) AS "
        f"(SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {copies - 1}) SELECT i FROM k"
    )
    for table in _EVENT_TABLES:
        columns = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall()]
        if not columns:
            continue
        exprs = []
        for col in columns:
            if col in ("start", "end"):
                exprs.append(f'b."{col}" + k.i * {span}')
            elif col == "correlationId":
                exprs.append(f"b.correlationId + k.i * {corr_shift}")
            elif col == "text" and table == "NVTX_EVENTS":
                exprs.append(
                    f"CASE WHEN b.text LIKE '{_STEP_PREFIX}%' THEN '{_STEP_PREFIX}' || "
                    f"(CAST(substr(b.text, {len(_STEP_PREFIX) + 1}) AS INTEGER) + k.i * {base_steps}) ELSE b.text END"
                )
            else:
                exprs.append(f'b."{col}"')
        conn.execute(f'CREATE TEMP TABLE base AS SELECT * FROM "{table}"')
        quoted = ", ".join(f'"{c}"' for c in columns)
        conn.execute(
            f'INSERT INTO "{table}" ({quoted}) SELECT {", ".join(exprs)} FROM copy_index AS k CROSS JOIN base AS b'
        )
        conn.execute("DROP TABLE base")
    conn.execute("DROP TABLE copy_index")
