"""How long the ``sdc`` check takes, and how it is cut to a time budget.

Per case (dtype x shape) and repeat: a chain of ``depth`` products at the matmul rate (the
gemm sweep's measured rate on this node, else 70% of the spec's peak, else nominal), then the
result hashed on the host (and, on GPUs, copied there first); the inputs are drawn once per
case from the fixed seed: on a CPU by its sequential generator, at ``DRAW_M_PER_S``; a GPU draws its
own, not counted (about 10 bytes of device memory written per element: some 7 GB for the
standard preset, milliseconds at HBM rates; not timed on its own).
"""

from __future__ import annotations

from clusterbench.benchmarks.gemm.duration import CPU_TFLOPS, SPEC_FRACTION
from clusterbench.benchmarks.gemm.duration import MODEL as GEMM_MODEL
from clusterbench.benchmarks.sdc.settings import SdcConfig
from clusterbench.durations import (
    DurationModel,
    Estimate,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)

__all__ = ["DRAW_M_PER_S", "MODEL", "estimate"]

HASH_GBPS = 0.5
"""Nominal GB/s the host hashes results at (hashlib over a CPU copy of the result)."""
D2H_GBPS = 10.0
"""Nominal GB/s of the device-to-host copy of a result before it is hashed."""
DRAW_M_PER_S = 60.0
"""Nominal millions of input elements a CPU draws a second (torch's Mersenne Twister, one
thread; 45-90 measured on a 2-core VM)."""
_ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _tflops(facts: NodeFacts, dtype: str) -> float:
    spec = facts.spec_tflops.get("bf16" if dtype == "fp16" else dtype)
    return facts.rate(
        f"gemm_tflops_{dtype}",
        nominal=CPU_TFLOPS.get(dtype, 0.01),
        spec=None if spec is None else SPEC_FRACTION * spec,
    ).value


def estimate(cfg: SdcConfig, facts: NodeFacts) -> Estimate:
    cases = cfg.cases()
    compute = hashed = drawn = 0.0
    for case in cases:
        m, n, k = case.m, case.n, case.k
        drawn += m * k + k * n + n * k
        # the chain alternates (M x K)@(K x N) and (M x N)@(N x K): 2MNK FLOPs each
        compute += cfg.repeats * case.depth * 2.0 * m * n * k / (_tflops(facts, case.dtype) * 1e12)
        hashed += cfg.repeats * m * max(n, k) * _ELEMENT_BYTES.get(case.dtype, 4)
    rate = 1 / (1 / HASH_GBPS + (1 / D2H_GBPS if facts.cuda else 0.0))
    terms = [
        Term(f"{len(cases)} cases x {cfg.repeats} repeats x {cfg.depth} products", compute),
        Term(
            f"{hashed / 1e9:.3g} GB of results hashed at {rate:.2g} GB/s (nominal)",
            hashed / (rate * 1e9),
        ),
    ]
    if not facts.cuda:
        terms.append(
            Term(
                f"{drawn / 1e6:.3g} M input elements drawn at {DRAW_M_PER_S:.3g} M/s (nominal)",
                drawn / (DRAW_M_PER_S * 1e6),
            )
        )
    return Estimate(terms=tuple(terms), points=len(cases))


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=3),
        halve_cut("depth", floor=2),
        drop_cut("shapes"),
        drop_cut("dtypes", order=["fp16", "fp32"]),
    ),
    facts=GEMM_MODEL.facts,
)
