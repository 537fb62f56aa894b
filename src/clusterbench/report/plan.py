"""The plan printed before a run: each benchmark's expected time, where the figure comes from,
and with a budget its share and what was cut to fit it."""

from __future__ import annotations

from clusterbench.analyses.budget.plan import PlannedBenchmark, RunBudgetPlan
from clusterbench.units import format_seconds

__all__ = ["plan_lines"]


def plan_lines(plan: RunBudgetPlan) -> list[str]:
    """A head line, then one line per benchmark::

    plan: expected ~16 s for 5 benchmarks, budget 40 s (25 s of it to start and write)
      gemm         ~0.3 s   table: 2 CPU ranks    share 1.2 s   cut: repeats 30 -> 8
    """
    out = [_head(plan)]
    width = max((len(b.name) for b in plan.benchmarks), default=0)
    for b in plan.benchmarks:
        expected = f"~{format_seconds(b.expected_s)}" if b.expected_s is not None else "?"
        line = f"  {b.name:<{width}}  {expected:>9}  {_source(b)}"
        if b.budget_s is not None:
            line += f"; share {format_seconds(b.budget_s)}"
        if b.cuts:
            assert b.before_s is not None
            line += f"; cut from ~{format_seconds(b.before_s)}: {', '.join(b.cuts)}"
        out.append(line)
    return out


def _head(plan: RunBudgetPlan) -> str:
    total = plan.expected_s
    n = len(plan.benchmarks)
    known = sum(b.expected_s is not None for b in plan.benchmarks)
    head = "plan: expected " + (
        f"~{format_seconds(total)}" if total is not None else "time unknown"
    )
    noun = "benchmark" if n == 1 else "benchmarks"
    head += f" for {known} of {n} {noun}" if known < n else f" for {n} {noun}"
    if plan.budget_s is not None:
        head += (
            f", budget {format_seconds(plan.budget_s)} ({format_seconds(plan.reserve_s)} of "
            "it to start the workers and write the results)"
        )
        if not plan.fits:
            head += "; the smallest forms do not fit: each stops at its share"
    return head


def _source(b: PlannedBenchmark) -> str:
    if b.source == "none":
        return "no earlier run, no table, no cost model"
    if b.source == "model":
        return "settings model (nothing measured)"
    return f"{b.basis}, scaled to these settings" if b.scaled else b.basis or b.source
