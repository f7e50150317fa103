"""Two sides compared: :func:`diff_sides` builds the :class:`~traceq.diff.model.Diff` every renderer draws.

The decomposition (:mod:`traceq.diff.decompose`) over each side's measured devices, the devices
paired (:mod:`traceq.diff.sides`), the kernels matched (:mod:`traceq.diff.kernels`), each side's
launch and sync pace, the findings compared by id, MFU, and the verdict
(:mod:`traceq.diff.verdict`).  Warnings say what the comparison had to give up: devices that do not
pair, world sizes that differ, a saved report whose kernel list is truncated.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from traceq.analyses.model import DeviceBreakdown, Finding
from traceq.diff.decompose import decompose, device_parts, side_mean, steady_durations, step_stats
from traceq.diff.kernels import is_complete, kernel_diff
from traceq.diff.model import DevicePair, Diff, FindingChange, HostPace, MfuChange, SideInfo, StepStats
from traceq.diff.sides import Side, measured, pair_devices, world_size
from traceq.diff.verdict import verdict
from traceq.errors import EmptyTraceError
from traceq.report.model import Report


def diff_sides(before: Side, after: Side, *, model_given: bool = False) -> Diff:
    """``after`` compared with ``before``.  ``model_given``: the MFU options were given (a saved
    report's MFU is as it was saved: a warning says so).  Raises
    :class:`~traceq.errors.EmptyTraceError` where a side has no device with steady step time."""
    for side in (before, after):
        if not measured(side.report):
            raise EmptyTraceError(
                f"the {side.role} side has no GPU device with step time: nothing to compare",
                path=side.name,
                hint="diff traces that hold GPU kernels, or check the --step-pattern",
            )
    pairing = pair_devices(before, after)
    warnings = list(pairing.warnings)
    for side in (before, after):
        warnings.extend(_side_warnings(side, model_given))
    decomposition = decompose(
        [device_parts(d) for d in measured(before.report)], [device_parts(d) for d in measured(after.report)]
    )
    info_b, info_a = _info(before), _info(after)
    findings = finding_changes(before.report, after.report)
    return Diff(
        verdict=verdict(decomposition, findings, info_b.steps, info_a.steps),
        before=info_b,
        after=info_a,
        basis=pairing.basis,
        warnings=tuple(warnings),
        decomposition=decomposition,
        devices=tuple(_pair(before.report, after.report, x, y) for x, y in pairing.pairs),
        pace_before=mean_pace(measured(before.report)),
        pace_after=mean_pace(measured(after.report)),
        kernels=kernel_diff(before.report, after.report),
        findings=findings,
        mfu=_mfu(before.report, after.report),
    )


def _side_warnings(side: Side, model_given: bool) -> list[str]:
    report = side.report
    out = []
    if not is_complete(report):
        of = f"its {report.kernel_names:,}" if report.kernel_names is not None else "an unknown number of its"
        out.append(
            f"the {side.role} side ({side.name}) lists {len(report.kernels):,} of {of} kernel names: the others "
            "are not compared (kernels only the other side lists show as unlisted); save the report with "
            "--top-kernels 1000000, or diff the traces"
        )
    if side.saved is not None and model_given:
        mfu = "its MFU is as it was saved" if report.mfu is not None else "it has no MFU"
        out.append(f"the model options do not apply to the saved {side.role} report ({side.name}): {mfu}")
    unmeasured = len(report.devices) - len(measured(report))
    if unmeasured:
        out.append(f"the {side.role} side has {unmeasured} device(s) without steady step time, left out")
    return out


def _info(side: Side) -> SideInfo:
    report = side.report
    devices = measured(report)
    mean = side_mean([device_parts(d) for d in devices])["step"]
    return SideInfo(
        name=side.name,
        saved_report=side.saved is not None,
        files=tuple(f.path for f in report.source.files),
        devices=len(devices),
        world_size=world_size(report),
        steps=step_stats(steady_durations(report, devices), mean),
        kernel_names=report.kernel_names,
        kernels_listed=len(report.kernels),
    )


def _device_stats(report: Report, device: DeviceBreakdown) -> StepStats:
    parts = device_parts(device)
    return step_stats(steady_durations(report, [device]), side_mean([parts])["step"])


def pace(device: DeviceBreakdown) -> HostPace:
    """One device's launches and syncs per steady step, and its regime's evidence."""
    s, r = device.steady, device.regime
    return HostPace(
        launches_per_step=s.launches / s.windows if s.launches is not None and s.windows else None,
        syncs_per_step=s.syncs / s.windows if s.syncs is not None and s.windows else None,
        t_cpu_ns=float(r.t_cpu_ns) if r is not None and r.t_cpu_ns is not None else None,
        t_k_ns=float(r.t_k_ns) if r is not None and r.t_k_ns is not None else None,
        regime=r.verdict if r is not None else None,
    )


def mean_pace(devices: Sequence[DeviceBreakdown]) -> HostPace:
    """The devices' mean launches and syncs per step, the medians of their t_cpu and t_k, and their
    regime where they all share one."""
    paces = [pace(d) for d in devices]

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.fmean(known) if known and len(known) == len(values) else None

    def median(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return float(statistics.median(known)) if known else None

    regimes = {p.regime for p in paces}
    return HostPace(
        launches_per_step=mean([p.launches_per_step for p in paces]),
        syncs_per_step=mean([p.syncs_per_step for p in paces]),
        t_cpu_ns=median([p.t_cpu_ns for p in paces]),
        t_k_ns=median([p.t_k_ns for p in paces]),
        regime=regimes.pop() if len(regimes) == 1 else None,
    )


def _pair(before: Report, after: Report, b: DeviceBreakdown, a: DeviceBreakdown) -> DevicePair:
    pb, pa = device_parts(b), device_parts(a)
    return DevicePair(
        rank_before=b.rank,
        device_before=b.device,
        pid_before=b.pid,
        rank_after=a.rank,
        device_after=a.device,
        pid_after=a.pid,
        before=pb,
        after=pa,
        decomposition=decompose([pb], [pa]),
        median_before_ns=_device_stats(before, b).median_ns,
        median_after_ns=_device_stats(after, a).median_ns,
        pace_before=pace(b),
        pace_after=pace(a),
    )


def finding_changes(before: Report, after: Report) -> tuple[FindingChange, ...]:
    """The findings by id: resolved (before only), new (after only), changed in share, unchanged,
    or withheld (fired on one side, withheld for missing GPU work on the other)."""
    b = {f.id: f for f in before.findings}
    a = {f.id: f for f in after.findings}
    withheld = {w.id for w in (*before.withheld_findings, *after.withheld_findings)}
    out = []
    for fid in sorted(b.keys() | a.keys()):
        x, y = b.get(fid), a.get(fid)
        if x is not None and y is not None:
            status = "unchanged" if x.share == y.share and x.severity == y.severity else "changed"
        elif fid in withheld:
            status = "withheld"
        else:
            status = "resolved" if x is not None else "new"
        out.append(_finding(fid, status, x, y))
    order = {"resolved": 0, "new": 1, "changed": 2, "withheld": 3, "unchanged": 4}
    out.sort(key=lambda f: (order[f.status], -max(f.share_before or 0, f.share_after or 0), f.id))
    return tuple(out)


def _finding(fid: str, status: str, x: Finding | None, y: Finding | None) -> FindingChange:
    return FindingChange(
        id=fid,
        status=status,
        severity_before=x.severity if x else None,
        severity_after=y.severity if y else None,
        share_before=x.share if x else None,
        share_after=y.share if y else None,
        title_before=x.title if x else None,
        title_after=y.title if y else None,
    )


def _mfu(before: Report, after: Report) -> MfuChange | None:
    if before.mfu is None and after.mfu is None:
        return None
    b, a = before.mfu, after.mfu
    return MfuChange(
        mfu_before=b.mean_mfu if b else None,
        mfu_after=a.mean_mfu if a else None,
        hfu_before=b.mean_hfu if b else None,
        hfu_after=a.mean_hfu if a else None,
    )


__all__ = ["diff_sides", "finding_changes", "mean_pace", "pace"]
