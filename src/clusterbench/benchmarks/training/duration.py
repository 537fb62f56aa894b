"""How long the ``training`` benchmark takes, and how it is cut to a time budget; the workload
figures (parameters, FLOPs per sample) that ``weight_update``, ``attribution`` and
``checkpoint`` estimates use too.

A training step is the workload's model FLOPs for the micro-batch (:mod:`.decoder`,
:mod:`.encoder`; torchvision's published counts) at a fraction of the node's matmul rate (the
gemm sweep's measured rate, else the spec's, else nominal), plus a fixed per-step overhead.
Per case: building (and compiling) the model, then warm-up + timed steps.  The cases: one per
world size of the scaling series, the sweep's combinations, the accumulation sweep (each k
twice: with and without DDP's sync, k micro-steps a step) and the partition search's
candidates.
"""

from __future__ import annotations

import dataclasses

from clusterbench.benchmarks.gemm.duration import CPU_TFLOPS, SPEC_FRACTION
from clusterbench.benchmarks.gemm.duration import MODEL as GEMM_MODEL
from clusterbench.benchmarks.training.settings import TrainingConfig
from clusterbench.durations import (
    Cut,
    CutFn,
    DurationModel,
    Estimate,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)
from clusterbench.model_shapes import (
    DECODER_PRESETS,
    ENCODER_PRESETS,
    decoder_flops_per_token,
    encoder_flops_per_sequence,
)

__all__ = [
    "MODEL",
    "estimate",
    "flops_per_sample",
    "num_params",
    "step_seconds",
]

VISION = {"resnet50": (25.6e6, 3 * 4.09e9), "vit_b_16": (86.6e6, 3 * 17.56e9)}
"""(parameters, training FLOPs per 224 px image = 3 x forward): torchvision's model table
(ResNet50_Weights.IMAGENET1K_V1: 25.6 M, 4.09 GFLOPS; ViT_B_16: 86.6 M, 17.56 GFLOPS)."""
LOCAL = {
    "comm_heavy": (1.05e6, 2.0 * 1.05e6),
    "gemm_heavy": (2 * 1024 * 1024.0, 6 * 2 * 1024**2 * 128),
}
"""attribution's own workloads (:mod:`..attribution_steps`): (parameters, FLOPs per sample)."""
MFU = {"cuda": 0.4, "cpu": 0.3}
"""Share of the matmul rate a training step reaches (55% MFU measured for the compiled 1.3b on
an H200, docs/results/H200-level3.md; less for small or eager models)."""
STEP_OVERHEAD_S = {"cuda": 0.01, "cpu": 0.03}
"""Fixed seconds per step: launches, the optimizer, the loss, DDP's hooks (nominal)."""
BUILD_S = {"cuda": 2.0, "cpu": 0.3}
"""Building a case: the model, its wrapper, the optimizer (nominal)."""
SCALING_CASE_S = {"cuda": 3.0, "cpu": 2.3}
"""Added to each case of the scaling series: its process group, the replicas' check, the
first allocations.  CPU: each took ~2.7 s of which ~0.3 s were steps, against ~0.4 s for an
accumulation case (the tiny model on 2 gloo ranks of a 2-core VM, 2026-12-02); cuda nominal."""
COMPILE_S = 30.0
"""torch.compile of every block of a case, on a GPU (nominal; the first case pays the most)."""


def num_params(model: str) -> float:
    """Parameters of a workload preset (decoders and encoders by hand, vision from its table)."""
    if model in DECODER_PRESETS:
        cfg = DECODER_PRESETS[model]
        return float(cfg.num_params_without_embedding() + cfg.vocab_size * cfg.dim)
    if model in ENCODER_PRESETS:
        e = ENCODER_PRESETS[model]
        return float(e.num_layers * (4 * e.dim**2 + 2 * e.dim * e.ffn_dim) + e.vocab_size * e.dim)
    return (VISION.get(model) or LOCAL.get(model) or (1e8, 0.0))[0]


def flops_per_sample(model: str, *, seq_len: int | None = None) -> float:
    """Training FLOPs of one sample (a sequence, an image)."""
    if model in DECODER_PRESETS:
        cfg = DECODER_PRESETS[model]
        t = seq_len or cfg.seq_len
        return decoder_flops_per_token(cfg, seq_len=t) * t
    if model in ENCODER_PRESETS:
        e = ENCODER_PRESETS[model]
        return encoder_flops_per_sequence(e.with_seq_len(seq_len) if seq_len else e)
    return (VISION.get(model) or LOCAL.get(model) or (0.0, 6e8))[1]


def _rate(facts: NodeFacts, precision: str) -> float:
    dtype = "fp32" if precision in ("fp32", "tf32") and not facts.cuda else precision
    spec = facts.spec_tflops.get("bf16" if dtype == "fp16" else dtype)
    r = facts.rate(
        f"gemm_tflops_{dtype}",
        nominal=CPU_TFLOPS.get(dtype, 0.05),
        spec=None if spec is None else SPEC_FRACTION * spec,
    )
    return r.value * 1e12 * MFU[facts.device_type]


