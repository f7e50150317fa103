"""What the HTML report's last sections show: the import statistics per source and category, and
each source file's metadata, warnings and properties, as data for
``templates/sections/import.html.j2`` and ``sources.html.j2``.

Every string here is plain text: the templates escape it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from traceq.meta import GpuInfo, SourceMeta
from traceq.report.html.tables import Cell, Column, Row, Table, num, row, table
from traceq.report.model import Report
from traceq.stats import CategoryCount

IMPORT_ROWS: Final = 16
"""Above this many (source, category) rows, the import table shows one row per file and folds the rest."""


@dataclass(frozen=True)
class ImportStatsView:
    """The import statistics (``None``: none recorded) and, where the table folds them, the rows
    per category."""

    table: Table | None
    per_category: Table | None


@dataclass(frozen=True)
class SourceProperties:
    """The properties one file states, as a table of keys and values."""

    path: str
    table: Table


@dataclass(frozen=True)
class Sources:
    """One row per source file (``None``: no files), every warning as (path, warning), and each
    file's properties."""

    table: Table | None
    warnings: tuple[tuple[str, str], ...]
    properties: tuple[SourceProperties, ...]


_COUNT_COLUMNS: Final = (
    Column("source"),
    Column("category"),
    Column("events", num=True),
    Column("rows", num=True),
    Column("skipped", num=True),
    Column("skipped by reason"),
)


def import_stats(report: Report) -> ImportStatsView:
    counts = report.source.import_stats
    if not counts:
        return ImportStatsView(None, None)
    rows = [_count_row(c.source, c.category, [c]) for c in counts]
    by_source: dict[str, list[CategoryCount]] = {}
    for c in counts:
        by_source.setdefault(c.source, []).append(c)
    total = _count_row("total", "", counts, cls="total")
    if len(rows) <= IMPORT_ROWS or len(by_source) < 2:
        return ImportStatsView(table(_COUNT_COLUMNS, [*rows, total]), None)
    summary = [_count_row(src, f"{len(cs)} categories", cs) for src, cs in by_source.items()]
    return ImportStatsView(table(_COUNT_COLUMNS, [*summary, total]), table(_COUNT_COLUMNS, rows))


def _count_row(source: str, category: str, counts: Sequence[CategoryCount], *, cls: str = "") -> Row:
    skipped: dict[str, int] = {}
    for c in counts:
        for reason, n in c.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
    name = "" if cls else "name"
    return row(
        Cell(source, cls=name),
        Cell(category, cls=name),
        num(f"{sum(c.events for c in counts):,}"),
        num(f"{sum(c.rows for c in counts):,}"),
        num(f"{sum(skipped.values()):,}"),
        Cell(", ".join(f"{k}: {v:,}" for k, v in sorted(skipped.items()))),
        cls=cls,
    )


def gpu_summary(gpus: Sequence[GpuInfo]) -> str:
    """A file's GPUs, grouped: ``8 × NVIDIA H100 80GB HBM3 (132 SMs, 79.2 GiB, sm 9.0)``."""
    groups: dict[str, int] = {}
    for g in gpus:
        details = [
            f"{g.sm_count} SMs" if g.sm_count is not None else "",
            f"{g.memory_bytes / 2**30:.1f} GiB" if g.memory_bytes is not None else "",
            f"sm {g.compute_capability}" if g.compute_capability else "",
        ]
        extra = ", ".join(x for x in details if x)
        key = (g.name or "unnamed GPU") + (f" ({extra})" if extra else "")
        groups[key] = groups.get(key, 0) + 1
    return "; ".join(f"{n} × {key}" for key, n in groups.items()) or "-"


def sources(files: Sequence[SourceMeta]) -> Sources:
    if not files:
        return Sources(None, (), ())
    rows = [
        row(
            Cell(s.path, cls="name"),
            Cell(s.format),
            Cell(s.format_version or "-"),
            Cell(s.producer or "-"),
            num(str(s.rank) if s.rank is not None else "-"),
            num(str(s.world_size) if s.world_size is not None else "-"),
            Cell(gpu_summary(s.gpus)),
            num(str(len(s.warnings)), cls="hi" if s.warnings else ""),
        )
        for s in files
    ]
    columns = (
        Column("file"),
        Column("format"),
        Column("version"),
        Column("producer"),
        Column("rank", num=True),
        Column("world size", num=True),
        Column("GPUs"),
        Column("warnings", num=True),
    )
    properties = []
    for s in files:
        props = [row(Cell(k, cls="name"), Cell(v, cls="name")) for k, v in sorted(s.properties.items())]
        if s.clock_offset_ns is not None:
            props.insert(0, row(Cell("clock offset (ns to Unix epoch)"), Cell(f"{s.clock_offset_ns:,}")))
        if props:
            properties.append(SourceProperties(s.path, table((Column("key"), Column("value")), props)))
    return Sources(
        table=table(columns, rows),
        warnings=tuple((s.path, w) for s in files for w in s.warnings),
        properties=tuple(properties),
    )
