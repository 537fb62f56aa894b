"""The run's verdict as lines of text, one per node, then one for the findings about no one
node: what the console, summary.md and report.html show before the findings."""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from clusterbench.analyses.run import RunAnalysis
from clusterbench.analyses.verdict.nodes import NodeVerdict, several_judgement

__all__ = ["VerdictLine", "verdict_lines"]


class VerdictLine(NamedTuple):
    text: str
    healthy: bool
    nodes: int = 1
    """The nodes the line speaks for (0: the line of the findings about no one node)."""


NAMED = 3
"""Nodes named in a line that speaks for several (the rest are counted)."""


def verdict_lines(run: RunAnalysis) -> list[VerdictLine]:
    """'node H: healthy: ...' per node against the built-in baseline's known-good figures, then
    'across nodes: ...' where findings about no one node call for action; none for a run that
    measured nothing.  Nodes judged alike share one line ('10 nodes (a, b, c and 7 more):
    healthy ...'), in the order of their first node: healthy nodes held against the same
    known-good figures (each share given as the lowest and highest of them), and other nodes
    whose verdicts read the same."""
    alike: dict[tuple[object, ...], list[NodeVerdict]] = defaultdict(list)
    for v in run.node_verdicts:
        alike[v.alike()].append(v)
    lines = [VerdictLine(_line(vs), vs[0].healthy, len(vs)) for vs in alike.values()]
    other = run.other_findings
    return [*lines, VerdictLine(other, False, 0)] if other else lines


def _line(verdicts: list[NodeVerdict]) -> str:
    if len(verdicts) == 1:
        return verdicts[0].line()
    names = [v.host for v in verdicts]
    more = len(names) - NAMED
    shown = ", ".join(names[:NAMED]) + (f" and {more} more" if more > 0 else "")
    return f"{len(names)} nodes ({shown}): {several_judgement(verdicts)}"
