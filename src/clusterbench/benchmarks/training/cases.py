"""Run one training configuration on one group and turn its timings into measurements."""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from clusterbench.benchmarks.gemm import TOLERANCE, make_product, spec_reference
from clusterbench.benchmarks.training import metrics
from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.training.strategies import (
    Case,
    build_trainer,
    case_scope,
    replicas_agree,
)
from clusterbench.benchmarks.training.workload import Workload
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.precision import matmul_precision
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, ParamValue, Reference, Stats

if TYPE_CHECKING:
    from clusterbench.benchmarks.training.bench import TrainingConfig

__all__ = [
    "SEED",
    "Outcome",
    "case_params",
    "free_memory",
    "run_case",
    "scaling_measurements",
    "setup_case",
    "sweep_cases",
    "sweep_steps",
    "time_steps",
]

SEED = 1234  # every rank draws the same weights and batches (tensor / pipeline parallel need it)
_GEMM_SIZE = 8192
_gemm_tflops: dict[str, float] = {}


@dataclass(kw_only=True)
class Outcome:
    world_size: int
    step_times_s: list[float]
    samples_per_step: int
    """Global batch."""
    measurements: list[Measurement] = field(default_factory=list)

    @property
    def step_time_s(self) -> float:
        return Stats.from_samples(self.step_times_s).median

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_step / self.step_time_s


@dataclass(frozen=True, kw_only=True, slots=True)
class _Timed:
    samples: list[float]
    loss: float
    peak_memory_bytes: int | None


def setup_case(
    ctx: DistContext, cfg: TrainingConfig, *, case: Case, group: dist.ProcessGroup, grad_accum: int
) -> tuple[Workload, object, list[tuple[torch.Tensor, torch.Tensor]]]:
    torch.manual_seed(SEED)
    w = dist.get_world_size(group)
    workload = build_workload(cfg.model, device=ctx.device, seq_len=cfg.seq_len)
    # tp / pp: the group trains batch_size x w samples, the same work per GPU as data parallel
    micro = cfg.batch_size * (w if case.strategy in ("tp", "pp") else 1)
    batches = [workload.make_batch(micro) for _ in range(grad_accum)]
    trainer = build_trainer(
        workload, case=case, group=group, device=ctx.device, num_microbatches=w * grad_accum
    )
    return workload, trainer, batches


def time_steps(
    ctx: DistContext, *, trainer: object, batches: list, warmup: int, steps: int, sync: bool = True
) -> _Timed:
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    step = trainer.step  # type: ignore[attr-defined]
    samples = time_op(
        lambda: step(batches, sync=sync), device=ctx.device, warmup=warmup, repeats=steps
    )
    loss = trainer.last_loss()  # type: ignore[attr-defined]
    if not math.isfinite(loss):
        raise RuntimeError(f"training: the loss is not finite ({loss}) after {steps} steps")
    peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.is_cuda else None
    return _Timed(samples=samples, loss=loss, peak_memory_bytes=peak)


def run_case(
    ctx: DistContext,
    cfg: TrainingConfig,
    *,
    case: Case,
    group: dist.ProcessGroup,
    grad_accum: int,
    series: str,
    steps: tuple[int, int] | None = None,
) -> Outcome:
    """Build, wrap, warm up and time one case; measurements only on group rank 0."""
    warmup, num_steps = steps or (cfg.warmup_steps, cfg.steps)
    with case_scope(case.precision):
        workload, trainer, batches = setup_case(
            ctx, cfg, case=case, group=group, grad_accum=grad_accum
        )
        timed = time_steps(ctx, trainer=trainer, batches=batches, warmup=warmup, steps=num_steps)
    w = dist.get_world_size(group)
    data_parallel = case.strategy in ("ddp", "zero1") and w > 1
    if data_parallel and not replicas_agree(trainer.model, group):  # type: ignore[attr-defined]
        raise RuntimeError(
            f"training: the ranks' weights differ after {case.strategy} steps "
            "(gradients were not synchronised)"
        )
    outcome = Outcome(
        world_size=w, step_times_s=timed.samples, samples_per_step=cfg.batch_size * w * grad_accum
    )
    if dist.get_rank(group) == 0:
        params = case_params(cfg, case=case, workload=workload, w=w, grad_accum=grad_accum)
        params["series"] = series
        outcome.measurements = list(
            _emit(
                ctx,
                workload=workload,
                case=case,
                params=params,
                outcome=outcome,
                timed=timed,
                gemm_reference=cfg.gemm_reference,
            )
        )
    del trainer, workload, batches
    free_memory(ctx)
    return outcome


