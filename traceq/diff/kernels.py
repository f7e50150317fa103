"""Kernels before and after: matched by name, then by normalised name, then summed by class.

Each side's report lists its kernel names with their count and total time over the whole trace
(a side made from traces lists them all; a saved report may list only its top ones, and says how
many it has: ``kernel_names``).  Per step means per step window: the total over the side's step
windows (every window of every device, warm-up included, since the kernels are counted over the
whole trace).

Matching, in three rounds:

1. **by name**: a name on both sides is one kernel;
2. **by normalised name** (:func:`normalise_kernel_name`), among the names still unmatched: a
   leading ``void`` and the argument list dropped, every template argument list folded to
   ``<…>``, and a Triton kernel's trailing numbers and hashes dropped (``triton_poi_fused_add_0``
   and ``triton_poi_fused_add_1`` are one kernel recompiled); the names of one side that fold to
   one normalised name count together;
3. what is left is **removed** (before only) or **added** (after only); where the other side's
   kernel list is incomplete, **unlisted** instead (it may be there, beyond the listed ones).

Each name's **class** (:mod:`traceq.analyses.kernel_classes`; ``comm`` where the side's report
counted it as communication) sums into the class table, which shows fusion: several kernels of a
class removed, fewer added, the class's time down.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import polars as pl

from traceq.analyses.kernel_classes import kernel_class_expr
from traceq.diff.model import KernelChange, KernelClassChange, KernelDiff
from traceq.report.model import Report

_TRITON: Final = re.compile(r"^triton_")
_TRITON_SUFFIX: Final = re.compile(r"(?:_(?:\d+|(?:\d+[cde]+)+\d*|[0-9a-f]{8,}))+$")
"""A Triton kernel's trailing tokens: Inductor's kernel numbers (``_0``), Triton's specialisation
signature (``_0d1d2de``), a hash."""


def normalise_kernel_name(name: str) -> str:
    """The name two builds of one kernel share (see the module docstring)."""
    text = name.strip().removeprefix("void ").strip()
    text = _drop_arguments(text)
    text = _fold_templates(text)
    if _TRITON.match(text):
        text = _TRITON_SUFFIX.sub("", text) or text
    return text


def _drop_arguments(text: str) -> str:
    """``f<T>(int, float)`` -> ``f<T>``: the balanced parenthesis group that ends the name."""
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return text[:i].rstrip() if i > 0 else text
    return text


def _fold_templates(text: str) -> str:
    """Every outermost ``<...>`` as ``<…>``; the name unchanged where the brackets do not balance."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth < 0:
                return text
        elif depth == 0:
            out.append(ch)
    return text if depth else "".join(out)


@dataclass(frozen=True)
class _Kernel:
    name: str
    count: int
    total_ns: int
    kernel_class: str


def _kernels(report: Report) -> dict[str, _Kernel]:
    comm = {k.name for d in report.devices for k in d.comm_kernels}
    names = [k.name for k in report.kernels]
    schema = {"name": pl.String, "is_comm": pl.Boolean}
    frame = pl.DataFrame({"name": names, "is_comm": [n in comm for n in names]}, schema=schema)
    classes = frame.select(kernel_class_expr(comm=pl.col("is_comm"))).to_series().to_list()
    return {
        k.name: _Kernel(k.name, k.count, k.total_ns, str(cls)) for k, cls in zip(report.kernels, classes, strict=True)
    }


def is_complete(report: Report) -> bool:
    """Whether the report lists every kernel name of its trace (unknown for an older saved report:
    then complete only if it lists fewer than the default top 20)."""
    if report.kernel_names is None:
        return len(report.kernels) < 20
    return len(report.kernels) >= report.kernel_names


def windows(report: Report) -> int:
    """The step windows the kernel totals are divided by (at least 1)."""
    return max(len(report.steps), 1)


def kernel_diff(before: Report, after: Report) -> KernelDiff:
    """Every kernel of both reports matched (see the module docstring), largest change first."""
    b, a = _kernels(before), _kernels(after)
    nb, na = windows(before), windows(after)
    complete_b, complete_a = is_complete(before), is_complete(after)
    rows: list[KernelChange] = []
    for name in sorted(b.keys() & a.keys()):
        rows.append(_change(name, [b[name]], [a[name]], nb, na, "name", complete_b, complete_a))
    rest_b = _by_normalised(k for n, k in b.items() if n not in a)
    rest_a = _by_normalised(k for n, k in a.items() if n not in b)
    for key in sorted(rest_b.keys() & rest_a.keys()):
        rows.append(_change(key, rest_b[key], rest_a[key], nb, na, "normalised name", complete_b, complete_a))
    for key in sorted(rest_b.keys() - rest_a.keys()):
        rows.extend(_change(k.name, [k], [], nb, na, None, complete_b, complete_a) for k in rest_b[key])
    for key in sorted(rest_a.keys() - rest_b.keys()):
        rows.extend(_change(k.name, [], [k], nb, na, None, complete_b, complete_a) for k in rest_a[key])
    rows.sort(key=lambda r: (-abs(r.delta_per_step_ns), r.name))
    return KernelDiff(
        windows_before=nb,
        windows_after=na,
        complete_before=complete_b,
        complete_after=complete_a,
        changes=tuple(rows),
        classes=_classes(b, a, rows, nb, na),
    )


def _by_normalised(kernels: Iterable[_Kernel]) -> dict[str, list[_Kernel]]:
    out: dict[str, list[_Kernel]] = {}
    for k in sorted(kernels, key=lambda k: k.name):
        out.setdefault(normalise_kernel_name(k.name), []).append(k)
    return out


def _change(
    name: str,
    before: list[_Kernel],
    after: list[_Kernel],
    nb: int,
    na: int,
    matched_by: str | None,
    complete_b: bool,
    complete_a: bool,
) -> KernelChange:
    tb, ta = sum(k.total_ns for k in before), sum(k.total_ns for k in after)
    per_b, per_a = tb / nb, ta / na
    if before and after:
        status = "slower" if per_a > per_b else "faster" if per_a < per_b else "unchanged"
    elif before:
        status = "removed" if complete_a else "unlisted"
    else:
        status = "added" if complete_b else "unlisted"
    return KernelChange(
        name=name,
        status=status,
        matched_by=matched_by,
        kernel_class=(after or before)[0].kernel_class,
        names_before=tuple(k.name for k in before),
        names_after=tuple(k.name for k in after),
        count_before=sum(k.count for k in before),
        count_after=sum(k.count for k in after),
        per_step_before_ns=per_b,
        per_step_after_ns=per_a,
        delta_per_step_ns=per_a - per_b,
    )


def _classes(
    b: Mapping[str, _Kernel], a: Mapping[str, _Kernel], rows: list[KernelChange], nb: int, na: int
) -> tuple[KernelClassChange, ...]:
    """Per class, the time per step before and after (summed per name: every name counts in its own
    class) and how many of its names were removed or added."""
    classes = sorted({k.kernel_class for k in (*b.values(), *a.values())})
    out = []
    for cls in classes:
        before = sum(k.total_ns for k in b.values() if k.kernel_class == cls) / nb
        after = sum(k.total_ns for k in a.values() if k.kernel_class == cls) / na
        removed = sum(1 for r in rows if r.status == "removed" and r.kernel_class == cls)
        added = sum(1 for r in rows if r.status == "added" and r.kernel_class == cls)
        out.append(KernelClassChange(cls, before, after, after - before, removed, added))
    out.sort(key=lambda c: (-abs(c.delta_per_step_ns), c.kernel_class))
    return tuple(out)
