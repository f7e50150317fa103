"""Analyses: pure functions from the event table to result dataclasses (they never draw)."""

from traceq.analyses.breakdown import DEFAULT_MAX_GAPS, DEFAULT_TOP_KERNELS, analyze, kernel_stats
from traceq.analyses.model import CAUSES, Analysis
from traceq.analyses.steps import DEFAULT_STEP_PATTERN

__all__ = [
    "CAUSES",
    "DEFAULT_MAX_GAPS",
    "DEFAULT_STEP_PATTERN",
    "DEFAULT_TOP_KERNELS",
    "Analysis",
    "analyze",
    "kernel_stats",
]
