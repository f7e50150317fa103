"""Units and labels for people: durations, shares, byte sizes, names cut to a width, device labels.

Every renderer (terminal, HTML, JSON texts) and every finding text formats through this module, so a
duration or a device reads the same wherever it appears.  It depends on nothing else in traceq.

* Durations: :func:`format_ns` (three significant digits: ``850 ns``, ``12.3 µs``, ``4.56 ms``,
  ``1.23 s``), or with fixed decimals per unit (``decimals=(µs, ms, s)``) where a text keeps the
  precision it was written with: finding texts (:func:`evidence_ns`) and the job's note.
* Shares: :func:`format_share` for a fraction (``0.341`` → ``34.1%``), :func:`pct` for a part of a
  whole (``-`` for an empty whole).
* Names: :func:`shorten` cuts any text to a width with ``…``; :func:`short_kernel_name` also drops
  a C++ kernel name's ``void``, anonymous namespaces and argument list; :func:`printable` spells the
  control characters of a trace's strings (NUL, BEL, CR, ESC, ...) as escapes for the terminal.
* Devices: :func:`device_label` in the three forms the outputs use (a sentence, a table cell, a
  terminal column).
"""

from __future__ import annotations

from typing import Final, Literal

EVIDENCE_DECIMALS: Final = (1, 2, 2)
"""Decimals for µs, ms and s in finding texts: ``38.2 µs``, ``4.21 ms``, ``1.23 s``."""

NOTE_DECIMALS: Final = (2, 2, 2)
"""Decimals for µs, ms and s in the job's note: ``12.00 µs``, ``4.21 ms``."""

_SCALES: Final = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))


def format_ns(ns: float, *, decimals: tuple[int, int, int] | None = None) -> str:
    """A duration in ns for people.

    By default three significant digits in the largest unit that is at least 1 (``850 ns``,
    ``12.3 µs``, ``4.56 ms``, ``123 ms``, ``1.23 s``).  With ``decimals=(µs, ms, s)`` a fixed number
    of decimals per unit instead (``(1, 2, 2)``: ``123.4 µs``, ``12.34 ms``).  Below 1 µs always
    whole ns.
    """
    value = float(ns)
    for index, (unit, scale) in enumerate(_SCALES):
        if abs(value) >= scale:
            scaled = value / scale
            if decimals is None:
                digits = 2 if abs(scaled) < 10 else 1 if abs(scaled) < 100 else 0
            else:
                digits = decimals[2 - index]
            return f"{scaled:.{digits}f} {unit}"
    return f"{value:.0f} ns"


def evidence_ns(ns: float) -> str:
    """A duration as finding texts write it: :func:`format_ns` with :data:`EVIDENCE_DECIMALS`."""
    return format_ns(ns, decimals=EVIDENCE_DECIMALS)


def format_share(share: float) -> str:
    """A fraction as a percentage with one decimal: ``0.341`` → ``34.1%``."""
    return f"{share:.1%}"


def pct(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with one decimal (``12.3%``); ``-`` when ``whole`` is zero."""
    return f"{100 * part / whole:.1f}%" if whole else "-"


def format_bytes(n: float) -> str:
    """``16.0 MiB``, ``512.0 KiB``, ``64 B``."""
    value = float(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


_ESCAPES: Final = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)},
    **{c: f"\\u{c:04x}" for c in range(0x80, 0xA0)},
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}
"""C0 and C1 control characters and DEL, by their escapes (``\\n``, ``\\r``, ``\\t``, ``\\x07``,
``\\u009b``)."""


CONTROL_ESCAPES: Final = {chr(code): escape for code, escape in _ESCAPES.items()}
"""The same, by character (for ``str.replace_many`` over a column)."""


def printable(text: str) -> str:
    """``text`` with its control characters spelled as escapes (``a\\x07b``, ``line\\r``), so that a
    name from a trace cannot ring the terminal's bell, move its cursor or rewrite what it shows."""
    return text.translate(_ESCAPES)


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters, the last one ``…`` where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def short_kernel_name(name: str, limit: int = 80) -> str:
    """A kernel name for one line of text: no ``void``, no anonymous namespaces, no argument list,
    at most ``limit`` characters."""
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "").replace("<unnamed>::", "").strip()
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            text = text[:i]
            break
    return shorten(text, limit)


LabelStyle = Literal["sentence", "cell", "column"]


def device_label(rank: int | None, device: int, *, pid: int | None = None, style: LabelStyle = "sentence") -> str:
    """One device (a process's GPU) for people.

    * ``sentence`` (finding texts): ``rank 2, GPU 0``; without a rank ``GPU 0, pid 4321`` (or
      ``GPU 0`` without a pid);
    * ``cell`` (HTML tables and charts): ``rank 2 · GPU 0``, or ``GPU 0``;
    * ``column`` (the terminal's narrow columns): ``r2 GPU 0``, or ``GPU 0``.
    """
    if style == "cell":
        return f"rank {rank} · GPU {device}" if rank is not None else f"GPU {device}"
    if style == "column":
        return f"r{rank} GPU {device}" if rank is not None else f"GPU {device}"
    if rank is not None:
        return f"rank {rank}, GPU {device}"
    return f"GPU {device}" if pid is None else f"GPU {device}, pid {pid}"


def capitalised(text: str) -> str:
    """``text`` for the start of a sentence: its first character upper-case."""
    return text[:1].upper() + text[1:]


def step_position(step_name: str | None, offset_ns: int | None) -> str:
    """Where in a step a piece of evidence lies: ``ProfilerStep#3 +1.20 ms``, or ``outside the step
    windows``."""
    if step_name is None or offset_ns is None:
        return "outside the step windows"
    return f"{step_name} +{evidence_ns(offset_ns)}"
