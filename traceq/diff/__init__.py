"""Before and after: two reports compared, the step-time change decomposed and explained.

``traceq.diff(before, after)`` (:func:`traceq.api.diff`) reads both sides (:mod:`.sides`: traces
through the report pipeline, or saved JSON reports), and :func:`.compare.diff_sides` builds the
:class:`.model.Diff`: the change of the steady step split exactly into compute, exposed
communication and idle by cause (:mod:`.decompose`), per device, the kernels matched by name
(:mod:`.kernels`), launches and syncs, findings, MFU and a verdict (:mod:`.verdict`).  Renderers:
:mod:`.text` (the terminal), :mod:`.html` (one self-contained page), and ``Diff.to_dict()`` (JSON),
chosen by suffix in :mod:`.render`.  :mod:`.check` holds the budgets of ``traceq check``
(``traceq.check``), :mod:`.junit` their JUnit XML.  Definitions: ``docs/diff.md``.
"""

from traceq.diff.compare import diff_sides
from traceq.diff.model import Diff
from traceq.diff.sides import Side, read_side

__all__ = ["Diff", "Side", "diff_sides", "read_side"]
