"""The byte stage of the Kineto importer (``trace_bytes``): the gzip inflater held to a distance
behind the parser, and moving the pages of parsed bytes to where the inflater writes next.

Reading whole files through both parsers (plain, mapped, gzip while it inflates) is specified in
``test_two_parsers.py``.
"""

from __future__ import annotations

import gzip
import mmap
import threading
from pathlib import Path

import pytest

from traceq.importers.compiled import build
from traceq.importers.kineto import trace_bytes

_WAIT_S = 120.0
"""How long a test waits for the inflater before calling it stuck: a guard against a deadlock, far
beyond any machine's load, never a measurement."""


class _Watched(trace_bytes.Inflating):
    """An :class:`~trace_bytes.Inflating` that records each time its inflater stops to wait for the
    parser, and how far it had inflated then: the inflater's own decision, seen from inside, so that
    a test knows where it stopped without waiting a while to see whether it goes on."""

    def __init__(self, path: Path, size_hint: int) -> None:
        self.parks: list[int] = []
        self._parked = threading.Condition()
        super().__init__(path, size_hint)  # starts the inflater, which may park at once

    def _held_back(self) -> bool:
        held = super()._held_back()
        if held:
            with self._parked:
                self.parks.append(self._filled)
                self._parked.notify_all()
        return held

    def next_park(self, after: int) -> int:
        """How far the inflater had got when it next stopped to wait, after ``after`` stops."""
        with self._parked:
            if not self._parked.wait_for(lambda: len(self.parks) > after, timeout=_WAIT_S):
                raise AssertionError(f"the inflater did not stop to wait within {_WAIT_S:.0f} s: never held, or stuck")
            return self.parks[after]


class _GatedGzip:
    """The real gunzip, whose first read waits for ``gate``: the test sets the limit before the
    inflater has inflated a byte (else a busy machine could let it finish first)."""

    def __init__(self, inner: gzip.GzipFile, gate: threading.Event) -> None:
        self._inner, self._gate = inner, gate

    def __enter__(self) -> _GatedGzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()

    def readinto(self, view: memoryview) -> int:
        if not self._gate.wait(_WAIT_S):
            raise AssertionError("the test never opened the gate")
        return self._inner.readinto(view)

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


def test_an_inflater_held_to_a_distance_waits_for_the_parser_and_never_deadlocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The inflater goes at most keep_ahead bytes (plus one step) past the last release, except as
    # far as a reader asks; releases let it on; lifting the limit lets it finish.  Released bytes
    # read as zeros, all others are the file's.  Where it stops is recorded by the inflater itself
    # (_Watched), so nothing here depends on how fast either thread runs.
    step, ahead = 64 << 10, 256 << 10
    monkeypatch.setattr(trace_bytes, "_READ_STEP_BYTES", step)
    gate = threading.Event()
    real_gunzip = trace_bytes._gunzip
    monkeypatch.setattr(trace_bytes, "_gunzip", lambda path: _GatedGzip(real_gunzip(path), gate))
    text = b"".join(b'{"ph": "X", "ts": %d}, ' % i for i in range(200_000))
    assert len(text) > 16 * ahead
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text))
    inflating = _Watched(packed, len(text))
    inflating.keep_ahead(ahead)
    gate.set()
    assert ahead <= inflating.next_park(after=0) <= ahead + step
    asked = 6 * ahead
    stops = len(inflating.parks)
    assert len(inflating.available(asked)) >= asked  # a reader past the limit is served
    assert asked <= inflating.next_park(after=stops) <= asked + step  # and then it stops again
    stops = len(inflating.parks)
    inflating.release(0, 4 * ahead)  # 4 * ahead released + ahead: still below asked
    assert inflating.next_park(after=stops) == inflating.parks[stops - 1]  # woken, and it stays
    stops = len(inflating.parks)
    inflating.release(4 * ahead, asked)
    there = inflating.next_park(after=stops)
    assert asked + ahead <= there <= asked + ahead + step  # on again, as far as allowed
    inflating.release(asked, 16 * ahead)  # past what is there: only what is there goes
    inflating.keep_ahead(None)
    whole = inflating.whole()
    gone = there - there % mmap.PAGESIZE
    assert bytes(whole[:gone]) == bytes(gone)
    assert bytes(whole[gone:]) == text[gone:]


# --------------------------------------------------------------------------------------------
# Moving pages

LINUX_ONLY = pytest.mark.skipif(
    not build().page_moves, reason="moving pages is Linux's mremap, not in this build (not Linux, or TRACEQ_PORTABLE_C)"
)


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
