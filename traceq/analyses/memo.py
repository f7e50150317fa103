"""One-slot memos keyed on an event frame itself: a derived frame computed once per report.

Several analyses derive the same frame from the same event table (the CPU rows, each launch's
first call): :func:`per_frame` computes it once and hands the same result to every caller for as
long as that very frame (``is``, not equality: a frame's contents never change) is the one asked
about.  A weak reference keys the slot, so a memo never keeps a frame alive, and the slot holds
one result: memory stays that of one report's derived frames.  Thread-safe; a function memoized
here must be a pure function of its frame and its other (hashable) arguments.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Concatenate, ParamSpec, TypeVar

import polars as pl

from traceq.analyses import column_arrays

P = ParamSpec("P")
R = TypeVar("R")

_SLOTS: list[list[Any]] = []
"""Every memo's slot, so that :func:`forget` can empty them all."""
_SLOTS_LOCK = threading.Lock()


def forget() -> None:
    """Empty every memo, and let go of the frames' NumPy arrays (:mod:`traceq.analyses.column_arrays`):
    the report pipeline calls this once a report is done, so that derived frames do not stay in
    memory beside a trace that a caller keeps."""
    with _SLOTS_LOCK:
        for slot in _SLOTS:
            slot.clear()
    column_arrays.forget()


def new_slot() -> list[Any]:
    """An empty one-slot memo's list, which :func:`forget` empties too (for a memo kept elsewhere)."""
    slot: list[Any] = []
    with _SLOTS_LOCK:
        _SLOTS.append(slot)
    return slot


def per_frame(fn: Callable[Concatenate[pl.DataFrame, P], R]) -> Callable[Concatenate[pl.DataFrame, P], R]:
    """``fn(frame, *args)`` memoized on the frame's identity and the other arguments (one slot)."""
    lock = threading.Lock()
    slot: list[tuple[weakref.ref[pl.DataFrame], tuple[Hashable, ...], R]] = new_slot()

    def memoized(frame: pl.DataFrame, /, *args: P.args, **kwargs: P.kwargs) -> R:
        key = (*args, *sorted(kwargs.items()))
        with lock:
            if slot and slot[0][0]() is frame and slot[0][1] == key:
                return slot[0][2]
        result = fn(frame, *args, **kwargs)
        with lock:
            slot[:] = [(weakref.ref(frame), key, result)]
        return result

    functools.update_wrapper(memoized, fn)  # (its name and docstring, for help() and the docs)
    return memoized


__all__ = ["forget", "new_slot", "per_frame"]
