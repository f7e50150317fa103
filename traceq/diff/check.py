"""The budgets of ``traceq check``: what each one measures, whether it held, the figure behind it.

A budget is a limit on one number of a report (``docs/diff.md``, "Budgets"):

* ``max_idle``, ``max_exposed_comm``: GPU idle (every cause) and exposed communication as a share of
  the steady step, on the **worst** device (a budget of a job holds on every one of its devices);
* ``min_mfu``: the report's steady MFU (the model options must be given, or the saved report hold it);
* ``max_step_ms``: the **median** steady step window, every device's windows together;
* ``max_regression``: the median steady step against the baseline's, as a share of the baseline's;
  the figure gives both sides' spread (p10–p90) and the standard error of the medians' difference;
* ``forbid``: finding ids that must not fire (one budget each); a finding withheld for missing GPU work
  fails too, since the trace cannot rule it out.

Budgets come from options and a TOML file (:func:`read_budget_file`; an option wins over the file's
value, ``forbid`` lists add up).  Shares are written ``"10%"`` or ``0.10``; an unknown key, a share
outside 0–100% or a value of the wrong type is an :class:`~traceq.errors.InvalidArgumentError`, so a
misspelt budget cannot pass unseen.  :func:`check_budgets` is pure: reports in, results out.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from traceq.analyses.findings import FINDING_IDS
from traceq.analyses.model import CAUSES, DeviceBreakdown
from traceq.diff.decompose import noise_ns, steady_durations, step_stats
from traceq.diff.labels import FINDING_LABELS, signed_share
from traceq.diff.sides import measured
from traceq.errors import InputNotFoundError, InvalidArgumentError
from traceq.report.model import Report
from traceq.units import device_label, format_ns, format_share, printable

BUDGET_KEYS: Final = ("max_idle", "max_exposed_comm", "min_mfu", "max_step_ms", "max_regression", "forbid")
"""The budgets, as a TOML file names them (the options are these with dashes)."""


@dataclass(frozen=True)
class Budgets:
    """The limits to check; None (or no ``forbid``) where a budget is not set.  Shares are fractions."""

    max_idle: float | None = None
    max_exposed_comm: float | None = None
    min_mfu: float | None = None
    max_step_ms: float | None = None
    max_regression: float | None = None
    forbid: tuple[str, ...] = ()

    def over(self, base: Budgets) -> Budgets:
        """These budgets over ``base`` (a file's): each set value wins; ``forbid`` lists add up."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "forbid"}
        merged = {k: v if v is not None else getattr(base, k) for k, v in values.items()}
        forbid = tuple(dict.fromkeys((*base.forbid, *self.forbid)))
        return Budgets(**merged, forbid=forbid)

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) in (None, ()) for f in dataclasses.fields(self))


def parse_share(value: object, name: str, *, source: str | Path | None = None) -> float:
    """``"10%"``, ``"0.1"`` or ``0.1`` as the fraction 0.1; one clear error for anything else."""
    hint = f'write {name} as a share: "10%" or 0.10'
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError
        text = str(value).strip()
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} {value!r} is not a share", path=source, hint=hint) from None
    if not 0 <= share <= 1 or share != share:
        raise InvalidArgumentError(f"{name} {value!r} is not between 0% and 100%", path=source, hint=hint)
    return share


def parse_positive(value: object, name: str, *, source: str | Path | None = None) -> float:
    """A number above 0 (``max_step_ms``)."""
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError
        number = float(value)
    except ValueError:
        raise InvalidArgumentError(f"{name} {value!r} is not a number", path=source) from None
    if not number > 0 or number == float("inf"):
        raise InvalidArgumentError(f"{name} {value!r} must be a number above 0", path=source)
    return number


def check_forbidden(ids: Sequence[str], *, source: str | Path | None = None) -> tuple[str, ...]:
    """The finding ids, each one known (``docs/findings.md``)."""
    for fid in ids:
        if fid not in FINDING_IDS:
            raise InvalidArgumentError(
                f"forbid {fid!r} is not a finding id", path=source, hint=f"use one of {', '.join(FINDING_IDS)}"
            )
    return tuple(dict.fromkeys(ids))


