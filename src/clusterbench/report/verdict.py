"""The run's verdict as lines of text, one per node, then one for the findings about no one
node: what the console, summary.md and report.html show before the findings."""

from __future__ import annotations

from typing import NamedTuple

from clusterbench.analysis.baseline import builtin_baseline
from clusterbench.analysis.verdict import node_verdicts, other_findings_line
from clusterbench.schema import Results

__all__ = ["VerdictLine", "verdict_lines"]


class VerdictLine(NamedTuple):
    text: str
    healthy: bool


def verdict_lines(results: Results) -> list[VerdictLine]:
    """'node H: healthy: ...' per node against the built-in baseline's known-good figures, then
    'across nodes: ...' where findings about no one node call for action; none for a run that
    measured nothing."""
    if not results.measurements and not results.findings:
        return []
    lines = [VerdictLine(v.line(), v.healthy) for v in node_verdicts(results, builtin_baseline())]
    other = other_findings_line(results)
    return [*lines, VerdictLine(other, False)] if other else lines
