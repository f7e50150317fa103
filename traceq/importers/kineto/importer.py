"""The Kineto importer's entry point: :func:`read_kineto`, which ties the stages together.

The stages are the modules of :mod:`traceq.importers.kineto` (its docstring lists them in order);
this module runs them, falls back from the fast parser to the lenient one, and owns the errors the
user sees.  ``docs/importers-kineto.md`` describes what is read per PyTorch era and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import polars as pl

from traceq.errors import EmptyTraceError, UnsupportedFormatError
from traceq.importers.duplicates import count_duplicates, drop_exact_duplicates
from traceq.importers.event_rows import EventRows
from traceq.importers.kineto.compact import FlowSplit
from traceq.importers.kineto.fast_parser import parse_fast
from traceq.importers.kineto.lenient_parser import parse_lenient
from traceq.importers.kineto.meta import build_meta, distributed_int, event_facts
from traceq.importers.kineto.normalise import normalise
from traceq.importers.kineto.raw_frame import ParsedTrace
from traceq.importers.kineto.scanner import FastPathDeclined
from traceq.importers.kineto.trace_bytes import InflatedPastHint, Inflating, Raw, open_trace, read_trace_bytes
from traceq.importers.result import ImportResult
from traceq.read_progress import FileReading
from traceq.stats import CategoryCount, ImportStats

Parser = Literal["auto", "fast", "lenient"]


def read_kineto(path: Path, *, parser: Parser = "auto", max_inflate_ratio: float | None = None) -> ImportResult:
    """Import one ``.json`` or ``.json.gz`` Chrome trace (gzip is detected from the content).

    Returns the event table (columns of :mod:`traceq.schema`, sorted by ``start_ns`` then
    ``end_ns``, times in ns on the trace's own clock), per-category stats and the file's meta.
    ``parser`` forces one of the two parsers (for tests and benchmarks): ``"fast"`` raises
    :class:`~traceq.errors.UnsupportedFormatError` where ``"auto"`` would fall back.
    ``max_inflate_ratio`` bounds what a gzip file may inflate to
    (:func:`~traceq.importers.kineto.trace_bytes.inflate_limit`; default ``$TRACEQ_MAX_INFLATE_RATIO``
    or 100 times its size): more is refused with :class:`~traceq.errors.LimitExceededError`.
    """
    path = Path(path)
    reading = FileReading.of(path)
    parsed, flows = _parse(path, parser, max_inflate_ratio, reading)
    reading.finish()  # the lenient parser reads the file whole; a fast pass's share may fall short
    events, total = parsed.events, parsed.events.height + flows.height + parsed.non_objects
    if total == 0:
        raise EmptyTraceError(
            "the trace holds no events", path=path, hint="the profiler recorded nothing; profile again"
        )
    if flows.is_empty() and events.height and events["ph"].null_count() == events.height:
        raise UnsupportedFormatError(
            "no event has a 'ph' (phase) field, so this is not a Chrome trace",
            path=path,
            hint="traceq reads PyTorch profiler / Chrome-trace JSON",
        )
    facts = event_facts(events, flows)
    top, container, parser_used, non_objects = parsed.top, parsed.container, parsed.parser, parsed.non_objects
    warnings = parsed.warnings
    # From here on `events` is the only reference to the event frame, so that it can be let go
    # once the rows are made: the sorted copy of the rows should not coexist with it.
    del parsed
    result = normalise(events, flows, source=str(path), rank=distributed_int(top, "rank"), non_objects=non_objects)
    del events, flows
    counts, rows, warnings = result.counts, result.rows, warnings + result.warnings
    del result
    if rows.height == 0:
        raise EmptyTraceError(
            f"none of the {total} events is a timed event (all metadata, flows or unsupported phases)",
            path=path,
            hint="the trace holds no activity to analyse; profile again",
        )
    event_rows = EventRows()
    event_rows.add(_in_file_order(rows))
    table, dropped = drop_exact_duplicates(event_rows.sorted_table())
    counts = count_duplicates(counts, _by_stats_category(dropped, counts))
    meta = build_meta(path, top, facts, table, container=container, parser=parser_used, warnings=warnings)
    return ImportResult(frame=table, stats=ImportStats.of(counts), meta=meta)


def _by_stats_category(dropped: pl.DataFrame, counts: Sequence[CategoryCount]) -> dict[str, int]:
    """The duplicates dropped per stats category: their ``cat``, or for events without one the
    ``ph=<phase>`` category their kind allows (instants ``i``/``I``, others ``X``/``B``), the first
    of those that has the rows."""
    out: dict[str, int] = {}
    rows = {c.category: c.rows for c in counts}
    tally = dropped.group_by("category", "kind").len()
    for category, kind, n in tally.iter_rows():
        if category is None:
            phases = ("ph=i", "ph=I") if kind == "instant" else ("ph=X", "ph=B")
            category = next((c for c in phases if rows.get(c, 0) - out.get(c, 0) >= n), phases[0])
        out[str(category)] = out.get(str(category), 0) + n
    return out


def _in_file_order(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` in file order (``idx``), without ``idx``; empties ``rows``.

    In file order, so that the stable sort on the times keeps it on ties.  The columns are moved
    out of ``rows`` into the frame returned, which the caller hands on as the only reference, so
    that the sort frees each unsorted column as soon as its sorted copy is made (the sorted table
    is not built beside the whole unsorted one).
    """
    if not rows["idx"].is_sorted():
        rows = rows.sort("idx")
    rows.drop_in_place("idx")
    return pl.DataFrame([rows.drop_in_place(name) for name in list(rows.columns)])


def _parse(path: Path, parser: Parser, ratio: float | None, reading: FileReading) -> tuple[ParsedTrace, pl.DataFrame]:
    """The compacted events and, apart, the flow events (:class:`FlowSplit`) of the parser that read the file."""
    if parser == "lenient":
        return _lenient(path, open_trace(path, max_inflate_ratio=ratio), ratio)
    source = open_trace(path, max_inflate_ratio=ratio)
    try:
        try:
            split = FlowSplit()
            return parse_fast(source, split, reading), split.flows()
        except InflatedPastHint:  # a gzip stream longer than its trailer said: parse it whole
            source = read_trace_bytes(path, max_inflate_ratio=ratio)
            split = FlowSplit()
            return parse_fast(source, split, reading), split.flows()
    except FastPathDeclined as declined:
        if parser == "fast":
            raise UnsupportedFormatError(
                f"the fast JSON path declined the file ({declined.reason})", path=path, hint="use parser='auto'"
            ) from declined
        reason = declined.reason
    lenient, flows = _lenient(path, source, ratio)
    note = f"the fast JSON path declined the file ({reason}); it was read with the slower lenient parser"
    return ParsedTrace(
        lenient.events, lenient.top, lenient.container, lenient.parser, lenient.non_objects, (note, *lenient.warnings)
    ), flows


def _lenient(path: Path, source: Raw | Inflating, ratio: float | None) -> tuple[ParsedTrace, pl.DataFrame]:
    """The lenient parser over the file's bytes: a gzip file is inflated again where the fast path
    gave some of its inflated pages back."""
    if isinstance(source, Inflating) and source.released:
        source = open_trace(path, max_inflate_ratio=ratio)
    split = FlowSplit()
    if not isinstance(source, Inflating):
        return parse_lenient(source, path, split), split.flows()
    parsed = parse_lenient(source.whole(), path, split)
    squeezed = source.squeeze_warnings()
    if not squeezed:
        return parsed, split.flows()
    return ParsedTrace(
        parsed.events, parsed.top, parsed.container, parsed.parser, parsed.non_objects, parsed.warnings + squeezed
    ), split.flows()


__all__ = ["Parser", "read_kineto"]