def budgets_of(values: Mapping[str, Any], *, source: str | Path | None = None) -> Budgets:
    """Budgets from a mapping of :data:`BUDGET_KEYS` (a TOML file's table, or the options)."""
    unknown = sorted(set(values) - set(BUDGET_KEYS))
    if unknown:
        raise InvalidArgumentError(
            f"unknown budget {unknown[0]!r}", path=source, hint=f"the budgets are {', '.join(BUDGET_KEYS)}"
        )
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if key == "forbid":
            listed = [value] if isinstance(value, str) else value
            if not isinstance(listed, list | tuple) or not all(isinstance(v, str) for v in listed):
                raise InvalidArgumentError("forbid must be a list of finding ids", path=source)
            out[key] = check_forbidden(listed, source=source)
        elif key == "max_step_ms":
            out[key] = parse_positive(value, _spelled(key, source), source=source)
        else:
            out[key] = parse_share(value, _spelled(key, source), source=source)
    return Budgets(**out)


def _spelled(key: str, source: str | Path | None) -> str:
    """A budget's name as the user wrote it: the TOML key in a file, the option on the command line."""
    return key if source is not None else f"--{key.replace('_', '-')}"


def read_budget_file(path: Path) -> Budgets:
    """The budgets of a TOML file: top-level keys, or a ``[check]`` table (``docs/diff.md``, "Budgets")."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputNotFoundError("no such budget file", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputNotFoundError(f"cannot be read ({exc})", path=path) from exc
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgumentError(f"is not valid TOML ({exc})", path=path, hint="see docs/diff.md, Budgets") from exc
    table = data.get("check", data) if set(data) <= {"check"} else data
    if not isinstance(table, dict):
        raise InvalidArgumentError("[check] must be a table of budgets", path=path)
    return budgets_of(table, source=path)


PartNs = Callable[[DeviceBreakdown], int]
"""A part of a device's steady totals, in ns."""


@dataclass(frozen=True)
class BudgetResult:
    """One budget checked: its name and limit as written, whether it held, and the figure."""

    name: str
    limit: str
    held: bool
    figure: str
    value: float | None
    """The number compared with the limit (a share, ms, or 1 where a forbidden finding fired)."""


@dataclass(frozen=True)
class CheckResult:
    """Every budget of one ``traceq check``."""

    trace: str
    baseline: str | None
    results: tuple[BudgetResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.held for r in self.results)


def _worst(devices: Sequence[DeviceBreakdown], part_ns: PartNs) -> tuple[float, DeviceBreakdown]:
    shares = [(part_ns(d) / d.steady.dur_ns, d) for d in devices]
    return max(shares, key=lambda x: x[0])


def _idle_ns(d: DeviceBreakdown) -> int:
    return sum(int(d.steady.idle_by_cause_ns.get(c, 0)) for c in CAUSES)


def _on(devices: Sequence[DeviceBreakdown], d: DeviceBreakdown) -> str:
    where = device_label(d.rank, d.device, pid=d.pid)
    return f" on {where}, the worst of {len(devices)} devices" if len(devices) > 1 else f" on {where}"


def _share_limit(name: str, limit: float, devices: Sequence[DeviceBreakdown], what: str, part: PartNs) -> BudgetResult:
    share, d = _worst(devices, part)
    figure = f"{what} {format_share(share)} of the steady step{_on(devices, d)}"
    return BudgetResult(name, format_share(limit), share <= limit, figure, share)


def _spread(report: Report) -> str:
    s = step_stats(steady_durations(report, measured(report)), 0)
    if s.p10_ns is None or s.p90_ns is None:
        return f"{s.count} steps"
    return f"p10–p90 {format_ns(s.p10_ns)}–{format_ns(s.p90_ns)}, {s.count} steps"


