"""A frame's columns as NumPy arrays, each copied out of polars once per report.

Several analyses read the same columns of the same frame as NumPy arrays (the GPU activity's
times, its launch keys), and a column in many chunks -- as every column of a table imported in
pieces is -- is copied by each ``to_numpy``: ten million times are an 80 MB copy of fresh memory
each time.  :func:`column_array` copies a column once per frame; a column that the caller made
from an array is known by that array (:func:`known_arrays`), never copied back; and a frame
made of another's very columns (:func:`selected`, :func:`derived_from`) reads that frame's arrays,
made by whichever of the two asks first.

The arrays are read-only: a caller that wrote to a shared one would change every other caller's
(a write raises instead).  A frame is keyed by its identity (``is``, as in
:mod:`traceq.analyses.memo`: a frame's contents never change) through a weak reference, so the
store never keeps a frame alive, and its arrays go with it or at :func:`forget`.  Thread-safe.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

ArrayKey = tuple[str, int | None]
"""A column's name and the value its nulls read as (``None``: as ``to_numpy`` gives them)."""
Arrays = dict[ArrayKey, np.ndarray[Any, Any]]


@dataclass
class _Entry:
    """What is known of one frame: its arrays, and the entries of the frames whose very columns it
    holds (held here, so that a frame's arrays outlive it for as long as a frame made of it lives)."""

    frame: weakref.ref[pl.DataFrame]
    arrays: Arrays = field(default_factory=dict)
    sources: list[tuple[_Entry, frozenset[str]]] = field(default_factory=list)

    def chain(self, name: str) -> list[_Entry]:
        """This entry, then the entries it reads the column ``name`` through, nearest first."""
        out = [self]
        while (nearer := next((src for src, names in out[-1].sources if name in names), None)) is not None:
            out.append(nearer)
        return out


_ENTRIES: dict[int, _Entry] = {}
"""Per live frame, by ``id`` (its entry's weak reference says whether it is still that frame)."""
_LOCK = threading.RLock()  # (re-entrant: a frame collected while it is held drops its entry)


def column_array(frame: pl.DataFrame, name: str, fill_null: int | None = None) -> np.ndarray[Any, Any]:
    """``frame[name]`` as NumPy (its nulls as ``fill_null`` where given, else as ``to_numpy`` gives
    them), read-only, made once per frame, column and ``fill_null`` (or once for every frame made
    of the same column, :func:`derived_from`)."""
    key = (name, fill_null)
    with _LOCK:
        chain = _entry(frame).chain(name)
        found = next((entry.arrays[key] for entry in chain if key in entry.arrays), None)
    if found is None:
        column = frame.get_column(name)
        found = (column if fill_null is None else column.fill_null(fill_null)).to_numpy()
        found.flags.writeable = False
    with _LOCK:
        found = chain[-1].arrays.setdefault(key, found)  # (another thread's, where it was first)
        for entry in chain[:-1]:
            entry.arrays[key] = found
    return found


def known_arrays(frame: pl.DataFrame, arrays: Arrays) -> pl.DataFrame:
    """``frame``, with ``arrays`` known for :func:`column_array`: per (column, ``fill_null``), the
    values it would read (the caller made those columns of these arrays).  Makes them read-only."""
    for (name, _), values in arrays.items():
        if values.shape != (frame.height,):
            raise ValueError(f"{values.shape} values of {name!r} for a frame of {frame.height} rows")
    for values in arrays.values():
        values.flags.writeable = False
    with _LOCK:
        known = _entry(frame).arrays
        for key, values in arrays.items():
            known.setdefault(key, values)
    return frame


def derived_from(target: pl.DataFrame, source: pl.DataFrame, names: Iterable[str]) -> pl.DataFrame:
    """``target``, which holds the very columns ``names`` of ``source`` (the same rows, not copies
    made anew): :func:`column_array` of those columns reads the same arrays for both frames."""
    wanted = frozenset(names)
    if wanted and target is not source:
        with _LOCK:
            _entry(target).sources.append((_entry(source), wanted))
    return target


def selected(frame: pl.DataFrame, *names: str) -> pl.DataFrame:
    """``frame.select(*names)`` (columns by name), which reads ``frame``'s arrays of them."""
    return derived_from(frame.select(*names), frame, names)


def forget() -> None:
    """Let go of every array (a report is done)."""
    with _LOCK:
        _ENTRIES.clear()


def _entry_of(frame: pl.DataFrame) -> _Entry | None:
    """``frame``'s entry, if it has one (``_LOCK`` held)."""
    entry = _ENTRIES.get(id(frame))
    return entry if entry is not None and entry.frame() is frame else None


def _entry(frame: pl.DataFrame) -> _Entry:
    """``frame``'s entry, made where it has none (``_LOCK`` held); it goes when the frame does."""
    entry = _entry_of(frame)
    if entry is None:
        key = id(frame)
        entry = _Entry(weakref.ref(frame, lambda dead: _drop(key, dead)))
        _ENTRIES[key] = entry
    return entry


def _drop(key: int, dead: weakref.ref[pl.DataFrame]) -> None:
    """A frame's entry, once the frame is gone (not a newer frame's that took its ``id``)."""
    with _LOCK:
        entry = _ENTRIES.get(key)
        if entry is not None and entry.frame is dead:
            del _ENTRIES[key]


__all__ = ["ArrayKey", "Arrays", "column_array", "derived_from", "forget", "known_arrays", "selected"]
