"""One training case on one process group, read top to bottom: build the workload and its
trainer, warm up, synchronize, time the steps, check them, record the measurements."""

from __future__ import annotations

import gc
import itertools
import math
from typing import NamedTuple

import torch
import torch.distributed as dist

from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.training.record import Outcome, Timed, case_measurements
from clusterbench.benchmarks.training.settings import Case, TrainingConfig, TrainingMetrics
from clusterbench.benchmarks.training.strategies import (
    DATA_PARALLEL,
    StepTrainer,
    Trainer,
    build_trainer,
    case_scope,
    gradient_bytes,
    replicas_agree,
)
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import synchronize, time_op
from clusterbench.schema import ParamValue

__all__ = [
    "SEED",
    "Built",
    "case_params",
    "check_replicas",
    "free_memory",
    "run_case",
    "setup_case",
    "sweep_cases",
    "sweep_steps",
    "time_steps",
]

SEED = 1234  # every rank draws the same weights and batches (tensor / pipeline parallel need it)


class Built(NamedTuple):
    """A case ready to train: the workload, its wrapped model's trainer, one optimizer step's
    batches (one per accumulation micro-step)."""

    workload: Workload
    trainer: StepTrainer
    batches: list[Batch]


def setup_case(
    ctx: DistContext, cfg: TrainingConfig, *, case: Case, group: dist.ProcessGroup, grad_accum: int
) -> Built:
    torch.manual_seed(SEED)
    w = dist.get_world_size(group)
    workload = build_workload(cfg.model, device=ctx.device, seq_len=cfg.seq_len)
    # tp / pp: the group trains batch_size x w samples, the same work per GPU as data parallel
    micro = cfg.batch_size * (w if case.strategy in ("tp", "pp") else 1)
    batches = [workload.make_batch(micro) for _ in range(grad_accum)]
    trainer = build_trainer(
        workload, case=case, group=group, device=ctx.device, num_microbatches=w * grad_accum
    )
    return Built(workload, trainer, batches)


def time_steps(
    ctx: DistContext,
    *,
    trainer: StepTrainer,
    batches: list[Batch],
    warmup: int,
    steps: int,
    sync: bool = True,
) -> Timed:
    """The step loop (nanoGPT's bench.py): warm up, synchronize, time every step, record.
    ``sync=False``: every micro-step without the gradient synchronisation (compute only)."""
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    for _ in range(warmup):  # compilation, autotuning, allocator and NCCL set-up: never timed
        trainer.step(batches, sync=sync)
    synchronize(ctx.device)  # the timed steps start on an idle device
    # one time per optimizer step: CUDA events around each step on GPUs, the host clock on CPUs
    step_times_s = time_op(
        lambda: trainer.step(batches, sync=sync), device=ctx.device, warmup=0, repeats=steps
    )
    loss = trainer.last_loss()
    if not math.isfinite(loss):
        raise RuntimeError(f"training: the loss is not finite ({loss}) after {steps} steps")
    peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.is_cuda else None
    resident = torch.cuda.memory_allocated(ctx.device) if ctx.is_cuda else None
    return Timed(
        step_times_s=step_times_s, loss=loss, peak_memory_bytes=peak,
        resident_memory_bytes=resident,
    )  # fmt: skip


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
    """Build, warm up, time and check one case; measurements only on group rank 0."""
    warmup, num_steps = steps or (cfg.warmup_steps, cfg.steps)
    w = dist.get_world_size(group)
    with case_scope(case.precision):
        built = setup_case(ctx, cfg, case=case, group=group, grad_accum=grad_accum)
        timed = time_steps(
            ctx, trainer=built.trainer, batches=built.batches, warmup=warmup, steps=num_steps
        )
    check_replicas(built.trainer, case=case, group=group)
    outcome = Outcome(
        world_size=w,
        step_times_s=timed.step_times_s,
        samples_per_step=cfg.batch_size * w * grad_accum,
    )
    if dist.get_rank(group) == 0:
        params = case_params(cfg, case=case, workload=built.workload, w=w, grad_accum=grad_accum)
        params["series"] = series
        outcome.measurements = list(
            case_measurements(
                ctx, workload=built.workload, case=case, params=params, outcome=outcome,
                timed=timed, gemm_reference=cfg.gemm_reference,
            )
        )  # fmt: skip
        if series == "scaling" and case.strategy in DATA_PARALLEL:
            # what the scaling prediction moves per step (analysis.prediction)
            grad = gradient_bytes(built.workload.model, case=case)
            outcome.measurements.append(
                ctx.measurement(TrainingMetrics.gradient_bytes, value=grad, params=params)
            )
    del built
    free_memory(ctx)
    return outcome


def check_replicas(trainer: StepTrainer, *, case: Case, group: dist.ProcessGroup) -> None:
    """After data-parallel steps (ddp, zero1) every rank must hold the same weights."""
    if case.strategy not in ("ddp", "zero1") or dist.get_world_size(group) == 1:
        return
    assert isinstance(trainer, Trainer)  # what build_trainer makes for ddp and zero1
    if not replicas_agree(trainer.model, group):
        raise RuntimeError(
            f"training: the ranks' weights differ after {case.strategy} steps "
            "(gradients were not synchronised)"
        )


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
    """(warm-up, timed) steps of a sweep or grad-accum case."""
    return max(2, cfg.sweep_steps // 4), cfg.sweep_steps