def check_budgets(
    report: Report, budgets: Budgets, *, baseline: Report | None = None, names: tuple[str, str | None]
) -> CheckResult:
    """Check ``budgets`` on ``report`` (``max_regression`` against ``baseline``).  ``names``: the trace's
    and the baseline's, for the results.  Raises :class:`InvalidArgumentError` where a budget cannot be
    checked (no MFU for ``min_mfu``, no baseline for ``max_regression``)."""
    devices = measured(report)
    if not devices:
        raise InvalidArgumentError("has no GPU device with steady step time: no budget can be checked", path=names[0])
    out: list[BudgetResult] = []
    if budgets.max_idle is not None:
        out.append(_share_limit("max_idle", budgets.max_idle, devices, "GPU idle", _idle_ns))
    if budgets.max_exposed_comm is not None:
        exposed = _share_limit(
            "max_exposed_comm",
            budgets.max_exposed_comm,
            devices,
            "exposed communication",
            lambda d: d.steady.exposed_comm_ns,
        )
        out.append(exposed)
    if budgets.min_mfu is not None:
        if report.mfu is None:
            raise InvalidArgumentError(
                "min_mfu needs the MFU, and the trace has none without the model",
                path=names[0],
                hint="pass the model options (--params and --tokens-per-step, or --flops-per-step)",
            )
        mfu = report.mfu.mean_mfu
        figure = f"MFU {format_share(mfu)} over the steady steps"
        out.append(BudgetResult("min_mfu", format_share(budgets.min_mfu), mfu >= budgets.min_mfu, figure, mfu))
    stats = step_stats(steady_durations(report, devices), 0)
    if budgets.max_step_ms is not None:
        median_ms = (stats.median_ns or 0.0) / 1e6
        figure = f"median steady step {format_ns(stats.median_ns or 0.0)} ({_spread(report)})"
        held = median_ms <= budgets.max_step_ms
        out.append(BudgetResult("max_step_ms", f"{budgets.max_step_ms:g} ms", held, figure, median_ms))
    if budgets.max_regression is not None:
        out.append(_regression(budgets.max_regression, report, baseline, names[0]))
    for fid in budgets.forbid:
        out.append(_forbidden(fid, report))
    return CheckResult(names[0], names[1], tuple(out))


def _regression(limit: float, report: Report, baseline: Report | None, name: str) -> BudgetResult:
    if baseline is None:
        raise InvalidArgumentError(
            "max_regression compares with a baseline, and none was given",
            path=name,
            hint="pass --baseline BEFORE (a trace or a saved JSON report)",
        )
    base_devices = measured(baseline)
    if not base_devices:
        raise InvalidArgumentError("the baseline has no GPU device with steady step time", path=name)
    b = step_stats(steady_durations(baseline, base_devices), 0)
    a = step_stats(steady_durations(report, measured(report)), 0)
    assert b.median_ns is not None and a.median_ns is not None
    change = (a.median_ns - b.median_ns) / b.median_ns
    noise = noise_ns(b, a)
    se = f"; the medians' difference has a standard error of {format_ns(noise)}" if noise is not None else ""
    figure = (
        f"median steady step {format_ns(b.median_ns)} -> {format_ns(a.median_ns)} ({signed_share(change)}); "
        f"baseline {_spread(baseline)}, this trace {_spread(report)}{se}"
    )
    return BudgetResult("max_regression", format_share(limit), change <= limit, figure, change)


def _forbidden(fid: str, report: Report) -> BudgetResult:
    label = FINDING_LABELS.get(fid, fid)
    fired = [f for f in report.findings if f.id == fid]
    withheld = [w for w in report.withheld_findings if w.id == fid]
    if fired:
        f = fired[0]
        figure = f"the {label} finding fired ({f.severity}, {format_share(f.share)} of the step): {f.title}"
        return BudgetResult(f"forbid {fid}", "does not fire", False, figure, 1.0)
    if withheld:
        figure = f"the {label} finding fired but was withheld ({withheld[0].reason}): it cannot be ruled out"
        return BudgetResult(f"forbid {fid}", "does not fire", False, figure, 1.0)
    return BudgetResult(f"forbid {fid}", "does not fire", True, f"the {label} finding did not fire", 0.0)


def render_check_text(result: CheckResult) -> str:
    """One line per budget (held or FAILED, the name and limit, the figure), then the outcome."""
    lines = []
    for r in result.results:
        # The figure may quote a trace's strings (a finding's title): no control characters to the terminal.
        lines.append(printable(f"{'held' if r.held else 'FAILED':<7}{r.name} {r.limit}: {r.figure}"))
    failed = sum(not r.held for r in result.results)
    total = len(result.results)
    lines.append(f"all {total} budget(s) held" if not failed else f"{failed} of {total} budget(s) failed")
    return "\n".join(lines) + "\n"
