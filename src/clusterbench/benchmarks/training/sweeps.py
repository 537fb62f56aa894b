"""The two sweeps of the training benchmark: every combination that fits, and gradient
accumulation against synchronisation idle."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import torch
import torch.distributed as dist

from clusterbench.benchmarks.training import formulas
from clusterbench.benchmarks.training.cases import (
    case_params,
    free_memory,
    run_case,
    setup_case,
    sweep_steps,
    time_steps,
)
from clusterbench.benchmarks.training.settings import Case, TrainingConfig, TrainingMetrics
from clusterbench.benchmarks.training.strategies import case_scope
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, ParamValue, Stats

__all__ = ["grad_accum_sweep", "run_sweep_case"]

log = logging.getLogger(__name__)
_MAX_REASON = 200


def run_sweep_case(
    ctx: DistContext, cfg: TrainingConfig, *, case: Case, group: dist.ProcessGroup
) -> Iterator[Measurement]:
    """One sweep combination; ``fits`` 1 with its figures, or 0 with the reason it did not run
    (out of memory, not applicable, failed).  The failure is logged, never raised: the sweep
    goes on.  An error on only some ranks (e.g. one OOM) can leave the others waiting in a
    collective until the run's timeout."""
    reason = ""
    try:
        outcome = run_case(
            ctx, cfg, case=case, group=group, grad_accum=cfg.grad_accum, series="sweep",
            steps=sweep_steps(cfg),
        )  # fmt: skip
        yield from outcome.measurements
    except torch.OutOfMemoryError:
        reason = "out of memory"
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:_MAX_REASON]
    if reason:
        free_memory(ctx)
        log.warning("training sweep: %s does not run: %s", case, reason)
    if dist.get_rank(group) == 0:
        params = case_params(
            cfg, case=case, w=dist.get_world_size(group), grad_accum=cfg.grad_accum
        )
        params.update(series="sweep", reason=reason or None)
        yield ctx.measurement(TrainingMetrics.fits, value=0 if reason else 1, params=params)


def grad_accum_sweep(
    ctx: DistContext, cfg: TrainingConfig, *, group: dist.ProcessGroup
) -> Iterator[Measurement]:
    """Per accumulation count k: the step with DDP's all-reduce, the same step with every
    micro-step under no_sync (compute only), and their difference, the synchronisation idle."""
    case = Case(
        strategy="ddp",
        precision=cfg.precision,
        activation_checkpointing=cfg.activation_checkpointing,
        compile=cfg.compile,
        cuda_graphs=cfg.cuda_graphs,
    )
    warmup, steps = sweep_steps(cfg)
    for k in cfg.grad_accum_sweep:
        with case_scope(case.precision):
            built = setup_case(ctx, cfg, case=case, group=group, grad_accum=k)
            trainer, batches = built.trainer, built.batches
            synced = time_steps(ctx, trainer=trainer, batches=batches, warmup=warmup, steps=steps)
            compute = time_steps(
                ctx, trainer=trainer, batches=batches, warmup=warmup, steps=steps, sync=False
            )
        w = dist.get_world_size(group)
        if dist.get_rank(group) == 0:
            params = case_params(cfg, case=case, workload=built.workload, w=w, grad_accum=k)
            params["series"] = "grad_accum"
            yield from _idle_measurements(
                ctx, params=params, synced=synced.step_times_s, compute=compute.step_times_s
            )
        del built, trainer, batches
        free_memory(ctx)
        ctx.progress.advance()


def _idle_measurements(
    ctx: DistContext, *, params: dict[str, ParamValue], synced: list[float], compute: list[float]
) -> Iterator[Measurement]:
    step = Stats.from_samples([t * 1e3 for t in synced])
    only = Stats.from_samples([t * 1e3 for t in compute])
    idle_ms = max(0.0, step.median - only.median)
    fraction = formulas.idle_fraction(step_time=step.median, compute_time=only.median)
    m = TrainingMetrics
    yield ctx.measurement(m.accum_step_time_ms, value=step.median, params=params, stats=step)
    yield ctx.measurement(m.compute_only_step_time_ms, value=only.median, params=params, stats=only)
    yield ctx.measurement(m.sync_idle_ms, value=idle_ms, params=params)
    yield ctx.measurement(m.sync_idle_fraction, value=100 * fraction, params=params)
