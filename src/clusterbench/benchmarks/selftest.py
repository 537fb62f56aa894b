"""Launcher self-test: checks that every rank starts, syncs and reports.

It can also make one rank fail on purpose (raise, exit or hang) so that a cluster's failure
handling can be checked end to end: the run must end naming that rank, with the other results
kept.  It belongs to no suite; run it with ``--only selftest``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from clusterbench.metrics import Metric, MetricSet
from clusterbench.registry import Benchmark
from clusterbench.rules import PeerRules
from clusterbench.schema import Measurement

if TYPE_CHECKING:
    from clusterbench.runtime.dist import DistContext

__all__ = ["BENCHMARK", "SelftestConfig", "SelftestMetrics", "selftest"]

Mode = Literal["raise", "exit", "hang"]


class SelftestMetrics(MetricSet, benchmark="selftest"):
    # Mostly time spent waiting for the slowest rank, so the fastest rank shows the longest:
    # "lower" as for any time, but peers are never compared on it (it checks the launcher).
    sync_time = Metric("s", "lower", "seconds from the start through both barriers")


@dataclass(kw_only=True, slots=True)
class SelftestConfig:
    fail_rank: int = -1
    """Rank that fails on purpose (-1: none)."""
    mode: Mode = "raise"
    """How the failing rank fails: raise an exception, exit the process, or hang."""
    fail_round: int = 0
    """In a soak, the first round in which ``fail_rank`` fails (0: from the first): an
    intermittent failure, after rounds that passed."""
    sleep_s: float = 0.0
    """Seconds every rank sleeps before reporting (to check the progress bar and timeouts)."""
    slowdown_per_round_s: float = 0.0
    """Seconds added to that sleep in each soak round (round r sleeps ``sleep_s + r x`` this):
    a planted slowdown, to check a soak's drift finding end to end (``--repeat``)."""

    def __post_init__(self) -> None:
        if self.sleep_s < 0:
            raise ValueError(f"sleep_s must be >= 0, got {self.sleep_s}")
        if self.slowdown_per_round_s < 0:
            raise ValueError(f"slowdown_per_round_s must be >= 0, got {self.slowdown_per_round_s}")
        if self.fail_rank < -1:
            raise ValueError(f"fail_rank must be a rank or -1 (none), got {self.fail_rank}")
        if self.fail_round < 0:
            raise ValueError(f"fail_round must be >= 0, got {self.fail_round}")


def selftest(ctx: DistContext, cfg: SelftestConfig) -> Iterator[Measurement]:
    """Checks the launcher: every rank starts, syncs and reports (optionally one fails)."""
    ctx.progress.start(2)
    t0 = time.perf_counter()
    ctx.barrier()
    ctx.progress.advance()
    if ctx.rank == cfg.fail_rank and (ctx.round or 0) >= cfg.fail_round:
        _fail(cfg.mode, ctx.rank)
    sleep_s = cfg.sleep_s + (ctx.round or 0) * cfg.slowdown_per_round_s
    if sleep_s:
        time.sleep(sleep_s)
    ctx.barrier()
    ctx.progress.advance()
    yield ctx.measurement(SelftestMetrics.sync_time, value=time.perf_counter() - t0)


def _fail(mode: Mode, rank: int) -> None:
    if mode == "raise":
        raise RuntimeError(f"selftest: rank {rank} failed on purpose")
    if mode == "exit":
        os._exit(17)
    while True:  # hang: only the per-benchmark timeout ends this
        time.sleep(1)


BENCHMARK = Benchmark(
    name="selftest",
    level=0,
    scope="per_device",
    run=selftest,
    settings=SelftestConfig,
    metrics=SelftestMetrics,
    # sync_time is time spent waiting at a barrier for the *slowest* rank, so the fastest rank
    # looks worst; it checks the launcher, not the hardware
    peers=PeerRules(judged=False),
)
