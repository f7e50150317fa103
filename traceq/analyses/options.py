"""What an analysis is asked to do: one frozen :class:`Options` that every stage reads.

The step pattern, how many gaps and kernels the report lists: chosen once (by the CLI, the Python
API or their defaults) and handed down as one object, so no stage passes a setting along that it
does not read itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_STEP_PATTERN: Final = r"^(ProfilerStep#\d+|step[ _#]?\d+|iteration[ _#]?\d+)$"
"""CPU-side range names that delimit steps (case-insensitive): the PyTorch profiler's
``ProfilerStep#N``, and ``step N`` / ``iteration N`` ranges users name themselves."""

DEFAULT_MAX_GAPS: Final = 100
"""Longest gaps listed in the report."""

DEFAULT_TOP_KERNELS: Final = 20
"""Kernel names listed in the report, by total GPU time."""


@dataclass(frozen=True)
class Options:
    """What the analyses are asked.

    ``step_pattern``: a regex (matched case-insensitively) naming the CPU-side ranges that delimit
    steps; ``max_gaps``: the longest gaps listed (the gap table keeps all); ``top_kernels``: the
    kernel names listed by total GPU time; ``input_pattern``: the user's data-loading ranges;
    ``all_steps``: warm-up steps count as steady; ``comm_patterns`` and ``default_comm_patterns``:
    which kernels are communication; ``phase_patterns``: which CPU ranges are phases.
    """

    step_pattern: str = DEFAULT_STEP_PATTERN
    max_gaps: int = DEFAULT_MAX_GAPS
    top_kernels: int = DEFAULT_TOP_KERNELS
    input_pattern: str | None = None
    """A regex (Rust syntax) naming the user's own data-loading ranges, besides PyTorch's
    ``enumerate(DataLoader)…__next__`` (``docs/analyses.md``)."""
    all_steps: bool = False
    """Keep warm-up steps in the steady state (findings, regimes, MFU); they are still named."""
    comm_patterns: tuple[str, ...] = ()
    """Regexes (Rust syntax, searched in the kernel name) of more communication kernels, besides
    :data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS` (``docs/analyses.md``, "Communication kernels")."""
    default_comm_patterns: bool = True
    """Count the default patterns (and the trace's own collective metadata); false: only
    ``comm_patterns`` make a kernel communication."""
    phase_patterns: tuple[str, ...] = ()
    """Regexes (Rust syntax, searched in the name) of the CPU ranges, ops or Python frames that are
    phases; empty: every CPU range that is no step, operator or module range (``docs/analyses.md``,
    "Phases")."""
