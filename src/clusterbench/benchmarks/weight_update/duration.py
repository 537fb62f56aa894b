"""How long the ``weight_update`` benchmark takes, and how it is cut to a time budget.

Per layout and optimizer: warm-up + repeats updates of every parameter, each moving the bytes
the optimizer reads and writes per parameter (AdamW 28 B in fp32: p, g, m, v read, p, m, v
written; SGD with momentum 20 B; a half-precision layout adds its fp32 master copy) at the
memory bandwidth (this node's measured copy rate, else the spec's, else nominal); a for-loop
optimizer pays a kernel per tensor on top.
"""

from __future__ import annotations

from clusterbench.benchmarks.memory.duration import MODEL as MEMORY_MODEL
from clusterbench.benchmarks.memory.duration import copy_rate
from clusterbench.benchmarks.training.duration import num_params
from clusterbench.benchmarks.weight_update.settings import WeightUpdateConfig
from clusterbench.durations import (
    DurationModel,
    Estimate,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)

__all__ = ["MODEL", "estimate"]

BYTES_PER_PARAM = {"adamw": 28.0, "sgd": 20.0}
"""Bytes one fp32 update moves per parameter (above)."""
MASTER_EXTRA = 12.0
"""Bytes a half layout adds: the half parameter and gradient read, the half copy written."""
FORLOOP_FACTOR = 3.0
"""A for-loop optimizer against a fused one (a kernel per op and tensor; nominal)."""
BUILD_GBPS = {"cuda": 50.0, "cpu": 1.0}
"""Nominal GB/s of building the workload's parameters (random fill, fp32)."""


def estimate(cfg: WeightUpdateConfig, facts: NodeFacts) -> Estimate:
    rate = copy_rate(facts)
    n = num_params(cfg.model)
    updates = cfg.warmup + cfg.repeats
    seconds = 0.0
    for layout in cfg.layouts:
        for name in cfg.optimizers:
            per = BYTES_PER_PARAM["adamw" if name.startswith("adamw") else "sgd"]
            per += MASTER_EXTRA if layout != "fp32" else 0.0
            factor = FORLOOP_FACTOR if name.endswith("forloop") else 1.0
            seconds += updates * factor * n * per / (rate.value * 1e9)
    build = n * 4 * (1 + len(cfg.layouts)) / (BUILD_GBPS[facts.device_type] * 1e9)
    cases = len(cfg.layouts) * len(cfg.optimizers)
    terms = (
        Term(
            f"{cases} cases x {updates} updates of {n / 1e6:.3g} M parameters at "
            f"{rate.value:.3g} GB/s ({rate.source})",
            seconds,
        ),
        Term("building the parameters and each layout's copies", build),
    )
    return Estimate(terms=terms, points=cases)


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=5),
        halve_cut("warmup", floor=1),
        drop_cut(
            "optimizers",
            order=["sgd_forloop", "adamw_forloop", "sgd_foreach", "sgd_fused", "adamw_foreach"],
        ),
        drop_cut("layouts", order=["fp16_master", "bf16_master"]),
    ),
    facts=MEMORY_MODEL.facts,
)
