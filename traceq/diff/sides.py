"""The two sides of a diff: a report of each, made from traces or read from a saved JSON report, and
how their devices pair up.

A side is what ``traceq report`` reads (a file, a directory of ranks, several files, a loaded
:class:`~traceq.trace.Trace`), reported through the one report pipeline (:mod:`traceq.pipeline`,
with its cache: diffing two cached traces costs two cached reports) with every kernel name listed;
or a saved JSON report of traceq (``traceq report --json x.json``), told apart from a Kineto trace
by its content: a JSON object whose first key is one of the report's fields (a Kineto trace's are
``traceEvents``, ``schemaVersion``, ``deviceProperties``, ...).  A saved report is compared as it
is: what it lists (its kernels, its MFU) is what the diff can say.

Devices pair by rank and GPU where every device of both sides has a rank; by process order and GPU
(each side's processes in pid order) where none has; else, where the sides have as many devices,
in report order (with a warning); else not at all: the sides are compared as the mean over their
devices (per-rank mean), with a warning.  So is a job whose world sizes differ.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from traceq.analyses.mfu import ModelSpec
from traceq.analyses.model import DeviceBreakdown
from traceq.analyses.options import Options
from traceq.cache import Cache
from traceq.errors import CorruptTraceError, InputNotFoundError, UnsupportedFormatError
from traceq.executors import ExecutorSpec
from traceq.importers import Format
from traceq.pipeline import report_parts, report_paths
from traceq.report.html.sections_overview import trace_name
from traceq.report.jsonschema import PayloadError
from traceq.report.model import Report
from traceq.trace import Trace
from traceq.units import device_label

ALL_KERNELS: Final = 2**31 - 1
"""``top_kernels`` for a side made from traces: every kernel name (a diff matches them all)."""

SideSpec = Trace | Report | Mapping[str, Any] | str | Path | Sequence[str | Path]
"""What a side can be given as: traces (paths or loaded), a report, or a saved report's payload."""

REPORT_KEYS: Final = frozenset(f.name for f in dataclasses.fields(Report))
_FIRST_KEY: Final = re.compile(rb'\A\s*\{\s*"([^"\\]{1,64})"\s*:')
_SNIFF_BYTES: Final = 4096


@dataclass(frozen=True)
class Side:
    """One side: its role (``before``, ``after``), how it is named, its report, and the saved report
    it was read from (None for traces)."""

    role: str
    name: str
    report: Report
    saved: Path | None = None


def is_saved_report(path: Path) -> bool:
    """Whether ``path`` is a file holding a traceq JSON report (by its first key; a UTF-8 BOM and
    whitespace may come first)."""
    if not path.is_file():
        return False
    with path.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    found = _FIRST_KEY.match(head.removeprefix(b"\xef\xbb\xbf"))
    return found is not None and found.group(1).decode("utf-8", "replace") in REPORT_KEYS


def read_saved_report(path: Path) -> Report:
    """The report a saved JSON report holds; one clear error when it is not one this traceq reads."""
    try:
        payload = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptTraceError(
            f"looks like a traceq JSON report but is not valid JSON ({exc})",
            path=path,
            hint="write it again with traceq report --json",
        ) from exc
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path) from exc
    return report_of_payload(payload, path)


def report_of_payload(payload: Any, label: str | Path) -> Report:
    try:
        return Report.from_dict(payload)
    except PayloadError as exc:
        raise UnsupportedFormatError(
            f"is not a JSON report this traceq reads: {exc}",
            path=label,
            hint="write it again with this traceq's traceq report --json, or diff the traces themselves",
        ) from exc


