"""Units and labels (traceq.units): what every output prints for a duration, a share, a size, a name, a device."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceq import units


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (850, "850 ns"),
        (999, "999 ns"),
        (1_000, "1.00 µs"),
        (12_340, "12.3 µs"),
        (123_400, "123 µs"),
        (4_561_000, "4.56 ms"),
        (123_000_000, "123 ms"),
        (1_234_000_000, "1.23 s"),
        (-12_340, "-12.3 µs"),
    ],
)
def test_durations_keep_three_significant_digits(ns: int, text: str) -> None:
    assert units.format_ns(ns) == text


@pytest.mark.parametrize(
    ("ns", "evidence", "note"),
    [
        (850, "850 ns", "850 ns"),
        (123_400, "123.4 µs", "123.40 µs"),
        (12_345_000, "12.35 ms", "12.35 ms"),
        (1_234_000_000, "1.23 s", "1.23 s"),
    ],
)
def test_fixed_decimals_per_unit(ns: int, evidence: str, note: str) -> None:
    assert units.evidence_ns(ns) == evidence
    assert units.format_ns(ns, decimals=units.NOTE_DECIMALS) == note


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_every_duration_names_its_unit_and_rounds_to_the_value(ns: int) -> None:
    for text in (units.format_ns(ns), units.evidence_ns(ns)):
        number, unit = text.split(" ")
        scale = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}[unit]
        assert abs(ns) < 1_000 or 1 <= abs(ns) / scale < 1_000 or unit == "s"
        assert float(number) * scale == pytest.approx(ns, rel=0.006, abs=0.5 * scale)


def test_shares_and_percentages() -> None:
    assert units.format_share(0.341) == "34.1%"
    assert units.pct(1, 8) == "12.5%"
    assert units.pct(5, 0) == "-"


def test_byte_sizes() -> None:
    assert [units.format_bytes(n) for n in (64, 512 << 10, 16 << 20, 3 << 30)] == [
        "64 B",
        "512.0 KiB",
        "16.0 MiB",
        "3.0 GiB",
    ]


def test_names_are_cut_with_an_ellipsis() -> None:
    assert units.shorten("abcdef", 6) == "abcdef"
    assert units.shorten("abcdefg", 6) == "abcde…"
    name = "void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, float>(int, float*)"
    assert units.short_kernel_name(name) == "at::native::vectorized_elementwise_kernel<4, float>"
    assert units.short_kernel_name(name, limit=20) == "at::native::vectori…"


def test_control_characters_are_spelled_as_escapes_for_the_terminal() -> None:
    raw = "a\x00b\x07c\rd\ne\tf\x1b[2Jg\x7fh\x9bi"
    assert units.printable(raw) == "a\\x00b\\x07c\\rd\\ne\\tf\\x1b[2Jg\\x7fh\\u009bi"
    assert units.printable("aten::mm → é, 中文") == "aten::mm → é, 中文"  # everything else as it is


def test_device_labels_in_their_three_forms() -> None:
    assert units.device_label(2, 0) == "rank 2, GPU 0"
    assert units.device_label(None, 1, pid=4321) == "GPU 1, pid 4321"
    assert units.device_label(None, 1) == "GPU 1"
    assert units.device_label(2, 0, style="cell") == "rank 2 · GPU 0"
    assert units.device_label(None, 0, style="cell") == "GPU 0"
    assert units.device_label(2, 0, style="column") == "r2 GPU 0"
    assert units.capitalised(units.device_label(2, 0)) == "Rank 2, GPU 0"


def test_where_in_a_step() -> None:
    assert units.step_position("ProfilerStep#3", 1_200_000) == "ProfilerStep#3 +1.20 ms"
    assert units.step_position(None, None) == "outside the step windows"