def step_seconds(
    facts: NodeFacts, *, model: str, precision: str, samples: int, seq_len: int | None = None
) -> float:
    """One optimizer step of ``samples`` samples on one rank."""
    flops = flops_per_sample(model, seq_len=seq_len) * samples
    return STEP_OVERHEAD_S[facts.device_type] + flops / _rate(facts, precision)


def _world_sizes(cfg: TrainingConfig, world: int) -> list[int]:
    if cfg.world_sizes:
        return sorted(set(cfg.world_sizes))
    return sorted({*(1 << i for i in range(world.bit_length())), world})


def _case_s(
    cfg: TrainingConfig, facts: NodeFacts, *, steps: int, accum: int, compile_: bool
) -> float:
    step = step_seconds(
        facts,
        model=cfg.model,
        precision=cfg.precision,
        samples=cfg.batch_size * accum,
        seq_len=cfg.seq_len,
    )
    build = BUILD_S[facts.device_type] + (COMPILE_S if compile_ and facts.cuda else 0.0)
    return build + steps * step


def estimate(cfg: TrainingConfig, facts: NodeFacts) -> Estimate:
    sizes = _world_sizes(cfg, facts.world_size)
    scaling = len(sizes) * SCALING_CASE_S[facts.device_type] + len(sizes) * _case_s(
        cfg, facts, steps=cfg.warmup_steps + cfg.steps, accum=cfg.grad_accum, compile_=cfg.compile
    )
    terms = [
        Term(
            f"scaling: {len(sizes)} world sizes x {cfg.warmup_steps + cfg.steps} steps of "
            f"{cfg.batch_size} x {cfg.grad_accum} {cfg.model} samples",
            scaling,
        )
    ]
    points = len(sizes)
    warm, timed = max(2, cfg.sweep_steps // 4), cfg.sweep_steps
    if cfg.sweep:
        combos = [(c, a) for c in cfg.sweep_compile for a in cfg.sweep_activation_checkpointing]
        n = len(cfg.sweep_strategies) * len(cfg.sweep_precisions)
        seconds = n * sum(
            _case_s(cfg, facts, steps=warm + timed, accum=cfg.grad_accum, compile_=c)
            * (4 / 3 if a else 1)
            for c, a in combos
        )
        terms.append(Term(f"sweep: {n * len(combos)} combinations x {warm + timed} steps", seconds))
        points += n * len(combos)
    if cfg.grad_accum_sweep and sizes[-1] > 1:
        seconds = sum(
            2 * _case_s(cfg, facts, steps=warm + timed, accum=k, compile_=cfg.compile)
            for k in cfg.grad_accum_sweep
        )
        terms.append(
            Term(f"grad-accum sweep: k in {cfg.grad_accum_sweep}, with and without sync", seconds)
        )
        points += len(cfg.grad_accum_sweep)
    if cfg.partition:
        n = _num_candidates(cfg, sizes)
        pwarm = max(2, cfg.partition_steps // 4)
        seconds = n * _case_s(
            cfg,
            facts,
            steps=pwarm + cfg.partition_steps,
            accum=cfg.grad_accum,
            compile_=cfg.compile,
        )
        terms.append(
            Term(f"partition search: {n} candidates x {pwarm + cfg.partition_steps} steps", seconds)
        )
        points += n
    return Estimate(terms=tuple(terms), points=points)


def _num_candidates(cfg: TrainingConfig, sizes: list[int]) -> int:
    from clusterbench.benchmarks.training.partition_plan import num_candidates

    try:
        return num_candidates(cfg, sizes)
    except ValueError:  # a global batch it cannot partition: the run refuses it up front
        return 0


def _ends_only(cfg: TrainingConfig, facts: NodeFacts) -> Cut | None:
    """The scaling series at 1 and the whole world only (efficiency needs both ends)."""
    sizes = _world_sizes(cfg, facts.world_size)
    if len(sizes) <= 2 or cfg.scaling_mode == "strong":
        return None
    ends = [sizes[0], sizes[-1]]
    try:
        new = dataclasses.replace(cfg, world_sizes=ends)
    except ValueError:
        return None
    return Cut(settings=new, key="world_sizes", before=str(sizes), after=str(ends))


def _off(key: str) -> CutFn:
    def cut(cfg: TrainingConfig, facts: NodeFacts) -> Cut | None:
        if not getattr(cfg, key):
            return None
        new: TrainingConfig = dataclasses.replace(cfg, **{key: False})  # type: ignore[arg-type]
        return Cut(settings=new, key=key, before="true", after="false")

    return cut


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("steps", floor=5),
        halve_cut("warmup_steps", floor=2),
        halve_cut("sweep_steps", floor=5),
        halve_cut("partition_steps", floor=5),  # the recommendation's test needs 5
        halve_cut("partition_max_candidates", floor=2),
        drop_cut("grad_accum_sweep", keep=2),
        drop_cut("sweep_precisions"),
        drop_cut("sweep_compile"),
        drop_cut("sweep_activation_checkpointing"),
        drop_cut("sweep_strategies"),
        _ends_only,
        _off("partition"),
        _off("sweep"),
        drop_cut("grad_accum_sweep", keep=0),
    ),
    facts=GEMM_MODEL.facts,
)
