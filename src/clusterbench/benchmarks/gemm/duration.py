"""How long the ``gemm`` sweep takes, and how it is cut to a time budget.

Per dtype and shape: warm-up + repeats + one checked product of 2MNK FLOPs at the dtype's rate
(this node's measured geometric mean, else 70% of the spec's dense peak, else a nominal CPU
rate), the float64 check of the first 128 rows, and the fill of fresh random inputs.
"""

from __future__ import annotations

import dataclasses
import typing

from clusterbench.benchmarks.gemm.settings import DTYPES, Dtype, GemmConfig, parse_shape
from clusterbench.durations import (
    Cut,
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)

__all__ = ["MODEL", "estimate"]

SPEC_FRACTION = 0.7
"""Share of the spec's dense peak a sweep reaches on average (docs/results/H200.md: bf16 best
shapes 70-80% of 989 TFLOP/s)."""
CPU_TFLOPS: dict[str, float] = {"fp32": 0.05, "tf32": 0.05, "bf16": 0.2, "fp16": 0.05}
"""Nominal TFLOP/s of one CPU rank where nothing was measured: two ranks on a 2-core x86-64 VM
measured 0.05-0.09 fp32 and 0.2 bf16 (its matrix extensions) at 256^3-768^3 (standard suite,
2026-12-01)."""
CPU_FILL_PER_S = 1e8
"""Random elements one CPU rank fills per second (torch.randn), nominal."""
GPU_OVERHEAD_S = 2e-5
"""Launch and timing overhead per timed product on a GPU (CUDA events, the L2 flush)."""
_CHECK_ROWS = 128
_KEEP_FIRST: dict[str, Dtype] = {"cuda": "bf16", "cpu": "fp32"}
"""The dtype a cut keeps: the one training runs in."""


def _rate(facts: NodeFacts, dtype: str) -> tuple[float, str]:
    spec = facts.spec_tflops.get("bf16" if dtype == "fp16" else dtype)
    nominal = CPU_TFLOPS.get(dtype, 0.01) if not facts.cuda else 100.0
    r = facts.rate(
        f"gemm_tflops_{dtype}", nominal=nominal, spec=None if spec is None else SPEC_FRACTION * spec
    )
    return r.value * 1e12, r.source


def estimate(cfg: GemmConfig, facts: NodeFacts) -> Estimate:
    terms = []
    points = 0
    for dtype in cfg.dtypes:
        if dtype == "fp8" and not facts.cuda:
            continue  # skipped on CPU ranks
        flops_per_s, source = _rate(facts, dtype)
        shapes = [parse_shape(s) for s in cfg.shapes_by_dtype.get(dtype, cfg.shapes)]
        products = cfg.warmup + cfg.repeats + 1
        flops = sum(2.0 * m * n * k for m, n, k in shapes)
        check = sum(2.0 * min(m, _CHECK_ROWS) * n * k for m, n, k in shapes)
        seconds = products * flops / flops_per_s + 2 * check / _rate(facts, "fp32")[0]
        fill = sum(m * k + k * n for m, n, k in shapes)
        seconds += fill / CPU_FILL_PER_S if not facts.cuda else 0.0
        seconds += len(shapes) * products * GPU_OVERHEAD_S if facts.cuda else 0.0
        rate = flops_per_s / 1e12
        terms.append(
            Term(
                f"{dtype}: {len(shapes)} shapes x {products} products at "
                f"{rate:.3g} TFLOP/s ({source})",
                seconds,
            )
        )
        points += len(shapes)
    return Estimate(terms=tuple(terms), points=max(1, points))


def _drop_dtype(cfg: GemmConfig, facts: NodeFacts) -> Cut | None:
    keep = _KEEP_FIRST["cuda" if facts.cuda else "cpu"]
    order = [d for d in ("fp32", "tf32", "fp16", "fp8", "bf16") if d != keep] + [keep]
    return drop_cut("dtypes", order=order)(cfg, facts)


def _drop_shape(cfg: GemmConfig, facts: NodeFacts) -> Cut | None:
    """The last shape of the longest list (shapes, or a dtype's own), keeping one in each."""
    lists = {
        "shapes": cfg.shapes,
        **{f"shapes_by_dtype.{d}": v for d, v in cfg.shapes_by_dtype.items()},
    }
    key, longest = max(lists.items(), key=lambda kv: len(kv[1]))
    if len(longest) <= 1:
        return None
    rest = longest[:-1]
    if key == "shapes":
        new = dataclasses.replace(cfg, shapes=rest)
    else:
        dtype = typing.cast(Dtype, key.split(".", 1)[1])
        new = dataclasses.replace(cfg, shapes_by_dtype={**cfg.shapes_by_dtype, dtype: rest})
    return Cut(
        settings=new,
        key=key,
        before=str(len(longest)),
        after=f"{len(rest)} (kept {', '.join(rest)})",
    )


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=5),
        halve_cut("warmup", floor=2),
        _drop_dtype,
        _drop_shape,
    ),
    facts=tuple(
        FactQuery(
            name=f"gemm_tflops_{d}", benchmark="gemm", metric="tflops_geomean", params={"dtype": d}
        )
        for d in DTYPES
    ),
)