def free_memory(ctx: DistContext) -> None:
    gc.collect()
    if ctx.is_cuda:
        torch.cuda.empty_cache()


def case_params(
    cfg: TrainingConfig, *, case: Case, w: int, grad_accum: int, workload: Workload | None = None
) -> dict[str, ParamValue]:
    """What identifies a case in the results (``workload``: the one built, for its length)."""
    decoder = workload if workload is not None and workload.kind == "decoder" else None
    return {
        "model": cfg.model,
        "strategy": case.strategy,
        "precision": case.precision,
        "world_size": w,
        "batch_size": cfg.batch_size,
        "global_batch": cfg.batch_size * w * grad_accum,
        "grad_accum": grad_accum,
        "activation_checkpointing": case.activation_checkpointing,
        "compile": case.compile,
        "cuda_graphs": case.cuda_graphs,
        "seq_len": decoder.tokens_per_sample if decoder is not None else None,
    }


def _emit(
    ctx: DistContext,
    *,
    workload: Workload,
    case: Case,
    params: dict[str, ParamValue],
    outcome: Outcome,
    timed: _Timed,
    gemm_reference: bool,
) -> Iterator[Measurement]:
    w = outcome.world_size
    ms = Stats.from_samples([t * 1e3 for t in timed.samples])
    yield ctx.measurement(
        metric="step_time_ms", value=ms.median, unit="ms", params=params, stats=ms
    )
    tokens = workload.tokens_per_sample if workload.kind == "decoder" else 1
    name, unit = (
        ("tokens_per_s", "tokens/s")
        if workload.kind == "decoder"
        else ("samples_per_s", "samples/s")
    )
    # throughput = global batch x tokens per sample / step time
    total = rate_stats(timed.samples, work=outcome.samples_per_step * tokens, scale=1.0)
    per_gpu = rate_stats(timed.samples, work=outcome.samples_per_step * tokens / w, scale=1.0)
    yield ctx.measurement(
        metric=f"{name}_per_gpu", value=per_gpu.median, unit=unit, params=params, stats=per_gpu
    )
    yield ctx.measurement(metric=name, value=total.median, unit=unit, params=params, stats=total)
    yield from _utilisation(
        ctx,
        workload=workload,
        case=case,
        params=params,
        samples_per_s_per_gpu=outcome.samples_per_s / w,
        gemm_reference=gemm_reference,
    )
    if timed.peak_memory_bytes is not None:
        yield ctx.measurement(
            metric="peak_memory_gb", value=timed.peak_memory_bytes / 1e9, unit="GB", params=params
        )
    yield ctx.measurement(metric="loss", value=timed.loss, unit="nats", params=params)


