"""Analyses: pure functions from the event table to result dataclasses (they never draw).

``analyze(events, Options(...))`` is the step breakdown of one event table; the report pipeline
(:mod:`traceq.pipeline`) composes it with the findings, the job analysis and the timeline excerpt
part by part (:mod:`traceq.analyses.parts`).
"""

from traceq.analyses.breakdown import analyze
from traceq.analyses.model import CAUSES, Analysis
from traceq.analyses.options import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS, Options
from traceq.analyses.top_lists import kernel_totals, top_kernels

__all__ = [
    "CAUSES",
    "DEFAULT_MAX_GAPS",
    "DEFAULT_STEP_PATTERN",
    "DEFAULT_TOP_KERNELS",
    "Analysis",
    "Options",
    "analyze",
    "kernel_totals",
    "top_kernels",
]
