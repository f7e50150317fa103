"""The diff's verdict: one paragraph, from the decomposition's largest parts and the findings' changes.

``step −18.2% (−3.10 ms, 17.0 ms -> 13.9 ms): input stall −2.60 ms, launch idle −0.90 ms; against it,
exposed communication +0.40 ms; the change resolved the input stall finding.``  The parts named are those
that moved at least :data:`NAMED_SHARE` of the step's change (or of the step before, where the step
did not change), the three largest in the step's direction first, then up to two against it; then
the findings resolved and new, and up to two whose share moved a point or more.  Where
the two sides' median steps differ by less than twice the standard error of their difference
(``docs/diff.md``, "Noise"), the verdict says the change may be noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from traceq.diff.decompose import noise_ns, within_noise
from traceq.diff.labels import FINDING_LABELS, PART_LABELS, signed_ns, signed_share
from traceq.diff.model import Decomposition, FindingChange, StepStats, Term
from traceq.units import format_ns

NAMED_SHARE: Final = 0.05
"""A part is named when it moved at least this share of the step's change."""
SAME_WAY: Final = 3
AGAINST: Final = 2
MOVED_SHARE: Final = 0.01
"""A finding on both sides is named when its share moved at least this much (one point)."""
CHANGED: Final = 2


def verdict(
    decomposition: Decomposition,
    findings: Sequence[FindingChange],
    before: StepStats,
    after: StepStats,
) -> str:
    """The paragraph (see the module docstring)."""
    d = decomposition
    if d.delta_ns == 0:
        head = f"step unchanged ({format_ns(d.step_before_ns)})"
    else:
        share = f"{signed_share(d.delta_share)} " if d.delta_share is not None else ""
        head = f"step {share}({signed_ns(d.delta_ns)}, {format_ns(d.step_before_ns)} -> {format_ns(d.step_after_ns)})"
    parts = _parts(d)
    text = head + (f": {parts}" if parts else "")
    clauses = _findings(findings)
    noise = within_noise(before, after)
    if noise and d.delta_ns != 0:
        se = noise_ns(before, after) or 0.0
        clauses.append(
            f"the median steps differ by less than twice their standard error ({format_ns(se)}): "
            "the change may be noise (docs/diff.md, Noise)"
        )
    return "; ".join([text, *clauses]) + "."


def _parts(d: Decomposition) -> str:
    scale = abs(d.delta_ns) if d.delta_ns else abs(d.step_before_ns)
    named = [t for t in d.terms if t.delta_ns and abs(t.delta_ns) >= NAMED_SHARE * scale]
    named.sort(key=lambda t: (-abs(t.delta_ns), t.key))
    direction = 1 if d.delta_ns >= 0 else -1
    same = [t for t in named if t.delta_ns * direction > 0][:SAME_WAY]
    against = [t for t in named if t.delta_ns * direction < 0][:AGAINST]
    if d.delta_ns == 0:
        same, against = named[:SAME_WAY], []
    text = ", ".join(_term(t) for t in same)
    if against:
        text += ("; against it, " if text else "") + ", ".join(_term(t) for t in against)
    return text


def _term(t: Term) -> str:
    return f"{PART_LABELS.get(t.key, t.key)} {signed_ns(t.delta_ns)}"


def _findings(findings: Sequence[FindingChange]) -> list[str]:
    resolved = [FINDING_LABELS.get(f.id, f.id) for f in findings if f.status == "resolved"]
    new = [FINDING_LABELS.get(f.id, f.id) for f in findings if f.status == "new"]
    out = []
    if resolved:
        out.append(f"the change resolved the {_and(resolved)} finding{'s' if len(resolved) > 1 else ''}")
    if new:
        out.append(f"it brought a new {_and(new)} finding{'s' if len(new) > 1 else ''}")
    changed = [f for f in findings if f.status == "changed" and abs(_moved(f)) >= MOVED_SHARE]
    changed.sort(key=lambda f: (-abs(_moved(f)), f.id))
    for f in changed[:CHANGED]:
        way = "rose" if _moved(f) > 0 else "fell"
        before, after = f.share_before or 0.0, f.share_after or 0.0
        out.append(f"the {FINDING_LABELS.get(f.id, f.id)} finding {way} from {before:.1%} to {after:.1%}")
    return out


def _moved(f: FindingChange) -> float:
    return (f.share_after or 0.0) - (f.share_before or 0.0)


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
