"""From compacted events to the event table: what needs the whole trace.

:func:`normalise` takes the events as :func:`~traceq.importers.kineto.compact.compact` left them
(one frame for the file) and does what no single event can say by itself: ``B``/``E`` pairing (a
stack per thread, walked in Python over the ``B``/``E`` events only -- Kineto never writes them),
launch flows filling missing correlation ids, the pid of GPU rows (the launching process), kinds
from the categories present, and the per-category accounting.  Data-dependent lookups are built
from small selections; the rows come out of one lazy query.

What becomes a row (``docs/importers-kineto.md`` says why):

* ``X`` complete events and matched ``B``/``E`` pairs: kind from ``cat`` through
  :data:`KIND_OF_CATEGORY` (case-insensitive; other ``*_runtime``/``*_driver`` are ``cuda_api``;
  unknown categories are ``other``);
* ``i``/``I`` instants: ``instant`` rows with ``end_ns == start_ns``;
* ``M`` is skipped as ``metadata`` (read for meta), ``s``/``t``/``f`` as ``flow`` (launch flows
  fill missing correlation ids), any other phase as ``unsupported phase <ph>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import polars as pl

from traceq.comm_kernels import comm_name_expr
from traceq.importers.kineto.compact import (
    PER_EVENT_ARG_COLUMNS,
    ROW,
    SKIP_FLOW,
    SKIP_NOT_OBJECT,
    SKIP_PAIR_END,
    SKIP_UNCLOSED_B,
    SKIP_UNPAIRED_E,
    codes_and_texts,
    int_from_text,
    lookup,
)
from traceq.importers.lookups import by_int_key
from traceq.schema import COPY_KIND_DTYPE, KIND_DTYPE, SYNC_KIND_DTYPE
from traceq.stats import CategoryCount

KIND_OF_CATEGORY: Final[dict[str, str]] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "cuda_api",
    "runtime": "cuda_api",
    "cuda_driver": "cuda_api",
    "driver": "cuda_api",
    "cuda_sync": "gpu_sync",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "range",
    "gpu_user_annotation": "range",
    "user": "range",
    "python_function": "python",
}
"""Lower-cased ``cat`` -> kind for ``X`` and ``B``/``E`` events; the 1.8-era spellings (``Kernel``,
``Memcpy``, ``Runtime``, ``Operator``, ``User``) are the same keys once lower-cased."""

LEGACY_STEP_ANNOTATION: Final = r"^ProfilerStep#\d+$"
"""Names of ``Operator`` events that PyTorch 1.8 wrote for ``record_function`` step annotations."""

API_CATEGORY_SUFFIXES: Final = ("_runtime", "_driver")
"""Other backends' runtime/driver calls (``xpu_runtime``, ``privateuse1_driver``, ...) -> ``cuda_api``."""

FLOW_LAUNCH_CATEGORIES: Final = frozenset({"ac2g", "async", "async_cpu_to_gpu", "cpu_to_cuda"})
"""Lower-cased flow categories that link a launch call (``s``) to its GPU work (``f``), by era."""

GPU_SIDE_CATEGORIES: Final = frozenset({"gpu_user_annotation", "cuda_event"})
"""Categories besides GPU work whose ``pid``/``tid`` are device/stream (legacy ``User`` too, when
its ``tid`` is ``"stream N"`` or its args name a device or stream)."""

GPU_WORK_KINDS: Final = ("kernel", "memcpy", "memset", "gpu_sync")
_INSTANT_PHASES: Final = ("i", "I")
_COPY_KIND_OF_TOKEN: Final = {
    k.lower(): k for k in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA")
}
_SYNC_KIND_OF_NAME: Final = {
    "stream sync": "stream_synchronize",
    "event sync": "event_synchronize",
    "context sync": "context_synchronize",
    "stream wait event": "stream_wait_event",
    "event query": "event_query",
}
_NO_STREAM: Final = (-1, 0xFFFFFFFF)
"""Stream ids CUPTI uses for "not stream-specific" (``Context Sync``): stored as null."""
NOT_OBJECT_CATEGORY: Final = "(not an event object)"
"""Stats category of array elements that are not JSON objects (lenient path only)."""


@dataclass(frozen=True)
class Normalised:
    """Rows (event-table columns plus ``idx``), their accounting, and what deserves a warning."""

    rows: pl.DataFrame
    counts: tuple[CategoryCount, ...]
    warnings: tuple[str, ...]


