"""How long the ``attribution`` benchmark takes, and how it is cut to a time budget.

Building (and compiling) the workload, the profiled steps (warm-up, the profiler's wait,
warm-up and active steps, then as many timed without it), reading each trace back, and per
accumulation count k of the sweep (2 or more ranks) warm-up + active steps of k micro-steps
with a trace each.  A step's seconds are training's (:func:`.training.duration.step_seconds`).
"""

from __future__ import annotations

from clusterbench.benchmarks.attribution.settings import AttributionConfig, sweep_counts
from clusterbench.benchmarks.training.duration import BUILD_S, COMPILE_S, step_seconds
from clusterbench.benchmarks.training.duration import MODEL as TRAINING_MODEL
from clusterbench.durations import (
    DurationModel,
    Estimate,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)

__all__ = ["MODEL", "estimate"]

TRACE_S = {"cuda": 4.0, "cpu": 0.5}
"""Reading back and attributing one rank's trace (nominal: a compiled 1.3b step on a GPU
holds tens of thousands of events)."""


def estimate(cfg: AttributionConfig, facts: NodeFacts) -> Estimate:
    kind = facts.device_type

    def step(k: int) -> float:
        return step_seconds(
            facts,
            model=cfg.model,
            precision=cfg.precision,
            samples=cfg.batch_size * k,
            seq_len=cfg.seq_len,
        )

    profiled = cfg.warmup_steps + cfg.wait + cfg.warmup + 2 * cfg.active
    build = BUILD_S[kind] + (COMPILE_S if cfg.compile and facts.cuda else 0.0)
    terms = [
        Term(
            f"build and {profiled} profiled steps of {cfg.model}",
            build + profiled * step(cfg.grad_accum) + TRACE_S[kind],
        ),
    ]
    counts = sweep_counts(cfg, world_size=facts.world_size)
    if counts:
        seconds = sum((cfg.warmup + cfg.active) * step(k) + TRACE_S[kind] for k in counts)
        terms.append(Term(f"accumulation sweep: k in {counts}", seconds))
    return Estimate(terms=tuple(terms), points=1 + len(counts))


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("warmup_steps", floor=2),
        halve_cut("active", floor=2),
        drop_cut("accum_sweep", keep=2),
        drop_cut("accum_sweep", keep=0),
    ),
    facts=TRAINING_MODEL.facts,
)
