"""How long the ``memory`` benchmark takes, and how it is cut to a time budget.

Per operation: warm-up + repeats + one checked run, each moving the op's bytes (a copy reads
and writes its buffer, a read or a write touches it once) at the memory bandwidth (this
node's measured copy rate, else 90% of the spec's, else a nominal CPU rate), after filling
the source with random numbers.
"""

from __future__ import annotations

from clusterbench.benchmarks.memory.settings import MemoryConfig
from clusterbench.durations import (
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Rate,
    Term,
    drop_cut,
    halve_cut,
)
from clusterbench.units import format_bytes

__all__ = ["MODEL", "copy_rate", "estimate"]

SPEC_FRACTION = 0.9
"""Share of the spec's bandwidth a large copy reaches (docs/results/H200.md: ~90%)."""
CPU_GBPS = 20.0
"""Nominal GB/s of one CPU rank where nothing was measured: two ranks of a 2-core x86-64 VM
measured 19-24 GB/s (copy and read of 256 MiB, standard suite, 2026-12-01)."""
CPU_FILL_GBPS = 0.5
"""Nominal GB/s one CPU rank fills with torch.rand."""
_PASSES = {"copy": 2, "read": 1, "write": 1}
_MIN_SIZE_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20}
"""Smallest buffer a cut leaves: many times the GPU's L2 (50 MB on an H200) or a CPU's LLC."""


def copy_rate(facts: NodeFacts) -> Rate:
    """The device memory's GB/s: this node's measured copy rate, else 90% of the spec's, else
    nominal (the weight update's model uses it too)."""
    spec = facts.spec_memory_gbps
    return facts.rate(
        "memory_copy_gbps",
        nominal=CPU_GBPS if not facts.cuda else 1000.0,
        spec=None if spec is None else SPEC_FRACTION * spec,
    )


def estimate(cfg: MemoryConfig, facts: NodeFacts) -> Estimate:
    rate = copy_rate(facts)
    runs = cfg.warmup + cfg.repeats + 1
    moved = sum(_PASSES[op] for op in cfg.ops) * runs * cfg.size_bytes
    terms = [
        Term(
            f"{len(cfg.ops)} ops x {runs} runs of {cfg.size_bytes / 1e9:.3g} GB at "
            f"{rate.value:.3g} GB/s ({rate.source})",
            moved / (rate.value * 1e9),
        )
    ]
    if not facts.cuda:
        terms.append(Term("random fill of the source", cfg.size_bytes / (CPU_FILL_GBPS * 1e9)))
    return Estimate(terms=tuple(terms), points=len(cfg.ops))


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=5),
        halve_cut("warmup", floor=1),
        drop_cut("ops", order=["write", "read"]),
        halve_cut(
            "size_bytes",
            floor=lambda f: _MIN_SIZE_BYTES[f.device_type],
            multiple=4,
            label=format_bytes,
        ),
    ),
    facts=(
        FactQuery(
            name="memory_copy_gbps", benchmark="memory", metric="bandwidth", params={"op": "copy"}
        ),
    ),
)