def _utilisation(
    ctx: DistContext,
    *,
    workload: Workload,
    case: Case,
    params: dict[str, ParamValue],
    samples_per_s_per_gpu: float,
    gemm_reference: bool,
) -> Iterator[Measurement]:
    """mfu against the spec's dense peak and against a measured GEMM; hfu with recomputation."""
    flops = workload.flops_per_sample
    achieved = flops * samples_per_s_per_gpu / 1e12
    p = {**params, "flops_formula": workload.flops_formula}
    ref = spec_reference(ctx, case.precision)
    yield ctx.measurement(
        metric="model_tflops", value=achieved, unit="TFLOP/s", params=p, reference=ref
    )
    if ref is None:
        return  # CPU, or an unknown GPU: no peak to compare with
    peak = ref.value
    pct = Reference(value=100.0, kind="spec_peak", source=f"{ref.source}; {peak} TFLOP/s dense")
    value = metrics.mfu(
        flops_per_sample=flops, samples_per_s_per_gpu=samples_per_s_per_gpu, peak_tflops=peak
    )
    yield ctx.measurement(metric="mfu", value=100 * value, unit="%", params=p, reference=pct)
    if case.activation_checkpointing and workload.recompute_flops_per_sample > 0:
        hw = flops + workload.recompute_flops_per_sample
        hfu = metrics.mfu(
            flops_per_sample=hw, samples_per_s_per_gpu=samples_per_s_per_gpu, peak_tflops=peak
        )
        yield ctx.measurement(metric="hfu", value=100 * hfu, unit="%", params=p, reference=pct)
    gemm = _measured_gemm_tflops(ctx, case.precision) if gemm_reference else None
    if gemm:
        src = f"measured {_GEMM_SIZE}^3 {case.precision} matmul, {gemm:.0f} TFLOP/s"
        vs = metrics.mfu(
            flops_per_sample=flops, samples_per_s_per_gpu=samples_per_s_per_gpu, peak_tflops=gemm
        )
        yield ctx.measurement(
            metric="mfu_vs_gemm",
            value=100 * vs,
            unit="%",
            params=p,
            reference=Reference(value=100.0, kind="achievable", source=src),
        )


def _measured_gemm_tflops(ctx: DistContext, precision: str) -> float | None:
    """The median TFLOP/s of an 8192^3 matmul of ``precision`` on this GPU, measured once per
    process (docs/reference.md's baseline: 796 bf16 on an H200, within 1% of the best of 27
    shapes; clusterbench measured 780.8–794.7 for its best shape, docs/results/H200.md)."""
    if not ctx.is_cuda:
        return None
    if precision not in _gemm_tflops:
        n = _GEMM_SIZE
        with matmul_precision(precision):
            op, rel = make_product(ctx.device, dtype=precision, shape=(n, n, n), fast_accum=False)
            if not rel <= TOLERANCE[precision]:  # a wrong product is no reference (NaN too)
                return None
            samples = time_op(op, device=ctx.device, warmup=10, repeats=20)
        # TFLOP/s = 2 n^3 / t / 1e12
        _gemm_tflops[precision] = rate_stats(samples, work=2.0 * n**3, scale=1e12).median
        del op
    return _gemm_tflops[precision]


def scaling_measurements(
    ctx: DistContext, cfg: TrainingConfig, *, outcomes: dict[int, Outcome]
) -> Iterator[Measurement]:
    """scaling_efficiency (%) of every world size > 1 against world size 1."""
    base = outcomes.get(1)
    if base is None:
        return
    for w, o in sorted(outcomes.items()):
        if w == 1:
            continue
        if cfg.scaling_mode == "weak":
            e = metrics.weak_scaling_efficiency(
                throughput_n=o.samples_per_s, throughput_1=base.samples_per_s, n=w
            )
        else:
            e = metrics.strong_scaling_efficiency(
                step_time_1=base.step_time_s, step_time_n=o.step_time_s, n=w
            )
        params = dict(o.measurements[0].params) if o.measurements else {}
        params.update(scaling_mode=cfg.scaling_mode, world_size=w)
        yield ctx.measurement(metric="scaling_efficiency", value=100 * e, unit="%", params=params)


def sweep_cases(cfg: TrainingConfig) -> list[Case]:
    product = itertools.product(
        cfg.sweep_strategies,
        cfg.sweep_precisions,
        cfg.sweep_activation_checkpointing,
        cfg.sweep_compile,
    )
    return [
        Case(strategy=s, precision=p, activation_checkpointing=a, compile=c)
        for s, p, a, c in product
    ]


def sweep_steps(cfg: TrainingConfig) -> tuple[int, int]:
    return max(2, cfg.sweep_steps // 4), cfg.sweep_steps