def kind_of_category(category: str | None) -> str:
    """Kind of an ``X``/``B`` event with this ``cat`` (instants are always ``instant``)."""
    if category is None:
        return "other"
    key = category.lower()
    if key in KIND_OF_CATEGORY:
        return KIND_OF_CATEGORY[key]
    return "cuda_api" if key.endswith(API_CATEGORY_SUFFIXES) else "other"


def normalise(
    events: pl.DataFrame, flows: pl.DataFrame, *, source: str, rank: int | None, non_objects: int = 0
) -> Normalised:
    """Turn compacted events into event-table rows; see the module docstring for what becomes a row.
    ``flows``: the flow events, kept apart by :class:`~traceq.importers.kineto.compact.FlowSplit`
    (counted, and read where they fill missing correlation ids).

    Data-dependent lookups (kinds of the categories present, numeric pids, launch pids, flow
    bindings) are computed first, from small selections; the rows are then made by one lazy
    query over the event frame, which lets polars stream it instead of copying the frame per step.
    """
    warnings: list[str] = []
    missing_dur, negative_dur = events.select(
        missing=(_IS_ROW & pl.col("no_dur")).sum(), negative=(_IS_ROW & pl.col("negative_dur")).sum()
    ).row(0)
    if missing_dur:
        warnings.append(f"{missing_dur} X events have no dur; read as zero-length")
    if negative_dur:
        warnings.append(f"{negative_dur} X events have a negative dur; clamped to 0")
    if events.select(pl.col("ph").is_in(["B", "E"]).any()).item():
        events, inverted = _pair_begin_end(events)
        if inverted:
            warnings.append(f"{inverted} B/E pairs end before they begin; clamped to zero length")
    counts = _counts(events, flows, source, non_objects)
    categories = codes_and_texts(events, "cat")  # the distinct categories: their codes and texts
    described = _describe(events, categories)
    correlation, flow_warnings = _correlation_with_flows(events, described, flows)
    warnings.extend(flow_warnings)
    launch_pid = _launch_pid(events, described, correlation)
    rows = (
        events.lazy()
        .with_columns(**described)
        .with_columns(correlation=correlation)
        .with_columns(
            pid=pl.when("gpu_side").then(launch_pid).otherwise("pid_num"),
            tid=pl.when("gpu_side").then(pl.lit(None, dtype=pl.Int64)).otherwise("tid_num"),
        )
        .filter(_IS_ROW)
        .select(_final_columns(source=source, rank=rank, by_name=_name_facts(events, described["kind"])))
        .collect()
    )
    return Normalised(rows, counts, tuple(warnings))


_NAMED: Final = (
    ("comm_name", "kernel", pl.Boolean()),
    ("copy_kind", "memcpy", COPY_KIND_DTYPE),
    ("sync_kind", "gpu_sync", SYNC_KIND_DTYPE),
)
"""What a row's name says, by the kind of row it is said of (see :func:`_name_facts`)."""


def _name_facts(events: pl.DataFrame, kind: pl.Expr) -> dict[str, pl.Expr]:
    """Per row, what the name of a kernel, memcpy or sync row says: a communication kernel
    (:data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS`), the copy kind,
    the sync kind.  Worked out once per distinct (kind, name) -- a few thousand strings rather than
    millions of rows -- and looked up by the name's categorical code."""
    text = pl.col("name").cast(pl.String)
    copy_token = text.str.extract(r"(?i)^\s*memcpy\s+([A-Za-z]+)", 1).str.to_lowercase()
    sync_name = text.str.strip_chars().str.to_lowercase()
    facts = (
        events.lazy()
        .filter(_IS_ROW)
        .select(kind_key=kind.cast(pl.String), name=pl.col("name"))
        .filter(pl.col("kind_key").is_in([k for _, k, _ in _NAMED]))
        .unique()
        .with_columns(
            code=pl.col("name").to_physical(),
            comm_name=comm_name_expr(text),
            copy_kind=copy_token.replace_strict(_COPY_KIND_OF_TOKEN, default="unknown", return_dtype=COPY_KIND_DTYPE),
            sync_kind=sync_name.replace_strict(_SYNC_KIND_OF_NAME, default="unknown", return_dtype=SYNC_KIND_DTYPE),
        )
        .collect()
    )
    by_name: dict[str, pl.Expr] = {}
    for column, of_kind, dtype in _NAMED:
        mine = facts.filter(pl.col("kind_key") == of_kind)
        known = mine.filter(pl.col("code").is_not_null())
        looked_up = by_int_key(pl.col("name").to_physical(), known["code"], known[column], dtype)
        unnamed = mine.filter(pl.col("code").is_null())[column]
        if unnamed.len():
            looked_up = pl.when(pl.col("name").is_null()).then(pl.lit(unnamed[0], dtype=dtype)).otherwise(looked_up)
        by_name[column] = pl.when(pl.col("kind") == of_kind).then(looked_up)
    return by_name


