"""Who is a straggler, and why it is late: the arrival-order test, the wait-magnitude test, and the
slow rank's own host state.  Definitions and thresholds: ``docs/multi-rank.md`` ("Per rank").

A rank R that communicates is a **straggler** when it is late far beyond chance and something of
its own makes it late:

* **late beyond chance**, by either test:

  - *arrival order*: the Chernoff bound on arriving last at least ``last_arrivals`` times by chance
    is at most :data:`CHANCE_LEVEL` / the ranks compared (many collectives: eight of eight between
    two ranks, five of five among four);
  - *wait magnitude*: R is last at **every** one of its collectives with arrival skew, at least
    :data:`MAGNITUDE_MIN_COLLECTIVES` of them (one per step over three steps is enough), and the
    others lose at least :data:`MAGNITUDE_SHARE` of their step time waiting for it.  Chance orders
    the arrivals of a balanced job with waits of the size of its jitter, not a quarter of a step;
    and being last every time is itself at most 1/8 likely by chance (2 ranks, 3 collectives).

* **its own doing**: its GPU computes more per step than the median of the other ranks, or its
  *host* keeps its GPU idle longer: its steady idle in host causes (``cpu``, ``input``, ``sync``,
  ``compile``: the host busy elsewhere, in its data loader, blocked in a sync, compiling) exceeds
  the others' median by at least :data:`HOST_LATE_SHARE` of the wait it causes them per step.

Why a rank is late (``late_because``) is the largest of its excesses over the others' medians, per
step: compute (``compute``: its GPU computes longer) or one host cause, ``cpu`` split into
``pause`` (one stretch of cpu idle of at least :data:`PAUSE_MIN_NS` holding at least
:data:`PAUSE_SHARE` of the excess: a garbage-collection-like pause) and ``cpu`` (CPU-bound: the
excess spread over many stretches); ``unknown`` when nothing of its own exceeds the others'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import polars as pl

from traceq.analyses.job_model import RankSummary
from traceq.units import format_ns

CHANCE_LEVEL: Final = 0.01
"""A rank arrives last "far more often than chance" when the Chernoff bound on doing so by chance is
at most this, divided by the number of ranks compared (Bonferroni)."""

MAGNITUDE_MIN_COLLECTIVES: Final = 3
"""The wait-magnitude test needs a rank last at every one of at least this many collectives."""

MAGNITUDE_SHARE: Final = 0.25
"""... and the others losing at least this share of their step time waiting for it."""

HOST_LATE_SHARE: Final = 0.5
"""A rank's host makes it late when its extra host-caused idle per step is at least this share of
the wait it causes the others per step."""

PAUSE_MIN_NS: Final = 1_000_000
"""A cpu-idle stretch from this long (1 ms) can be a pause (garbage collection, a blocking call)."""

PAUSE_SHARE: Final = 0.5
"""A cpu excess is a pause when one stretch holds at least this share of it."""

HOST_CAUSES: Final = ("cpu", "input", "sync", "compile")
"""The idle causes that mean the rank's own host kept its GPU waiting."""


def others_median(ranks: pl.DataFrame, column: str, alias: str) -> pl.DataFrame:
    """Per ``dev`` of ``ranks``: the median of ``column`` over the *other* communicating ranks
    (``collectives > 0``); null with no other."""
    talking = ranks.filter(pl.col("collectives") > 0).select(pl.col("dev").alias("_other"), pl.col(column).alias("_v"))
    return (
        ranks.select("dev")
        .join(talking, how="cross")
        .filter(pl.col("dev") != pl.col("_other"))
        .group_by("dev")
        .agg(pl.col("_v").median().alias(alias))
    )


