"""The job simulator: every rank through each step template in lockstep, then the steps laid out.

:func:`build_timeline` simulates a :class:`~tracegen.scenario.Scenario` into a
:class:`~tracegen.timeline.Timeline`.  Per step template, every rank runs the step program
(:mod:`tracegen.simulator.training_step`) on its own :class:`~tracegen.simulator.rank.RankSim`
until it reaches a collective; a collective ends on every rank once the last rank has arrived
plus the transfer time (with link jitter), and each rank's NCCL kernel ends a little after that.
A straggler rank's GPU work is slowed by ``straggler_slowdown``.  The profiled steps then cycle
through the templates, each at the offset where the previous one ended, with correlation and
external ids continuing from step to step.

Nothing reads the wall clock; randomness comes from ``random.Random`` seeded by the scenario's
name, seed, template and rank, so the same scenario always gives the same timeline.
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import replace
from typing import Final

from tracegen.event import Event
from tracegen.scenario import Scenario
from tracegen.simulator.costs import Costs, costs_for
from tracegen.simulator.rank import CollectiveCall, RankSim
from tracegen.simulator.training_step import step_program
from tracegen.timeline import FIRST_STEP_DELAY_NS, TRACE_ORIGIN_NS, ProcessInfo, StepInstance, StepTemplate, Timeline

_CORRELATION_START: Final = 41_207
_EXTERNAL_ID_START: Final = 1_024


def _advance(gen: Generator[CollectiveCall, int, None], value: int | None) -> CollectiveCall | None:
    try:
        return next(gen) if value is None else gen.send(value)
    except StopIteration:
        return None


def _simulate_step(
    scenario: Scenario, costs: Costs, procs: tuple[ProcessInfo, ...], index: int, step_number: int
) -> StepTemplate:
    straggler = scenario.resolved_straggler_rank() if scenario.knobs.straggler else -1
    sims = [
        RankSim(
            scenario,
            costs,
            p,
            random.Random(f"{scenario.name}:{scenario.seed}:{index}:{p.rank}"),
            scenario.straggler_slowdown if p.rank == straggler else 1.0,
        )
        for p in procs
    ]
    link_rng = random.Random(f"{scenario.name}:{scenario.seed}:{index}:collectives")
    gens = [step_program(sim, step_number) for sim in sims]
    calls = [_advance(g, None) for g in gens]
    while any(call is not None for call in calls):
        if any(call is None for call in calls):
            raise RuntimeError("ranks disagree on the number of collectives")
        ready = max(call.ready_ns for call in calls if call is not None)
        transfer = max(call.transfer_ns for call in calls if call is not None)
        end = ready + max(1_000, round(transfer * (1.0 + link_rng.gauss(0.0, 0.03))))
        calls = [_advance(g, end + link_rng.randrange(0, 1_500)) for g in gens]
    period = max(sim.t for sim in sims)
    per_rank: list[tuple[Event, ...]] = []
    for sim in sims:
        sim.events[0] = replace(sim.events[0], end_ns=period)  # the ProfilerStep range spans the period
        events = sim.events + sim.link_projections()
        per_rank.append(tuple(sorted(events, key=lambda e: (e.start_ns, -e.end_ns, e.seq))))
    return StepTemplate(period, tuple(per_rank), tuple(s.n_corr for s in sims), tuple(s.n_ext for s in sims))


def build_timeline(scenario: Scenario) -> Timeline:
    """Simulate ``scenario`` into a :class:`Timeline` (deterministic: same scenario, same result)."""
    procs = tuple(
        ProcessInfo(
            rank=r, pid=scenario.first_pid + 1_117 * r, tid=scenario.first_pid + 1_117 * r, device=r, context=r + 1
        )
        for r in range(scenario.ranks)
    )
    costs = costs_for(scenario.knobs, scenario.tuned)
    n_templates = scenario.steps if scenario.distinct_steps is None else min(scenario.steps, scenario.distinct_steps)
    templates = tuple(
        _simulate_step(scenario, costs, procs, i, scenario.first_step_number + i) for i in range(n_templates)
    )
    instances: list[StepInstance] = []
    offset = TRACE_ORIGIN_NS + FIRST_STEP_DELAY_NS
    corr = [_CORRELATION_START] * scenario.ranks
    ext = [_EXTERNAL_ID_START] * scenario.ranks
    for k in range(scenario.steps):
        t_index = k % n_templates
        template = templates[t_index]
        instances.append(StepInstance(t_index, scenario.first_step_number + k, offset, tuple(corr), tuple(ext)))
        offset += template.period_ns
        corr = [c + n for c, n in zip(corr, template.correlation_count, strict=True)]
        ext = [e + n for e, n in zip(ext, template.external_id_count, strict=True)]
    return Timeline(scenario, procs, templates, tuple(instances))
