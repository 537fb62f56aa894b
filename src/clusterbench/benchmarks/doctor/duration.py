"""How long ``doctor`` takes: its checks read files and settings, a fixed fraction of a second
(0.04 to 0.06 s in the shipped timing table); nothing to cut."""

from __future__ import annotations

from typing import Any

from clusterbench.durations import DurationModel, Estimate, NodeFacts, Term

__all__ = ["MODEL", "estimate"]

CHECKS_S = 0.05
"""The shipped table's doctor time, CPU and H200 alike (data/benchmark_seconds.json)."""


def estimate(cfg: Any, facts: NodeFacts) -> Estimate:
    return Estimate(terms=(Term("configuration and health checks", CHECKS_S),))


MODEL = DurationModel(estimate=estimate)
