"""The byte stage of the Kineto importer (``trace_bytes``): the gzip inflater held to a distance
behind the parser, and moving the pages of parsed bytes to where the inflater writes next.

Reading whole files through both parsers (plain, mapped, gzip while it inflates) is specified in
``test_two_parsers.py``.
"""

from __future__ import annotations

import gzip
import mmap
import sys
import time
from pathlib import Path

import pytest

from traceq.importers.kineto import trace_bytes


def _fill_once_past(inflating: trace_bytes.Inflating, at_least: int) -> int:
    """How far the inflater got, once it got ``at_least`` bytes (waiting up to 10 s for them) and
    then had a while to go on if nothing held it back."""
    deadline = time.monotonic() + 10
    while len(inflating.available(0)) < at_least and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)
    return len(inflating.available(0))


def test_an_inflater_held_to_a_distance_waits_for_the_parser_and_never_deadlocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The inflater goes at most keep_ahead bytes (plus one step) past the last release, except as
    # far as a reader asks; releases let it on; lifting the limit lets it finish.  Released bytes
    # read as zeros, all others are the file's.
    step, ahead = 64 << 10, 256 << 10
    monkeypatch.setattr(trace_bytes, "_READ_STEP_BYTES", step)
    text = b"".join(b'{"ph": "X", "ts": %d}, ' % i for i in range(200_000))
    assert len(text) > 16 * ahead
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text))
    inflating = trace_bytes.Inflating(packed, len(text))
    inflating.keep_ahead(ahead)
    assert ahead <= _fill_once_past(inflating, ahead) <= ahead + step
    asked = 6 * ahead
    assert len(inflating.available(asked)) >= asked  # a reader past the limit is served
    assert _fill_once_past(inflating, asked) <= asked + step
    inflating.release(0, 4 * ahead)
    assert _fill_once_past(inflating, asked) <= asked + step  # 4 * ahead released + ahead: below asked
    inflating.release(4 * ahead, asked)
    there = _fill_once_past(inflating, asked + ahead)
    assert asked + ahead <= there <= asked + ahead + step  # on again, as far as allowed
    inflating.release(asked, 16 * ahead)  # past what is there: only what is there goes
    inflating.keep_ahead(None)
    whole = inflating.whole()
    gone = there - there % mmap.PAGESIZE
    assert bytes(whole[:gone]) == bytes(gone)
    assert bytes(whole[gone:]) == text[gone:]


# --------------------------------------------------------------------------------------------
# Moving pages

LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux", reason="moving pages is Linux's mremap; elsewhere it declines")


@LINUX_ONLY
def test_moved_pages_keep_their_bytes_at_the_target_and_leave_zeros_behind() -> None:
    page = mmap.PAGESIZE
    memory = mmap.mmap(-1, 16 * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory[: 4 * page] = bytes(range(256)) * (4 * page // 256)
    before = memory[: 4 * page]
    assert trace_bytes.move_pages(memory, 0, 4 * page, 8 * page)
    assert memory[8 * page : 12 * page] == before
    assert memory[: 4 * page] == bytes(4 * page)  # still mapped, reading as zeros
    memory[:page] = b"x" * page  # and still writable
    assert memory[:page] == b"x" * page


@LINUX_ONLY
@pytest.mark.parametrize(
    ("begin", "end", "target"),
    [
        (1, 1, 8),  # not page-aligned (in pages below; the offset 1 is one byte)
        (0, 4, 2),  # overlapping ranges
        (0, 4, 14),  # target runs past the end
        (4, 4, 8),  # nothing to move
        (4, 2, 8),  # an inverted range
    ],
)
def test_moving_pages_declines_what_it_cannot_do_safely(begin: int, end: int, target: int) -> None:
    page = mmap.PAGESIZE
    memory = mmap.mmap(-1, 16 * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory[:] = b"k" * (16 * page)
    begin_at = 1 if begin == 1 else begin * page
    assert not trace_bytes.move_pages(memory, begin_at, end * page, target * page)
    assert memory[:] == b"k" * (16 * page)  # untouched


def test_moving_pages_needs_writable_memory(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * mmap.PAGESIZE * 2)
    with (
        path.open("rb") as fh,
        mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
        pytest.raises(TypeError),
    ):
        trace_bytes.move_pages(mapped, 0, mmap.PAGESIZE, mmap.PAGESIZE)
