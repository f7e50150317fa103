"""The scenario catalogue of issue 13: hand-planned timelines, each with its planted truth.

One timeline per row of seed 000's diagnosis table (:mod:`.diagnosis`, :mod:`.multi_rank`); the
exercises of seed 004 a trace can express: 2 (the ``.item()`` trap, :mod:`.host_state`), 5
(attention or FFN, :mod:`.attention`), 8 (the compile warm-up, :mod:`.compiled`), 9 and the
symptom table (data loading, memory bandwidth, sync points, communication: :mod:`.diagnosis`);
the three regimes and a clean control (:mod:`.regimes`); seed 000's worked example with its fixed
variants (:mod:`.worked_example`); issue 13's nine cases (:mod:`.host_state`, :mod:`.compiled`,
:mod:`.comm_libraries`, :mod:`.multi_rank`); issue 15's before/after pairs (:mod:`.pairs`: each
scenario the catalogue lacked for them, and :data:`PAIRS`).  Not planted: seed 004's exercises 1, 4 and 6
(memory, quantisation quality, sharding memory: no timeline states them), 3 (MFU needs the
model's description beside the trace; ``tests/analyses/test_mfu.py``), 7 (decode being
memory-bound is a kernel's arithmetic intensity, which no trace records) and 10 (a workflow).
Each scenario's ``expresses`` names what it is a timeline of; :data:`REQUIRED` lists what the
catalogue must cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from tracegen.planned.scenarios.attention import ATTENTION
from tracegen.planned.scenarios.comm_libraries import COMM_LIBRARIES
from tracegen.planned.scenarios.compiled import COMPILED
from tracegen.planned.scenarios.diagnosis import DIAGNOSIS
from tracegen.planned.scenarios.host_state import HOST_STATE
from tracegen.planned.scenarios.multi_rank import MULTI_RANK
from tracegen.planned.scenarios.pairs import BY_PAIR, PAIR_SCENARIOS, PAIRS, PlannedPair
from tracegen.planned.scenarios.regimes import REGIMES
from tracegen.planned.scenarios.truth import (
    CAUSES,
    FINDINGS,
    DeviceTruth,
    PlantedScenario,
    StragglerTruth,
    idle,
    total,
)
from tracegen.planned.scenarios.worked_example import WORKED_EXAMPLES

SCENARIOS: Final[tuple[PlantedScenario, ...]] = (
    *DIAGNOSIS,
    *MULTI_RANK,
    *HOST_STATE,
    *ATTENTION,
    *COMPILED,
    *COMM_LIBRARIES,
    *REGIMES,
    *WORKED_EXAMPLES,
    *PAIR_SCENARIOS,
)
BY_NAME: Final[Mapping[str, PlantedScenario]] = MappingProxyType({s.name: s for s in SCENARIOS})

REQUIRED: Final = (
    "seed 000 diagnosis row: launch-bound",
    "seed 000 diagnosis row: exposed communication",
    "seed 000 diagnosis row: input stall",
    "seed 000 diagnosis row: host-device sync",
    "seed 000 diagnosis row: memory-bound kernels",
    "seed 000 diagnosis row: straggler",
    "seed 000 regime: overhead-bound",
    "seed 000 regime: memory-bound",
    "seed 000 regime: compute-bound",
    "seed 000 section 4: the worked example",
    "seed 000 section 4, fix 1 only",
    "seed 000 section 4, fix 2 only",
    "seed 000 section 4, fixes 1 and 2",
    "seed 004 exercise 2",
    "seed 004 exercise 5",
    "seed 004 exercise 8",
    "seed 004 exercise 9",
    "the clean control",
    *(f"issue 13 case {n}:" for n in range(1, 10)),
)
"""Prefixes of ``expresses`` entries that some scenario must carry."""

__all__ = [
    "BY_NAME",
    "BY_PAIR",
    "CAUSES",
    "FINDINGS",
    "PAIRS",
    "REQUIRED",
    "SCENARIOS",
    "DeviceTruth",
    "PlannedPair",
    "PlantedScenario",
    "StragglerTruth",
    "idle",
    "total",
]
