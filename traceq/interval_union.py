"""The union of intervals as arrays: the work behind :func:`traceq.intervals.merge`.

Intervals sorted by start (one stream's kernels, a thread's calls, anything already merged) are
merged by walking them once, keeping how far the open component reaches.  Where traceq was built
with its compiled kernel (``traceq/_interval_kernels.c``, built by ``setup.py`` beside the
readers) that walk is a C loop that makes no array but its result, and none at all when the input
already is its own union.  NumPy's way, kept for installs without a C compiler, makes four arrays
of the input's size (a running maximum of the ends, a comparison with the next starts, the
boundaries' positions, the components gathered), which on large inputs cost more in fresh memory
than in arithmetic.  Intervals not sorted by start are merged by sorting their starts and their
ends apart, either way.  Both ways give the same arrays (``tests/test_interval_union.py``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

from traceq.sorted_search import is_sorted


def _kernel() -> ModuleType | None:
    # (imported by name: a static import of a compiled module reads, to the import graph that the
    # architecture tests and contracts check, as an import of the whole traceq package)
    try:
        return importlib.import_module("traceq._interval_kernels")
    except ImportError:  # an install without a C compiler: NumPy's way
        return None


_interval_kernels = _kernel()

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Arrays = tuple[Int64Array, Int64Array]

COMPILED: Final = _interval_kernels is not None
"""Whether this install walks sorted intervals with the compiled kernel."""
_UNSORTED: Final = -1
_ALREADY_MERGED: Final = -2


def union_arrays(
    start_ns: Int64Array, end_ns: Int64Array, mask: BoolArray | None = None, *, compiled: bool = COMPILED
) -> Arrays:
    """The union of the intervals ``[start_ns, end_ns)`` that ``mask`` selects (None: all), as the
    start and end arrays of its components: sorted, non-empty, disjoint, not touching.  Without a
    mask, intervals that already are their own union come back as the very arrays given; the
    arrays given are never written.  ``compiled=False`` takes NumPy's way where the kernel is built."""
    if compiled and _interval_kernels is not None:
        merged = _sorted_compiled(start_ns, end_ns, mask)
        if merged is None and mask is not None:
            start_ns, end_ns = _picked(start_ns, end_ns, mask)
    else:
        if mask is not None:
            start_ns, end_ns = _picked(start_ns, end_ns, mask)
        merged = _sorted_numpy(start_ns, end_ns)
    return merged if merged is not None else _unsorted(start_ns, end_ns)


def _picked(start_ns: Int64Array, end_ns: Int64Array, mask: BoolArray) -> Arrays:
    picked = np.flatnonzero(mask)
    return start_ns[picked], end_ns[picked]


def _sorted_compiled(start_ns: Int64Array, end_ns: Int64Array, mask: BoolArray | None) -> Arrays | None:
    """The kernel's walk; None where the selected starts decrease somewhere."""
    assert _interval_kernels is not None
    start_ns, end_ns = np.ascontiguousarray(start_ns, np.int64), np.ascontiguousarray(end_ns, np.int64)
    flags = None if mask is None else np.ascontiguousarray(mask, np.bool_)
    # Memory never written costs nothing: only the pages of the components written are paged in.
    out_start, out_end = np.empty(start_ns.size, np.int64), np.empty(start_ns.size, np.int64)
    k = _interval_kernels.merge_sorted(start_ns, end_ns, flags, out_start, out_end)
    if k == _UNSORTED:
        return None
    if k == _ALREADY_MERGED:
        return start_ns, end_ns
    # Shrunk in place (realloc: a large block's tail is handed back, nothing copied), so that a
    # few components do not hold the address space of all the intervals.
    out_start.resize(k, refcheck=False)
    out_end.resize(k, refcheck=False)
    return out_start, out_end


def _sorted_numpy(start_ns: Int64Array, end_ns: Int64Array) -> Arrays | None:
    """NumPy's walk; None where the starts decrease somewhere."""
    if not is_sorted(start_ns):
        return None
    nonempty = start_ns < end_ns
    n = int(np.count_nonzero(nonempty))
    if n < start_ns.size:
        start_ns, end_ns = start_ns[nonempty], end_ns[nonempty]
    if n == 0:
        return start_ns, end_ns
    # A running maximum of the ends is how far the current component reaches, so no sort is needed.
    reach = np.maximum.accumulate(end_ns)
    boundary = np.flatnonzero(reach[:-1] < start_ns[1:])
    if boundary.size == n - 1:
        return start_ns, end_ns
    return components(start_ns, reach, boundary)


def _unsorted(start_ns: Int64Array, end_ns: Int64Array) -> Arrays:
    """The union of intervals in any order, O(n log n)."""
    nonempty = start_ns < end_ns
    n = int(np.count_nonzero(nonempty))
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # Sorting starts and ends separately is enough (two SIMD sorts beat one argsort threefold):
    # the (i+1)-th smallest end precedes the (i+2)-th smallest start exactly when nothing is
    # running between them, which is a boundary between components.
    start, end = start_ns.copy(), end_ns.copy()  # sorted in place below; the input is never touched
    if n < start.size:
        # A zero-length interval would pose as a component of its own; overwriting it with a
        # copy of a real interval changes nothing and is cheaper than compressing the arrays.
        empty, real = ~nonempty, int(np.argmax(nonempty))
        start[empty], end[empty] = start[real], end[real]
    start.sort()
    end.sort()
    return components(start, end, np.flatnonzero(end[:-1] < start[1:]))


def components(start: Int64Array, end: Int64Array, boundary: npt.NDArray[np.intp]) -> Arrays:
    """Components of sorted intervals, where ``boundary`` holds each index after which one ends
    (``end`` is how far each interval's component reaches)."""
    first = np.concatenate(([0], boundary + 1))
    last = np.concatenate((boundary, [start.size - 1]))
    return start[first], end[last]


__all__ = ["COMPILED", "components", "union_arrays"]