def with_late_causes(ranks: pl.DataFrame) -> pl.DataFrame:
    """``ranks`` (one row per rank: dev, collectives, steady_steps, compute_ns_per_step,
    ``idle_<cause>_ns`` for the host causes over its steady windows, longest_cpu_idle_ns) plus
    ``host_idle_ns_per_step``, ``host_excess_ns_per_step`` (over the others' median),
    ``late_because`` and ``late_because_ns_per_step`` (the excess that names it)."""
    steps = pl.max_horizontal(pl.col("steady_steps"), pl.lit(1))
    out = ranks.with_columns(
        *((pl.col(f"idle_{c}_ns") / steps).alias(f"_{c}") for c in HOST_CAUSES),
        (pl.sum_horizontal(*(pl.col(f"idle_{c}_ns") for c in HOST_CAUSES)) / steps).alias("host_idle_ns_per_step"),
    )
    for column in ("compute_ns_per_step", "host_idle_ns_per_step", *(f"_{c}" for c in HOST_CAUSES)):
        out = out.join(others_median(out, column, f"_o{column}"), on="dev", how="left")
    excess = {"compute": pl.col("compute_ns_per_step") - pl.col("_ocompute_ns_per_step")}
    excess.update({c: pl.col(f"_{c}") - pl.col(f"_o_{c}") for c in HOST_CAUSES})
    out = out.with_columns(
        *(e.fill_null(0.0).alias(f"_x{name}") for name, e in excess.items()),
        (pl.col("host_idle_ns_per_step") - pl.col("_ohost_idle_ns_per_step"))
        .fill_null(0.0)
        .alias("host_excess_ns_per_step"),
    )
    names = list(excess)
    largest = pl.max_horizontal(*(pl.col(f"_x{n}") for n in names))
    cause: pl.Expr = pl.lit("unknown")
    for name in reversed(names):  # ties: compute first, then the host causes in order
        cause = pl.when(pl.col(f"_x{name}") == largest).then(pl.lit(name)).otherwise(cause)
    pause = (pl.col("longest_cpu_idle_ns") >= PAUSE_MIN_NS) & (
        pl.col("longest_cpu_idle_ns") >= PAUSE_SHARE * pl.col("_xcpu")
    )
    cause = (
        pl.when(largest <= 0)
        .then(pl.lit("unknown"))
        .when(cause == "cpu")
        .then(pl.when(pause).then(pl.lit("pause")).otherwise(pl.lit("cpu")))
        .otherwise(cause)
    )
    temporary = [c for c in out.columns if c.startswith("_") and c not in ranks.columns]
    return out.with_columns(
        cause.alias("late_because"), pl.when(largest > 0).then(largest).otherwise(0.0).alias("late_because_ns_per_step")
    ).drop(temporary)


def straggler_expr(compared: int) -> pl.Expr:
    """The ``straggler`` flag over :func:`job._rank_stats`'s columns (``last_arrival_bound``,
    ``decided``, ``last_arrivals``, ``wait_caused_share``, ``wait_caused_ns_per_step``,
    ``compute_ns_per_step``, ``_others_compute``, ``host_excess_ns_per_step``); ``compared``: the
    ranks with a collective with arrival skew."""
    by_order = pl.col("last_arrival_bound") <= CHANCE_LEVEL / max(compared, 1)
    by_magnitude = (
        (pl.col("decided") >= MAGNITUDE_MIN_COLLECTIVES)
        & (pl.col("last_arrivals") == pl.col("decided"))
        & (pl.col("wait_caused_share") >= MAGNITUDE_SHARE)
    )
    gpu_slower = pl.col("compute_ns_per_step") > pl.col("_others_compute")
    host_later = (pl.col("host_excess_ns_per_step") > 0) & (
        pl.col("host_excess_ns_per_step") >= HOST_LATE_SHARE * pl.col("wait_caused_ns_per_step")
    )
    return ((by_order | by_magnitude) & (gpu_slower | host_later)).fill_null(False)


def late_phrase(r: RankSummary, ns: Callable[[float], str] = format_ns) -> str:
    """Why ``r`` is late, for a note or a title: ``its host pauses (...)``; ``ns`` formats durations."""
    excess = ns(r.late_because_ns_per_step)
    phrases = {
        "compute": f"its GPU computes longer ({excess} per step more than the others' median)",
        "cpu": (
            f"its host is CPU-bound: its GPU idles {excess} per step longer than the others' while its host "
            "runs other work (Python, callbacks, logging)"
        ),
        "pause": (
            f"its host pauses: {excess} more CPU-side idle per step than the others, up to "
            f"{ns(r.longest_cpu_idle_ns)} in one stretch (a garbage-collection-like pause)"
        ),
        "input": f"it waits in its data loader ({excess} more input idle per step than the others)",
        "sync": f"its host blocks in synchronisations ({excess} more sync idle per step than the others)",
        "compile": f"it compiles ({excess} more compile idle per step than the others)",
    }
    return phrases.get(r.late_because, "nothing recorded on it says why")


HOST_LATE: Final = frozenset(("cpu", "pause", "input", "sync", "compile"))
"""The ``late_because`` values that mean its host, not its GPU, makes it late."""


__all__ = [
    "CHANCE_LEVEL",
    "HOST_CAUSES",
    "HOST_LATE",
    "HOST_LATE_SHARE",
    "MAGNITUDE_MIN_COLLECTIVES",
    "MAGNITUDE_SHARE",
    "PAUSE_MIN_NS",
    "PAUSE_SHARE",
    "late_phrase",
    "others_median",
    "straggler_expr",
    "with_late_causes",
]
