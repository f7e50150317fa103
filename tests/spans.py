"""Brute-force span arithmetic for the tests' independent references: plain lists of ``(start, end)``
pairs, merged and walked pair by pair, sharing no code with ``traceq.intervals``."""

from __future__ import annotations

from collections.abc import Sequence

Span = tuple[int, int]


def merge(spans: Sequence[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, disjoint spans (touching spans join; empty ones drop)."""
    out: list[Span] = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def length_in(spans: Sequence[Span], windows: Sequence[Span]) -> int:
    """|U(spans) ∩ U(windows)|, by merging both and walking every pair."""
    return sum(max(0, min(e, we) - max(s, ws)) for s, e in merge(spans) for ws, we in merge(windows))


def subtract(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """U(a) minus U(b), as sorted disjoint spans."""
    out = []
    for s, e in merge(a):
        cur = s
        for bs, be in merge(b):
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out
