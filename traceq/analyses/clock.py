"""Clock alignment of a job's sources: one offset per source file, never a rewritten event table.

Every rank's trace has its own clock.  :func:`align_clocks` finds, per source, the ns to add to its
times to put them on the clock of a *reference* source (the one holding the lowest rank), by the
first method that applies:

1. ``single_clock``: every rank that communicates comes from one source (an nsys export of several
   processes): one clock already, every offset 0.
2. ``anchor``: every such source states its own epoch anchor (``SourceMeta.clock_offset_ns``: Kineto
   ``baseTimeNanoseconds``, nsys ``TARGET_INFO_SESSION_START_TIME``); the offset is the difference
   of the anchors, ``anchor(source) − anchor(reference)``.
3. ``collective_end``: collectives end together on every rank.  Take the first collective that
   every rank shares (the earliest on the reference rank's clock) and align its ends: the offset of
   a source is ``end on the reference rank − end on the source's first rank``.
4. ``none``: no anchor everywhere and no collective every rank shares: the clocks stay apart and
   the collectives are not compared.

The *residual skew* (:func:`residual_skew_ns`) is the median, over collectives matched on at least
two ranks, of the spread of their end times after alignment: what alignment leaves over (zero on
the aligning collective of ``collective_end``, clock error plus true end jitter elsewhere).

Inputs are the *calls* frame of :func:`traceq.analyses.collectives.collective_calls`: one row per
communication kernel with ``dev``, ``source``, ``kind``, ``channel``, ``seq`` (the match key is
``(kind, channel, seq)``), ``start_ns`` and ``end_ns`` on the source's own clock.
Definitions: ``docs/multi-rank.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import polars as pl

from traceq.analyses.job_model import ClockAlignment

MATCH_KEY: Final = ("kind", "channel", "seq")
"""Calls with equal values here, on different ranks, are one collective."""


def align_clocks(calls: pl.DataFrame, anchors: Mapping[str, int | None] | None = None) -> ClockAlignment:
    """Per-source offsets that put every communicating rank on the reference clock.

    ``calls``: the calls frame (see the module docstring); ``anchors``: each source's
    ``clock_offset_ns`` by path (None, or a source missing from it: no anchor known).
    The alignment's ``residual_skew_ns`` is filled in here from ``calls``.
    """
    devs = calls.select("dev", "source").unique().sort("dev")
    if devs.height == 0:
        return ClockAlignment("none", None, {}, None, "no communication kernels: nothing to align")
    sources = list(dict.fromkeys(devs.get_column("source").to_list()))
    reference = sources[0]
    known = dict(anchors or {})
    if len(sources) == 1:
        method, offsets = "single_clock", {reference: 0}
        note = "one source file: its ranks share one clock"
    elif all(known.get(s) is not None for s in sources):
        base = known[reference]
        assert base is not None
        offsets = {s: int(known[s] or 0) - base for s in sources}
        method, note = (
            "anchor",
            "aligned by the traces' own clock anchors (Kineto baseTimeNanoseconds, nsys session start)",
        )
    else:
        found = _collective_end_offsets(calls, devs)
        if found is None:
            missing = ", ".join(s for s in sources if known.get(s) is None)
            return ClockAlignment(
                "none",
                reference,
                {},
                None,
                f"not aligned: no clock anchor in {missing} and no collective that every rank shares; "
                "collectives across ranks are not compared",
            )
        offsets, key = found
        method = "collective_end"
        note = (
            f"aligned by the end of the first collective every rank shares ({key}); "
            "not every source states a clock anchor"
        )
    alignment = ClockAlignment(method, reference, offsets, None, note)
    residual = residual_skew_ns(calls, alignment)
    return ClockAlignment(method, reference, offsets, residual, note)


def _collective_end_offsets(calls: pl.DataFrame, devs: pl.DataFrame) -> tuple[dict[str, int], str] | None:
    """Offsets from the first collective every rank shares, and a description of it (None: there is none)."""
    n_devs = devs.height
    shared = calls.group_by(MATCH_KEY).agg(pl.col("dev").n_unique().alias("_n")).filter(pl.col("_n") == n_devs)
    if shared.height == 0:
        return None
    ref_dev = devs.get_column("dev")[0]
    on_ref = (
        calls.filter(pl.col("dev") == ref_dev)
        .join(shared.select(MATCH_KEY), on=MATCH_KEY, how="semi")
        .sort("start_ns", "end_ns", *MATCH_KEY)
    )
    first = on_ref.row(0, named=True)
    key = {k: first[k] for k in MATCH_KEY}
    # The first rank of each source stands for the source (ranks in one file share its clock).
    leaders = devs.group_by("source").agg(pl.col("dev").min())
    ends = (
        calls.filter(pl.all_horizontal(pl.col(k) == v for k, v in key.items()))
        .join(leaders, on=["source", "dev"], how="semi")
        .select("source", "end_ns")
    )
    ref_end = int(first["end_ns"])
    offsets = {str(s): ref_end - int(e) for s, e in ends.iter_rows()}
    return offsets, f"{key['kind']} #{key['seq']} on {key['channel']}"


def aligned(calls: pl.DataFrame, alignment: ClockAlignment) -> pl.DataFrame:
    """``calls`` plus ``aligned_start_ns`` and ``aligned_end_ns`` (the times on the reference clock);
    rows of sources without an offset are dropped."""
    offsets = pl.DataFrame(
        {"source": list(alignment.offsets_ns), "_offset": list(alignment.offsets_ns.values())},
        schema={"source": pl.String, "_offset": pl.Int64},
    )
    return (
        calls.join(offsets, on="source", how="inner")
        .with_columns(
            (pl.col("start_ns") + pl.col("_offset")).alias("aligned_start_ns"),
            (pl.col("end_ns") + pl.col("_offset")).alias("aligned_end_ns"),
        )
        .drop("_offset")
    )


def residual_skew_ns(calls: pl.DataFrame, alignment: ClockAlignment) -> int | None:
    """Median over collectives matched on ≥ 2 ranks of (latest − earliest end) on the aligned clock,
    floored to an int; None when there is no such collective or no alignment."""
    if not alignment.offsets_ns:
        return None
    spreads = (
        aligned(calls, alignment)
        .group_by(MATCH_KEY)
        .agg(
            pl.col("dev").n_unique().alias("_n"),
            (pl.col("aligned_end_ns").max() - pl.col("aligned_end_ns").min()).alias("_spread"),
        )
        .filter(pl.col("_n") >= 2)
        .get_column("_spread")
    )
    if spreads.len() == 0:
        return None
    median = spreads.median()
    assert isinstance(median, int | float)
    return int(median)
