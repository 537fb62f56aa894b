"""The run's verdict as lines of text, one per node, then one for the findings about no one
node: what the console, summary.md and report.html show before the findings."""

from __future__ import annotations

from typing import NamedTuple

from clusterbench.analyses.run import RunAnalysis

__all__ = ["VerdictLine", "verdict_lines"]


class VerdictLine(NamedTuple):
    text: str
    healthy: bool


def verdict_lines(run: RunAnalysis) -> list[VerdictLine]:
    """'node H: healthy: ...' per node against the built-in baseline's known-good figures, then
    'across nodes: ...' where findings about no one node call for action; none for a run that
    measured nothing."""
    lines = [VerdictLine(v.line(), v.healthy) for v in run.node_verdicts]
    other = run.other_findings
    return [*lines, VerdictLine(other, False)] if other else lines
