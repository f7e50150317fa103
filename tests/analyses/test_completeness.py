"""GPU work missing from a trace: which launches lost their work, which caveats follow, and which
findings they withhold (``docs/findings.md``, "Incomplete data")."""

from __future__ import annotations

import dataclasses

import pytest

from traceq.analyses import Options, analyze
from traceq.analyses.completeness import WITHHOLD_SHARE, CoverageRow, data_caveats, with_caveats, work_coverage
from traceq.analyses.model import DataCaveat, DeviceBreakdown, DeviceRef, Evidence, Finding
from traceq.stats import CategoryCount, ImportStats

from ..builders import SOURCE, api, kernel, launch, memcpy, step, table


def _coverage(*rows: dict[str, object]) -> list[dict[str, object]]:
    return work_coverage(table(*rows)).to_dicts()


def test_a_launch_whose_kernel_is_in_the_trace_is_covered() -> None:
    rows = _coverage(launch(0, 5, corr=1), kernel(10, 20, corr=1), launch(30, 35, corr=2), kernel(40, 50, corr=2))
    assert rows == [{"source": SOURCE, "pid": 100, "activities": 2, "launches": 2, "unrecorded": 0}]


def test_a_launch_with_no_kernel_before_the_last_activity_is_unrecorded() -> None:
    rows = _coverage(launch(0, 5, corr=1), launch(30, 35, corr=2), kernel(40, 50, corr=2))
    assert rows[0]["unrecorded"] == 1


def test_launches_after_the_last_activity_are_the_captures_end_not_missing_work() -> None:
    rows = _coverage(launch(0, 5, corr=1), kernel(10, 20, corr=1), launch(30, 35, corr=2), launch(40, 45, corr=3))
    assert rows[0] == {"source": SOURCE, "pid": 100, "activities": 1, "launches": 3, "unrecorded": 0}


def test_a_process_with_launches_and_no_gpu_work_has_every_launch_unrecorded() -> None:
    rows = _coverage(launch(0, 5, corr=1), launch(10, 15, corr=2), step(0, 20))
    assert rows == [{"source": SOURCE, "pid": 100, "activities": 0, "launches": 2, "unrecorded": 2}]


@pytest.mark.parametrize(
    ("name", "counted"),
    [
        ("cudaLaunchKernel", True),
        ("cuLaunchKernelEx", True),
        ("cudaLaunchCooperativeKernel", True),
        ("hipModuleLaunchKernel", True),
        ("cudaGraphLaunch", True),
        ("cudaLaunchHostFunc", False),  # host work on a stream: no GPU activity to expect
        ("cudaStreamSynchronize", False),
        ("cudaMemcpyAsync", False),  # its copy is GPU work, but a copy of 0 bytes records none
    ],
)
def test_only_kernel_launching_calls_expect_gpu_work(name: str, counted: bool) -> None:
    rows = _coverage(api(name, 0, 5, corr=1), kernel(10, 20, corr=9))
    assert rows[0]["launches"] == int(counted)
    assert rows[0]["unrecorded"] == int(counted)


# --- caveats ---------------------------------------------------------------------------------


def _device_and_stats(
    kernels: int, skipped: int, *, extra_launches: int = 0
) -> tuple[tuple[DeviceBreakdown, ...], list[CoverageRow], ImportStats]:
    """One device with ``kernels`` kernels and launches, plus ``extra_launches`` launches whose
    kernel is missing, and import statistics that skipped ``skipped`` kernel rows."""
    rows = [step(0, 10_000 * (kernels + extra_launches + 1))]
    for i in range(kernels + extra_launches):
        rows.append(launch(10_000 * i, 10_000 * i + 100, corr=i + 1))
        if i < kernels or i >= kernels + extra_launches:
            rows.append(kernel(10_000 * i + 200, 10_000 * i + 2_000, corr=i + 1))
    rows.append(kernel(10_000 * (kernels + extra_launches), 10_000 * (kernels + extra_launches) + 100, corr=None))
    events = table(*rows)
    analysis = analyze(events, Options())
    stats = ImportStats.of(
        [
            CategoryCount(
                SOURCE, "kernel", kernels + 1 + skipped, kernels + 1, {"invalid interval": skipped}, kind="kernel"
            )
        ]
    )
    return analysis.devices, list(work_coverage(events).iter_rows()), stats