_IS_ROW: Final = pl.col("outcome") == ROW


def _pair_begin_end(events: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Match each E to the most recent open B on its (pid, tid), in time order (file order on ties).

    A matched B becomes the row (``end_ns`` from its E, missing fields from its E, as the format
    merges their args); its E, unpaired Es and never-closed Bs get skip outcomes.
    """
    be = events.filter((pl.col("outcome") == ROW) & pl.col("ph").is_in(["B", "E"])).sort(["start_ns", "idx"])
    stacks: dict[tuple[str | None, str | None], list[int]] = {}
    begins: list[int] = []
    ends: list[int] = []
    unpaired: list[int] = []
    for idx, ph, pid, tid in be.select("idx", "ph", "pid_text", "tid_key").iter_rows():
        stack = stacks.setdefault((pid, tid), [])
        if ph == "B":
            stack.append(idx)
        elif stack:
            begins.append(stack.pop())
            ends.append(idx)
        else:
            unpaired.append(idx)
    unclosed = [idx for stack in stacks.values() for idx in stack]
    outcomes = pl.DataFrame(
        {
            "idx": [*ends, *unpaired, *unclosed],
            "outcome": [SKIP_PAIR_END] * len(ends)
            + [SKIP_UNPAIRED_E] * len(unpaired)
            + [SKIP_UNCLOSED_B] * len(unclosed),
        },
        schema={"idx": pl.UInt32, "outcome": pl.Categorical},
    )
    pairs = pl.DataFrame({"idx": begins, "e": ends}, schema={"idx": pl.UInt32, "e": pl.UInt32})
    merged_fields = ["name", "cat", *PER_EVENT_ARG_COLUMNS]
    b_side = be.join(pairs, on="idx").select("idx", "e", "start_ns", *merged_fields)
    e_side = be.select(
        pl.col("idx").alias("e"), pl.col("start_ns").alias("e_ns"), *(pl.col(c).alias(f"{c}#E") for c in merged_fields)
    )
    merged = b_side.join(e_side, on="e")
    inverted = int(merged.select((pl.col("e_ns") < pl.col("start_ns")).sum()).item()) if merged.height else 0
    patch = merged.select(
        "idx",
        *(pl.coalesce(c, f"{c}#E").alias(c) for c in merged_fields),
        end_ns=pl.max_horizontal("start_ns", "e_ns"),
    )
    return events.update(outcomes, on="idx").update(patch, on="idx"), inverted


def _describe(events: pl.DataFrame, present: pl.DataFrame) -> dict[str, pl.Expr]:
    """Expressions for kind, the GPU-side flag and the numeric pid/tid (from distinct values;
    ``present``: the categories, as :func:`~traceq.importers.kineto.compact.codes_and_texts` gives them)."""
    categories: list[str] = present["text"].to_list()
    kinds = pl.Series([kind_of_category(c) for c in categories], dtype=pl.String)
    by_category = by_int_key(pl.col("cat").to_physical(), present["code"], kinds, KIND_DTYPE)
    by_category = by_category.fill_null(pl.lit("other", dtype=KIND_DTYPE))
    legacy_operator = [c for c in categories if c.lower() == "operator"]
    if legacy_operator:
        # PyTorch 1.8 wrote record_function annotations, ProfilerStep#N included, as "Operator"
        # events; they are ranges (the step windows), not ATen ops.
        annotation = pl.col("cat").is_in(legacy_operator).fill_null(False) & pl.col("name").cast(
            pl.String
        ).str.contains(LEGACY_STEP_ANNOTATION).fill_null(False)
        by_category = pl.when(annotation).then(pl.lit("range", dtype=KIND_DTYPE)).otherwise(by_category)
    kind = pl.when(pl.col("ph").is_in(_INSTANT_PHASES)).then(pl.lit("instant", dtype=KIND_DTYPE)).otherwise(by_category)
    gpu_categories = [c for c in categories if c.lower() in GPU_SIDE_CATEGORIES]
    legacy_user = [c for c in categories if c.lower() == "user"]
    gpu_side = kind.is_in(GPU_WORK_KINDS) | pl.col("cat").is_in(gpu_categories).fill_null(False)
    if legacy_user:
        gpu_side = gpu_side | (
            pl.col("cat").is_in(legacy_user).fill_null(False)
            & (pl.col("stream_tid") | pl.col("stream_arg").is_not_null() | pl.col("device_arg").is_not_null())
        )
    return {
        "kind": kind,
        "gpu_side": gpu_side,
        "pid_num": lookup(events, "pid_text", int_from_text, pl.Int64()),
        "tid_num": lookup(events, "tid_key", int_from_text, pl.Int64()),
    }


def _correlation_with_flows(
    events: pl.DataFrame, described: dict[str, pl.Expr], flows: pl.DataFrame
) -> tuple[pl.Expr, list[str]]:
    """``correlation``, filled from launch flows where ``args.correlation`` is missing (old traces).

    Binding follows the Trace Event Format: ``s`` binds to the slice enclosing its ts on its thread
    (here: a ``cuda_api`` row), ``f`` with ``bp: "e"`` to the enclosing GPU slice on its
    (device, stream) track, ``f`` without ``bp`` to the next one starting at or after its ts.
    Tracks are matched on the text of pid/tid (``"stream 7"`` and ``7`` alike).
    """
    linked = _IS_ROW & described["kind"].is_in(["cuda_api", *GPU_WORK_KINDS])
    correlation = pl.col("correlation")
    unlinked = events.lazy().filter(linked & correlation.is_null()).select(pl.len()).collect().item()
    if not unlinked or flows.is_empty():
        return correlation, []
    categories = codes_and_texts(flows, "cat")["text"].to_list()
    flow_categories = [c for c in categories if c.lower() in FLOW_LAUNCH_CATEGORIES]
    if not flow_categories:
        return correlation, []
    flows = flows.filter(
        pl.col("ph").is_in(["s", "f"]) & pl.col("cat").is_in(flow_categories) & pl.col("start_ns").is_not_null()
    ).select("ph", "bp_e", "pid_text", "tid_key", "flow_id", flow_ns="start_ns")
    targets = (
        events.lazy()
        .filter(linked)
        .select("idx", "pid_text", "tid_key", "start_ns", "end_ns", is_api=described["kind"] == "cuda_api")
        .collect()
    )
    api = targets.filter("is_api")
    gpu = targets.filter(~pl.col("is_api"))
    bound = pl.concat(
        [
            _bind(flows.filter(pl.col("ph") == "s"), api, "backward"),
            _bind(flows.filter((pl.col("ph") == "f") & pl.col("bp_e")), gpu, "backward"),
            _bind(flows.filter((pl.col("ph") == "f") & ~pl.col("bp_e")), gpu, "forward"),
        ]
    )
    per_row = bound.group_by("idx").agg(ids=pl.col("flow_id").unique())
    ambiguous = per_row.filter(pl.col("ids").list.len() > 1).height
    fill = per_row.filter(pl.col("ids").list.len() == 1).select("idx", flow_id=pl.col("ids").list.first())
    from_flow = pl.col("idx").replace_strict(fill["idx"], fill["flow_id"], default=None, return_dtype=pl.Int64)
    warnings = []
    if ambiguous:
        warnings.append(f"{ambiguous} rows are bound to several launch flows; their correlation is left null")
    return pl.coalesce(correlation, from_flow), warnings


def _bind(flows: pl.DataFrame, targets: pl.DataFrame, strategy: Literal["backward", "forward"]) -> pl.DataFrame:
    """Row ``idx`` each flow binds to: enclosing slice (backward) or next slice (forward)."""
    by = ["pid_text", "tid_key"]
    flows = flows.drop_nulls([*by, "flow_id"]).sort("flow_ns")
    targets = targets.drop_nulls(by).sort("start_ns")
    if flows.is_empty() or targets.is_empty():
        return pl.DataFrame(schema={"idx": pl.UInt32, "flow_id": pl.Int64})
    # Both sides are sorted just above; polars cannot verify it per `by` group and would warn.
    joined = flows.join_asof(
        targets, left_on="flow_ns", right_on="start_ns", by=by, strategy=strategy, check_sortedness=False
    )
    hit = pl.col("idx").is_not_null()
    if strategy == "backward":
        hit = hit & (pl.col("flow_ns") <= pl.col("end_ns"))
    return joined.filter(hit).select("idx", "flow_id")


def _launch_pid(events: pl.DataFrame, described: dict[str, pl.Expr], correlation: pl.Expr) -> pl.Expr:
    """The pid of a GPU row: the OS pid of the process that launched it (Kineto writes the device there).

    That is the pid of the ``cuda_api`` row with the same correlation; failing that, the pid that
    made most ``cuda_api`` calls in the trace; failing that, null.
    """
    api = (
        events.lazy()
        .filter(_IS_ROW & (described["kind"] == "cuda_api"))
        .select(correlation=correlation, pid=described["pid_num"])
        .drop_nulls("pid")
    )
    by_correlation = (  # (one pid where the lowest is the highest: no list of pids per id)
        api.drop_nulls("correlation")
        .group_by("correlation")
        .agg(low=pl.col("pid").min(), high=pl.col("pid").max())
        .filter(pl.col("low") == pl.col("high"))
        .select("correlation", pid="low")
        .collect()
    )
    tally = api.group_by("pid").len().sort(["len", "pid"], descending=[True, False]).collect()
    dominant = int(tally["pid"][0]) if tally.height else None
    from_launch = by_int_key(correlation, by_correlation["correlation"], by_correlation["pid"], pl.Int64())
    return pl.coalesce(from_launch, pl.lit(dominant, dtype=pl.Int64))


def _final_columns(*, source: str, rank: int | None, by_name: dict[str, pl.Expr]) -> list[pl.Expr]:
    """The event-table columns (already in their final dtypes) plus ``idx``, from the described events
    and what their names say (:func:`_name_facts`)."""
    gpu, kind = pl.col("gpu_side"), pl.col("kind")
    stream = pl.coalesce("stream_arg", "tid_num")

    return [
        pl.col("idx"),
        kind,
        pl.col("start_ns"),
        pl.col("end_ns"),
        pl.col("name").fill_null(""),
        pl.col("pid"),
        pl.col("tid"),
        pl.when(gpu).then(pl.coalesce("device_arg", "pid_num")).cast(pl.Int32, strict=False).alias("device"),
        pl.when(gpu & ~stream.is_in(_NO_STREAM)).then(stream).alias("stream"),
        pl.col("correlation"),
        (by_name["comm_name"] | ((kind == "kernel") & pl.col("has_collective"))).fill_null(False).alias("is_comm"),
        pl.col("bytes"),
        by_name["copy_kind"].alias("copy_kind"),
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        pl.lit(source).cast(pl.Categorical).alias("source"),
        pl.col("cat").alias("category"),
        pl.col("context"),
        pl.col("external_id"),
        by_name["sync_kind"].alias("sync_kind"),
        pl.col("graph_id"),
        *(pl.col(f"{what}_{axis}") for what in ("grid", "block") for axis in "xyz"),
        pl.col("registers_per_thread"),
        pl.col("shared_memory_bytes"),
    ]


def _kind_of_category(category: str) -> str | None:
    """The kind a category's rows become, for the import statistics (None: several, or none)."""
    lowered = category.lower()
    if lowered == "operator":  # PyTorch 1.8 wrote its step annotations as operators
        return None
    if lowered.endswith(API_CATEGORY_SUFFIXES):
        return "cuda_api"
    return KIND_OF_CATEGORY.get(lowered)


def _counts(events: pl.DataFrame, flows: pl.DataFrame, source: str, non_objects: int) -> tuple[CategoryCount, ...]:
    """One CategoryCount per ``cat`` (``ph=<ph>`` for events without one), flows included."""
    # The lazy engine groups these categoricals in a fraction of the eager group_by's memory.
    tally = pl.concat(
        [
            events.lazy().group_by("cat", "ph", "outcome").len(),
            flows.lazy()
            .group_by("cat", "ph")
            .len()
            .select("cat", "ph", pl.lit(SKIP_FLOW, pl.Categorical).alias("outcome"), "len"),
        ]
    ).collect()
    by_category: dict[str, dict[str, int]] = {}
    for cat, ph, outcome, n in tally.iter_rows():
        category = cat if cat is not None else f"ph={ph if ph is not None else '(none)'}"
        outcomes = by_category.setdefault(category, {})
        outcomes[outcome] = outcomes.get(outcome, 0) + n
    counts = [
        CategoryCount(
            source=source,
            category=category,
            events=sum(outcomes.values()),
            rows=outcomes.get(ROW, 0),
            skipped={k: v for k, v in outcomes.items() if k != ROW},
            kind=_kind_of_category(category),
        )
        for category, outcomes in sorted(by_category.items())
    ]
    if non_objects:
        counts.append(CategoryCount(source, NOT_OBJECT_CATEGORY, non_objects, 0, {SKIP_NOT_OBJECT: non_objects}))
    return tuple(counts)
