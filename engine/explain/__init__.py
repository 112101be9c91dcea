"""Explain placement: reasons in English, filtered nodes by reason, score breakdowns, unsat cores."""

from ccattler.engine.explain.placement import Explanation, NodeScore, UnknownTarget, explain, resolve
from ccattler.engine.explain.reasons import KNOWN_CODES, describe, render, summarize

__all__ = [
    "KNOWN_CODES",
    "Explanation",
    "NodeScore",
    "UnknownTarget",
    "describe",
    "explain",
    "render",
    "resolve",
    "summarize",
]
