"""Import statistics: what each importer read, what became rows, and what it skipped and why.

The contract ("nothing lost, nothing invented"): for every (source, category) that an importer
reads, ``events == rows + sum(skipped.values())``.  ``category`` is the source's own unit (an nsys
table such as ``CUPTI_ACTIVITY_KIND_KERNEL``, or a Kineto ``cat``/phase such as ``kernel`` or
``ph=M``); skip reasons are short phrases (``metadata``, ``flow``, ``unpaired E``, ...).  ``kind`` is
the event kind the category's rows become (``kernel``, ``cuda_api``, ...; None where its rows
become several kinds or none), so a reader can tell which numbers a skipped row would have fed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

import polars as pl

from traceq.schema import KINDS

SKIP_DUPLICATE: Final = "exact duplicate"
"""The skip reason of a later copy of an event recorded twice (``traceq.importers.duplicates``): a
skip that loses nothing, since the event is a row already."""


@dataclass(frozen=True)
class CategoryCount:
    """Counts for one source category of one file."""

    FIELD_ENUMS: ClassVar[dict[str, tuple[str, ...]]] = {"kind": KINDS}

    source: str
    category: str
    events: int
    rows: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    kind: str | None = None
    """The event kind of the category's rows (:data:`~traceq.schema.KINDS`), None where mixed or none."""

    def __post_init__(self) -> None:
        lost = self.events - self.rows - sum(self.skipped.values())
        if lost != 0:
            raise ValueError(
                f"{self.source}/{self.category}: {self.events} events != {self.rows} rows + "
                f"{sum(self.skipped.values())} skipped (off by {lost})"
            )

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "category": self.category,
            "kind": self.kind,
            "events": self.events,
            "rows": self.rows,
            "skipped": dict(sorted(self.skipped.items())),
        }


@dataclass(frozen=True)
class ImportStats:
    """Per-category counts for one or more source files, in a stable order."""

    counts: tuple[CategoryCount, ...] = ()

    @classmethod
    def of(cls, counts: Iterable[CategoryCount]) -> ImportStats:
        return cls(tuple(sorted(counts, key=lambda c: (c.source, c.category))))

    def __add__(self, other: ImportStats) -> ImportStats:
        return ImportStats.of((*self.counts, *other.counts))

    @property
    def events(self) -> int:
        return sum(c.events for c in self.counts)

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.counts)

    def skipped_of_kinds(self, kinds: Iterable[str]) -> dict[str, dict[str, int]]:
        """Per source: the rows skipped (by reason) in the categories whose rows are of ``kinds``,
        which the table lacks -- not the copies of events recorded twice (:data:`SKIP_DUPLICATE`),
        whose event is a row."""
        wanted = set(kinds)
        out: dict[str, dict[str, int]] = {}
        for c in self.counts:
            lost = {reason: n for reason, n in c.skipped.items() if reason != SKIP_DUPLICATE}
            if c.kind in wanted and lost:
                reasons = out.setdefault(c.source, {})
                for reason, n in lost.items():
                    reasons[reason] = reasons.get(reason, 0) + n
        return out

    def events_of_kinds(self, kinds: Iterable[str]) -> dict[str, int]:
        """Per source: the source events of the categories whose rows are of ``kinds``."""
        wanted = set(kinds)
        out: dict[str, int] = {}
        for c in self.counts:
            if c.kind in wanted:
                out[c.source] = out.get(c.source, 0) + c.events
        return out

    @property
    def skipped(self) -> dict[str, int]:
        """Skipped events by reason, over every category."""
        out: dict[str, int] = {}
        for c in self.counts:
            for reason, n in c.skipped.items():
                out[reason] = out.get(reason, 0) + n
        return dict(sorted(out.items()))

    def to_frame(self) -> pl.DataFrame:
        """Columns: source, category, kind, events, rows, skipped (total), skip_reasons (``reason=n, ...``)."""
        return pl.DataFrame(
            {
                "source": [c.source for c in self.counts],
                "category": [c.category for c in self.counts],
                "kind": [c.kind for c in self.counts],
                "events": [c.events for c in self.counts],
                "rows": [c.rows for c in self.counts],
                "skipped": [sum(c.skipped.values()) for c in self.counts],
                "skip_reasons": [", ".join(f"{k}={v}" for k, v in sorted(c.skipped.items())) for c in self.counts],
            },
            schema={
                "source": pl.String,
                "category": pl.String,
                "kind": pl.String,
                "events": pl.Int64,
                "rows": pl.Int64,
                "skipped": pl.Int64,
                "skip_reasons": pl.String,
            },
        )

    def to_list(self) -> list[dict[str, object]]:
        return [c.to_dict() for c in self.counts]

    @classmethod
    def from_list(cls, items: Iterable[Mapping[str, object]]) -> ImportStats:
        counts = []
        for item in items:
            skipped = item.get("skipped", {})
            assert isinstance(skipped, Mapping)
            counts.append(
                CategoryCount(
                    source=str(item["source"]),
                    category=str(item["category"]),
                    events=int(str(item["events"])),
                    rows=int(str(item["rows"])),
                    skipped={str(k): int(v) for k, v in skipped.items()},
                    kind=None if item.get("kind") is None else str(item["kind"]),
                )
            )
        return cls.of(counts)
