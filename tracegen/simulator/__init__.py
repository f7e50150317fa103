"""The simulator: a :class:`~tracegen.scenario.Scenario` in, the ground-truth :class:`~tracegen.timeline.Timeline` out.

* :mod:`~tracegen.simulator.costs`: the cost model, durations for a scenario's knobs;
* :mod:`~tracegen.simulator.rank`: one rank's CPU thread and GPU streams during a step;
* :mod:`~tracegen.simulator.training_step`: the program of one DDP training step on a rank;
* :mod:`~tracegen.simulator.job`: every rank in lockstep at the collectives, the steps laid out
  (:func:`~tracegen.simulator.job.build_timeline`, exported as :func:`tracegen.build_timeline`).
"""