def test_rows_skipped_on_import_make_one_caveat_with_their_reasons() -> None:
    devices, coverage, stats = _device_and_stats(kernels=9, skipped=2)
    (caveat,) = data_caveats(devices, coverage, stats)
    assert (caveat.id, caveat.source, caveat.devices, caveat.missing, caveat.expected) == (
        "gpu_rows_skipped",
        SOURCE,
        (0,),
        2,
        12,
    )
    assert caveat.reasons == {"invalid interval": 2}
    assert "2 of 12 GPU activities" in caveat.text and "invalid interval: 2" in caveat.text
    assert not caveat.withholds


def test_a_kernel_skipped_on_import_is_counted_once_not_also_as_an_unrecorded_launch() -> None:
    # Two launches lost their kernel; the import skipped two kernel rows: the same two kernels.
    devices, coverage, stats = _device_and_stats(kernels=8, skipped=2, extra_launches=2)
    caveats = data_caveats(devices, coverage, stats)
    assert [c.id for c in caveats] == ["gpu_rows_skipped"]


def test_unrecorded_launches_beyond_the_skipped_rows_are_their_own_caveat() -> None:
    devices, coverage, stats = _device_and_stats(kernels=8, skipped=1, extra_launches=3)
    skipped, unrecorded = data_caveats(devices, coverage, stats)
    assert (skipped.id, skipped.missing) == ("gpu_rows_skipped", 1)
    assert (unrecorded.id, unrecorded.pid, unrecorded.missing) == ("launched_work_unrecorded", 100, 2)
    assert unrecorded.expected == 9 + 2  # the activities held, and the two missing


@pytest.mark.parametrize(("skipped", "withholds"), [(3, False), (4, True)])
def test_a_quarter_of_the_gpu_work_missing_withholds_the_findings(skipped: int, withholds: bool) -> None:
    # 12 activities kept: 3 skipped is 3/15 = 20%, 4 skipped is 4/16 = 25% (WITHHOLD_SHARE).
    devices, coverage, stats = _device_and_stats(kernels=11, skipped=skipped)
    (caveat,) = data_caveats(devices, coverage, stats)
    assert caveat.expected == 12 + skipped
    assert (caveat.missing >= WITHHOLD_SHARE * caveat.expected) == withholds == caveat.withholds


def _finding(device: int, pid: int = 100) -> Finding:
    return Finding(
        id=f"rule_{device}",
        severity="high",
        title="A cause",
        share=0.3,
        metrics={},
        evidence=(Evidence("it", device=device),),
        fix="Fix it.",
        measured_on=DeviceRef(SOURCE, pid, None, device),
    )


def _caveat(device: int, *, withholds: bool) -> DataCaveat:
    return DataCaveat(
        id="launched_work_unrecorded",
        source=SOURCE,
        pid=100,
        rank=None,
        devices=(device,),
        missing=1,
        expected=4,
        reasons={},
        withholds=withholds,
        text=f"GPU {device} lacks work",
    )


def _two_devices() -> tuple[DeviceBreakdown, ...]:
    events = table(
        launch(0, 5, corr=1), kernel(10, 20, corr=1), launch(30, 35, corr=2), kernel(40, 50, corr=2, device=1)
    )
    return analyze(events, Options()).devices


def test_a_finding_carries_the_caveats_of_the_device_it_was_measured_on_only() -> None:
    devices = _two_devices()
    kept, withheld = with_caveats(
        [_finding(0), _finding(1)],
        [_caveat(0, withholds=False)],
        devices,
    )
    assert withheld == ()
    assert [f.caveats for f in kept] == [("GPU 0 lacks work",), ()]
    assert dataclasses.replace(kept[0], caveats=()) == _finding(0)


def test_a_withholding_caveat_moves_the_finding_to_the_withheld_list() -> None:
    devices = _two_devices()
    kept, withheld = with_caveats(
        [_finding(0), _finding(1)],
        [_caveat(1, withholds=True)],
        devices,
    )
    assert [f.id for f in kept] == ["rule_0"]
    assert [(w.id, w.title, w.reason) for w in withheld] == [("rule_1", "A cause", "GPU 1 lacks work")]


def test_a_caveat_of_another_process_on_the_same_gpu_number_does_not_apply() -> None:
    devices = _two_devices()
    kept, _ = with_caveats(
        [_finding(0, pid=200)],
        [_caveat(0, withholds=True)],
        devices,
    )
    assert [f.caveats for f in kept] == [()]


def test_memcpys_are_gpu_work_for_the_last_activity() -> None:
    rows = _coverage(launch(0, 5, corr=1), memcpy(100, 200, corr=5))
    assert rows[0]["unrecorded"] == 1
