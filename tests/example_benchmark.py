"""A benchmark of one's own, as a user would add it: these files and one ``register`` call.

``tiny`` all-reduces a vector of ones over the world, checks the sum and times it.  Nothing in
clusterbench names it: the registration below makes the config accept ``--only tiny`` and
``--set tiny.size=...``, the rank loop run it, analysis apply its findings and the summary show
its section.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterbench.metrics import Metric, MetricSet
from clusterbench.registry import Benchmark, register
from clusterbench.report.cells import Section, metric_rows
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, Measurement, Results, Stats
from clusterbench.thresholds import Thresholds


class TinyMetrics(MetricSet, benchmark="tiny"):
    elements_per_s = Metric("elements/s", "higher", "all-reduced elements per second")
    wrong = Metric("count", "none", "elements whose sum was not the world size")


@dataclass(kw_only=True, slots=True)
class TinyConfig:
    """Settings of the ``tiny`` benchmark."""

    size: int = 1024
    """Elements all-reduced."""
    repeats: int = 5
    """Timed all-reduces."""

    def __post_init__(self) -> None:
        if self.size < 1 or self.repeats < 1:
            raise ValueError("size and repeats must be at least 1")


def tiny(ctx: DistContext, cfg: TinyConfig) -> Iterator[Measurement]:
    """All-reduce a vector of ones, check the sum, time it."""
    x = torch.ones(cfg.size)
    dist.all_reduce(x)
    wrong = int((x != ctx.world_size).sum())
    seconds = []
    for _ in range(cfg.repeats):
        t0 = time.perf_counter()
        dist.all_reduce(torch.ones(cfg.size))
        seconds.append(time.perf_counter() - t0)
    stats = Stats.from_samples([cfg.size / s for s in seconds])
    params = {"size": cfg.size}
    yield ctx.measurement(TinyMetrics.elements_per_s, value=stats.median, params=params,
                          stats=stats)  # fmt: skip
    yield ctx.measurement(TinyMetrics.wrong, value=wrong, params=params)


def tiny_findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """A wrong sum fails; otherwise one info line with the slowest rank's rate."""
    wrong = [m for m in TinyMetrics.wrong.select(results) if m.value > 0]
    if wrong:
        return [Finding(id="tiny.wrong_sum", severity="fail", scope="run",
                        message=f"{len(wrong)} ranks summed wrong")]  # fmt: skip
    rates = TinyMetrics.elements_per_s.select(results)
    if not rates:
        return []
    slowest = min(rates, key=lambda m: m.value)
    message = f"slowest rank {slowest.rank}: {slowest.value:.3g} elements/s"
    return [Finding(id="tiny.rate", severity="info", scope="run", message=message)]


def tiny_section(ms: list[Measurement], multi_host: bool) -> Section:
    def label(m: Measurement) -> str | None:
        return (
            f"all-reduce of {m.params['size']} ones"
            if TinyMetrics.elements_per_s.matches(m)
            else None
        )

    return Section("tiny", rows=metric_rows(ms, label=label, multi_host=multi_host))


TINY = register(
    Benchmark(
        name="tiny",
        level=2,
        scope="collective",
        run=tiny,
        settings=TinyConfig,
        metrics=TinyMetrics,
        findings=tiny_findings,
        section=tiny_section,
    )
)
