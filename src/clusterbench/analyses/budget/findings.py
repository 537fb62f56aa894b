"""Findings of a run fitted to a time budget (``run.plan``): what was cut to fit it, which
benchmarks stopped at their budget with what they measured kept, which ran past it, and a
budget too small for the smallest forms.

Ids: ``budget.fitted`` (info), ``budget.stopped`` (info), ``budget.overrun`` (warn),
``budget.too_small`` (warn).  Pure: results in, findings out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterbench.schema import BenchmarkPlan, Finding, PlanInfo, Results
from clusterbench.units import format_seconds

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["OVERRUN_GRACE_S", "OVERRUN_RATIO", "findings"]

OVERRUN_RATIO = 1.25
"""A benchmark overran its budget when it took more than this many times it..."""
OVERRUN_GRACE_S = 5.0
"""...and more than this many seconds beyond it (one point's time, a barrier)."""


def findings(results: Results, run: RunView) -> list[Finding]:
    plan = results.run.plan
    if plan is None or not _budgeted(plan):
        return []
    out = [*_fitted(plan), *_too_small(plan)]
    seconds = results.run.benchmark_seconds
    for b in plan.benchmarks:
        if b.stopped is not None:
            out.append(_stopped(b))
        elif b.budget_s is not None and b.benchmark in seconds:
            took = seconds[b.benchmark]
            if took > OVERRUN_RATIO * b.budget_s and took - b.budget_s > OVERRUN_GRACE_S:
                out.append(_overrun(b, took))
    return out


def _budgeted(plan: PlanInfo) -> bool:
    return plan.budget_s is not None or any(b.budget_s is not None for b in plan.benchmarks)


def _budget_text(plan: PlanInfo) -> str:
    if plan.budget_s is not None:
        return f"--budget {format_seconds(plan.budget_s)}"
    return "time_budget_s"


def _fitted(plan: PlanInfo) -> list[Finding]:
    cut = [b for b in plan.benchmarks if b.cuts]
    if not cut:
        return []
    parts = "; ".join(f"{b.benchmark}: {', '.join(b.cuts)}" for b in cut)
    return [
        Finding(
            id="budget.fitted",
            severity="info",
            scope="run",
            message=f"Fitted to {_budget_text(plan)}: {parts}.",
            evidence={
                "budget_s": plan.budget_s,
                "reserve_s": plan.reserve_s,
                "cuts": {b.benchmark: b.cuts for b in cut},
                "expected_before_s": {b.benchmark: b.expected_before_s for b in cut},
                "expected_s": {b.benchmark: b.expected_s for b in cut},
            },
            fix="A longer --budget (or a benchmark's time_budget_s) keeps more of each sweep; "
            "without one every benchmark runs its suite's settings.",
        )
    ]


def _too_small(plan: PlanInfo) -> list[Finding]:
    if plan.fits or plan.budget_s is None:
        return []
    return [
        Finding(
            id="budget.too_small",
            severity="warn",
            scope="run",
            message=f"--budget {format_seconds(plan.budget_s)} is less than the smallest form of "
            f"the benchmarks takes (with {format_seconds(plan.reserve_s)} for starting and "
            "writing the run): each was cut as far as it goes and stopped at its share.",
            evidence={
                "budget_s": plan.budget_s,
                "reserve_s": plan.reserve_s,
                "expected_s": plan.expected_s,
            },
            fix="Give the run more time, or select fewer benchmarks (--only, --skip).",
        )
    ]


def _stopped(b: BenchmarkPlan) -> Finding:
    stop = b.stopped
    assert stop is not None
    return Finding(
        id="budget.stopped",
        severity="info",
        scope="run",
        message=f"{b.benchmark} stopped at its budget after {format_seconds(stop.after_s)}: "
        f"measured {stop.done} of {stop.total} {stop.unit}; what it measured is kept.",
        evidence={
            "benchmark": b.benchmark,
            "budget_s": b.budget_s,
            "after_s": stop.after_s,
            "done": stop.done,
            "total": stop.total,
            "unit": stop.unit,
            "expected_s": b.expected_s,
        },
        fix=f"Give it more time to measure every point: --set {b.benchmark}.time_budget_s="
        f"{_seconds_hint(b)} or a longer --budget.",
    )


def _overrun(b: BenchmarkPlan, took: float) -> Finding:
    assert b.budget_s is not None
    return Finding(
        id="budget.overrun",
        severity="warn",
        scope="run",
        message=f"{b.benchmark} took {format_seconds(took)} of a {format_seconds(b.budget_s)} "
        "budget: it has no stopping point where it spent the time, or its estimate was far "
        "off.",
        evidence={
            "benchmark": b.benchmark,
            "budget_s": b.budget_s,
            "seconds": took,
            "expected_s": b.expected_s,
            "source": b.source,
        },
        fix=f"Skip it (--skip {b.benchmark}) in runs that must fit a budget, or give it "
        f"time_budget_s={int(took) + 1}; the history's timing of this run improves the next "
        "plan.",
    )


def _seconds_hint(b: BenchmarkPlan) -> str:
    stop = b.stopped
    if stop is None or stop.done == 0:
        return str(int(2 * (b.budget_s or 60)))
    return str(int(stop.after_s * stop.total / stop.done) + 1)