def read_side(
    spec: SideSpec,
    role: str,
    options: Options,
    *,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
) -> Side:
    """The side ``spec`` names: a saved report read, or traces reported with ``options`` (whose
    ``top_kernels`` should be :data:`ALL_KERNELS`) and the MFU options."""
    if isinstance(spec, Report):
        return Side(role, trace_name(spec.source.files), spec)
    if isinstance(spec, Mapping):
        report = report_of_payload(dict(spec), f"the {role} payload")
        return Side(role, trace_name(report.source.files), report)
    if isinstance(spec, Trace):
        return Side(role, trace_name(spec.meta.sources), report_parts([spec], options, model, gpus, peak_tflops))
    paths = [Path(spec)] if isinstance(spec, str | Path) else [Path(p) for p in spec]
    name = " ".join(str(p) for p in paths)
    if len(paths) == 1 and is_saved_report(paths[0]):
        return Side(role, name, read_saved_report(paths[0]), saved=paths[0])
    for path in paths:
        if is_saved_report(path):
            raise UnsupportedFormatError(
                "is a saved JSON report, given with other files", path=path, hint="give a saved report alone, as a side"
            )
    report = report_paths(
        paths, options, model=model, gpus=gpus, peak_tflops=peak_tflops, fmt=fmt, cache=cache, executor=executor
    )
    return Side(role, name, report)


def world_size(report: Report) -> int | None:
    """The job's world size as its files state it (the largest); None where none does."""
    sizes = [f.world_size for f in report.source.files if f.world_size is not None]
    return max(sizes) if sizes else None


def measured(report: Report) -> tuple[DeviceBreakdown, ...]:
    """The devices with steady step time (what a diff compares)."""
    return tuple(d for d in report.devices if d.steady.windows > 0 and d.steady.dur_ns > 0)


@dataclass(frozen=True)
class Pairing:
    """The devices paired (before, after), how, and what the pairing had to give up."""

    pairs: tuple[tuple[DeviceBreakdown, DeviceBreakdown], ...]
    basis: str
    warnings: tuple[str, ...]


def pair_devices(before: Side, after: Side) -> Pairing:
    """Pair the measured devices of the two sides (see the module docstring)."""
    b, a = measured(before.report), measured(after.report)
    warnings: list[str] = []
    sizes = (world_size(before.report), world_size(after.report))
    if None not in sizes and sizes[0] != sizes[1]:
        warnings.append(
            f"the jobs' world sizes differ (before {sizes[0]}, after {sizes[1]}): "
            "each side is its devices' mean (per-rank mean), and a per-device change may not mean the same"
        )
    keyed = _keys(b), _keys(a)
    if keyed[0] is not None and keyed[1] is not None and set(keyed[0]) == set(keyed[1]):
        basis = "rank and GPU" if all(d.rank is not None for d in b) else "process order and GPU"
        return Pairing(tuple((keyed[0][k], keyed[1][k]) for k in sorted(keyed[0], key=_order)), basis, tuple(warnings))
    if len(b) == len(a):
        if len(b) > 0:
            shown = "; ".join(f"{_label(x)} -> {_label(y)}" for x, y in list(zip(b, a, strict=True))[:4])
            more = f" (and {len(b) - 4} more)" if len(b) > 4 else ""
            warnings.append(
                f"the sides' devices differ, so they are paired in report order: {shown}{more}",
            )
        return Pairing(tuple(zip(b, a, strict=True)), "device order", tuple(warnings))
    warnings.append(
        f"before has {len(b)} device(s) with steady steps, after {len(a)}: no device pairs with another, "
        "so each side is its devices' mean (per-rank mean)"
    )
    return Pairing((), "per-rank mean", tuple(warnings))


DeviceKey = tuple[str, int, int]


def _keys(devices: Sequence[DeviceBreakdown]) -> dict[DeviceKey, DeviceBreakdown] | None:
    """Each device by (rank, GPU), or by (its process's place in pid order, GPU) where no device has a
    rank; None when the keys are not one per device (or some devices have ranks and others not)."""
    if all(d.rank is not None for d in devices):
        keys = [("rank", int(d.rank or 0), d.device) for d in devices]
    elif all(d.rank is None for d in devices):
        processes = sorted({_process(d) for d in devices}, key=lambda p: (p[1], p[0]))
        place = {p: i for i, p in enumerate(processes)}
        keys = [("process", place[_process(d)], d.device) for d in devices]
    else:
        return None
    if len(set(keys)) != len(keys):
        return None
    return dict(zip(keys, devices, strict=True))


def _process(d: DeviceBreakdown) -> tuple[str, int]:
    return d.source, d.pid if d.pid is not None else -1


def _order(key: DeviceKey) -> tuple[int, int]:
    return key[1], key[2]


def _label(d: DeviceBreakdown) -> str:
    return device_label(d.rank, d.device, pid=d.pid)
