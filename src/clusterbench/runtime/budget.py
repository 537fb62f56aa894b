"""A running benchmark's time budget: ``ctx.budget``, the deadline it checks between points.

The rank loop gives every benchmark a :class:`TimeBudget` (no limit unless ``--budget`` or its
``time_budget_s`` set one).  A benchmark asks it between points (a shape, a size, a case) and,
once it is spent, stops there, yields what it measured and says so with :meth:`stopped`.

A collective benchmark must stop at the same point on every rank, or the ranks that go on wait
forever in the next collective: :meth:`TimeBudget.agree_expired` lets rank 0's clock decide and
broadcasts the decision (as a soak's rounds do, :mod:`.rounds`).  Every rank must call it at the
same points, the same number of times.  :meth:`TimeBudget.expired` reads this rank's clock
only: for loops with no collective in them or after them that depends on where they stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch.distributed as dist

from clusterbench.schema import BudgetStop, PlanInfo

__all__ = ["MIN_SHARE", "BudgetSchedule", "Peers", "TimeBudget"]


class Peers(Protocol):
    """What :meth:`TimeBudget.agree_expired` needs of the distributed context."""

    rank: int
    world_size: int

    def waiting_for_peers(self, what: str = ...) -> AbstractContextManager[None]: ...


@dataclass(kw_only=True)
class TimeBudget:
    seconds: float | None = None
    """Seconds the benchmark may take (None: no budget; every check says go on)."""
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)
    """When it started (``clock``'s time; set at construction unless given)."""
    stop: BudgetStop | None = None
    """Set by :meth:`stopped`: where the benchmark stopped at its budget."""

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    @property
    def limited(self) -> bool:
        return self.seconds is not None

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def left_s(self) -> float:
        """Seconds left (``math.inf`` without a budget; negative once past it)."""
        if self.seconds is None:
            return math.inf
        return self.seconds - self.elapsed_s()

    def expired(self) -> bool:
        """This rank's clock says the budget is spent (no communication)."""
        return self.left_s() <= 0

    def agree_expired(self, ctx: Peers, *, group: Any = None, src: int = 0) -> bool:
        """Rank ``src``'s clock decides, for every rank of ``group`` (None: the world): a
        collective, called by each of them at the same point.  Without a budget it returns
        False at once on every rank (the budget is in the run's configuration, the same on
        every rank): nothing is sent."""
        if self.seconds is None:
            return False
        mine = self.expired()
        if not (dist.is_available() and dist.is_initialized()) or ctx.world_size == 1:
            return mine
        box = [mine if ctx.rank == src else None]
        with ctx.waiting_for_peers("the time budget's decision"):
            dist.broadcast_object_list(box, src=src, group=group)
        return bool(box[0])

    def stopped(self, *, done: int, total: int, unit: str = "points") -> None:
        """Say that the benchmark stopped at its budget, having measured ``done`` of ``total``
        ``unit`` (its findings and results.json name them)."""
        self.stop = BudgetStop(
            after_s=round(self.elapsed_s(), 3), done=done, total=total, unit=unit
        )


MIN_SHARE = 0.25
"""A benchmark whose predecessors overran still gets this share of its own budget."""


class BudgetSchedule:
    """The run's deadlines, benchmark after benchmark.

    With a budget for the whole run (``ends_at``: when the last benchmark must be done, wall
    clock) each benchmark gets its share of the time left: ``left x its planned seconds /
    those of the benchmarks still to run``, so a slow start or an overrun shrinks the rest and
    a benchmark done early leaves its time to them; never below :data:`MIN_SHARE` of its own.
    Without one (``time_budget_s`` alone) each gets its planned seconds."""

    def __init__(
        self,
        budgets: dict[str, float | None],
        *,
        ends_at: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._budgets = budgets
        self._ends_at = ends_at
        self._clock = clock
        self._wall = wall
        self._done: set[str] = set()

    @classmethod
    def from_plan(cls, plan: PlanInfo | None, *, ends_at: float | None = None) -> BudgetSchedule:
        if plan is None:
            return cls({})
        budgets = {b.benchmark: b.budget_s for b in plan.benchmarks}
        return cls(budgets, ends_at=ends_at if plan.budget_s is not None else None)

    def start(self, name: str) -> TimeBudget:
        """The budget of ``name``, starting now."""
        base = self._budgets.get(name)
        if base is None:
            return TimeBudget(clock=self._clock)
        seconds = base
        if self._ends_at is not None:
            rest = [b for n, b in self._budgets.items() if b and n not in self._done]
            left = self._ends_at - self._wall()
            seconds = left * base / sum(rest) if sum(rest) > 0 else left
        return TimeBudget(seconds=max(MIN_SHARE * base, seconds), clock=self._clock)

    def finish(self, name: str, budget: TimeBudget) -> None:
        """``name`` ended: the time left is shared among the benchmarks after it."""
        self._done.add(name)
