"""Work that whichever thread is free first does: a :class:`Deferred` call runs once, on the
first thread that calls it, and :meth:`Deferred.result` hands its answer to any thread.

The breakdown keeps two threads busy, and they seldom finish together: the one that finishes
first would wait for the other.  A caller hands :func:`~traceq.analyses.breakdown.analyze_flagged`
its own work that does not read the analysis (a part's work coverage, its kernels' classes) as
deferred calls, and the first thread to run out of its own work runs them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class Deferred(Generic[R]):
    """``fn(*args, **kwargs)``, run once: by the first thread that calls the object, or by
    :meth:`result` where none has.  An exception it raises is kept and raised by :meth:`result`
    (a worker thread that ran it does not lose it)."""

    def __init__(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> None:
        self._call = functools.partial(fn, *args, **kwargs)
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._value: R | None = None
        self._error: BaseException | None = None

    def __call__(self) -> None:
        """Run it here, unless some thread has begun it already (then return at once)."""
        with self._lock:
            if self._claimed:
                return
            self._claimed = True
        try:
            self._value = self._call()
        except BaseException as exc:  # (kept for result(), on whichever thread asks)
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> R:
        """Its answer: run here if no thread has begun it, else waited for."""
        self()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # (set: the call returned)


def run_all(calls: Sequence[Deferred[Any]]) -> None:
    """Run, in order, each of ``calls`` that no thread has begun."""
    for call in calls:
        call()


__all__ = ["Deferred", "run_all"]
