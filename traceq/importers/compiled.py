"""Which compiled readers this install has, and the one warning when it runs without them.

traceq's two readers in C -- the Kineto JSON scanner (``kineto/_scanner.c``) and the nsys column
reader (``nsys/_column_reader.c``) -- are optional at build time (``setup.py``): an install with no
C compiler has neither, and reads every trace with the pure-Python readers beside them, which make
the same tables, more slowly (``docs/performance.md``, "Without the compiled readers").  The first
time this process imports a trace that way, :func:`warn_if_missing` says so once, as a
:class:`CompiledReadersWarning` (the CLI prints it as one ``traceq: warning:`` line).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Final

READERS: Final = {
    "traceq.importers.kineto._scanner": "the Kineto JSON scanner",
    "traceq.importers.nsys._column_reader": "the nsys column reader",
}
"""Each compiled module, by what it does."""


class CompiledReadersWarning(UserWarning):
    """traceq reads traces without (some of) its compiled readers: same results, slower."""


@dataclass(frozen=True, slots=True)
class Build:
    """What this install's compiled readers are."""

    missing: tuple[str, ...]
    """The modules of :data:`READERS` that cannot be imported."""
    sse2: bool
    """Whether the scanner runs its 16-byte SSE2 loops (``_bits.h``)."""
    page_moves: bool
    """Whether the scanner moves pages with Linux's mremap (else the caller copies)."""


@cache
def build() -> Build:
    """This install's :class:`Build` (imported once)."""
    found = {}
    for name in READERS:
        with contextlib.suppress(ImportError):
            found[name] = importlib.import_module(name)
    scanner = found.get("traceq.importers.kineto._scanner")
    return Build(
        missing=tuple(name for name in READERS if name not in found),
        sse2=bool(getattr(scanner, "SSE2", 0)),
        page_moves=bool(getattr(scanner, "PAGE_MOVES", 0)),
    )


_warned = False


def warn_if_missing() -> None:
    """Warn once per process, when a compiled reader is missing, that traces are read the slow way."""
    global _warned
    missing = build().missing
    if _warned or not missing:
        return
    _warned = True
    what = " and ".join(READERS[name] for name in missing)
    warnings.warn(
        f"traceq was installed without {what} (built only where a C compiler was found): traces are read by "
        "the pure-Python readers, with the same results, several times slower; install a traceq wheel, or "
        "reinstall with a C compiler present",
        CompiledReadersWarning,
        stacklevel=3,
    )
