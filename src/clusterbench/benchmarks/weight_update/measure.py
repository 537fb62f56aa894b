"""The ``weight_update`` benchmark: the optimizer step of a training workload alone, per device.

Every rank builds the ``training`` workload's model on its device (its real parameter tensors),
fills the gradients once with random values and times the weight update alone, for each
optimizer (AdamW, SGD with momentum; fused, foreach, for-loop) and parameter layout (fp32, or
bf16 / fp16 parameters with fp32 master weights: :mod:`.step`).  Its GB/s is the
bytes the update must move (:func:`~.weight_update_step.bytes_per_param`, docs/reference.md) over
the median time; analysis compares it with the copy bandwidth the ``memory`` benchmark measured
on the same device.  After the timed updates one parameter is checked against a float64
reference of the same number of steps.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.weight_update import step as steps
from clusterbench.benchmarks.weight_update.optimizers import (
    OptimizerName,
)
from clusterbench.benchmarks.weight_update.settings import (
    WeightUpdateConfig,
    WeightUpdateMetrics,
)
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, ParamValue, Reference, Stats

__all__ = ["weight_update"]

_CHECK_MAX_ELEMENTS = 2**22
"""The parameter checked is the largest of at most this many elements (a 2048 x 2048
attention weight of the 1.3b): many chunks of a fused or foreach kernel, and cheap to replay
in float64."""


def weight_update(ctx: DistContext, cfg: WeightUpdateConfig) -> Iterator[Measurement]:
    """Optimizer step alone (GB/s of the bytes it must move), per optimizer and layout."""
    ctx.progress.start(len(cfg.layouts) * len(cfg.optimizers))
    params: list[torch.Tensor] = list(
        build_workload(cfg.model, device=ctx.device).model.parameters()
    )
    checked = _checked_index(params)
    done, total = 0, len(cfg.layouts) * len(cfg.optimizers)
    for layout in cfg.layouts:
        if done and ctx.budget.expired():  # this rank's clock: no collective to keep in step
            break
        tensors = steps.prepare_layout(layout, params)
        try:
            for name in cfg.optimizers:
                if done and ctx.budget.expired():
                    break
                yield from _measure(ctx, cfg, tensors=tensors, optimizer=name, checked=checked)
                done += 1
                ctx.progress.advance()
        finally:
            tensors.release()
    if done < total:
        ctx.budget.stopped(done=done, total=total, unit="optimizer x layout cases")
    del params
    if ctx.is_cuda:
        torch.cuda.empty_cache()  # ~20 B per parameter back for the benchmarks after this one


def _checked_index(params: list[torch.Tensor]) -> int:
    fits = [i for i, p in enumerate(params) if p.numel() <= _CHECK_MAX_ELEMENTS]
    if not fits:
        return min(range(len(params)), key=lambda i: params[i].numel())
    return max(fits, key=lambda i: params[i].numel())


def _measure(
    ctx: DistContext,
    cfg: WeightUpdateConfig,
    *,
    tensors: steps.LayoutTensors,
    optimizer: OptimizerName,
    checked: int,
) -> Iterator[Measurement]:
    family = steps.OPTIMIZER_SPECS[optimizer].family
    opt = steps.make_optimizer(optimizer, tensors.params)
    update = steps.update_fn(tensors, opt, steps.make_scaler(tensors.layout, ctx.device))
    before = tensors.params[checked].detach().to(torch.float64, copy=True)
    num_steps = 0

    def counted() -> None:
        nonlocal num_steps
        update()
        num_steps += 1

    samples = time_op(counted, device=ctx.device, warmup=cfg.warmup, repeats=cfg.repeats)
    what = f"{optimizer} ({tensors.layout})"
    error, tolerance = _check(
        tensors, before=before, checked=checked, family=family, num_steps=num_steps, what=what
    )
    del opt  # its state: as large as the parameters (SGD) or twice (AdamW)
    num_params = sum(p.numel() for p in tensors.params)
    per_param = steps.bytes_per_param(family, tensors.layout)
    params: dict[str, ParamValue] = {
        "model": cfg.model, "optimizer": optimizer, "layout": tensors.layout,
        "num_params": num_params, "bytes_per_param": per_param,
    }  # fmt: skip
    # GB/s = bytes_per_param x num_params / t / 1e9 (the bytes the update must move)
    bandwidth = rate_stats(samples, work=per_param * num_params, scale=1e9)
    yield ctx.measurement(WeightUpdateMetrics.bandwidth, value=bandwidth.median, params=params,
                          stats=bandwidth, reference=_spec_reference(ctx))  # fmt: skip
    step_ms = Stats.from_samples([t * 1e3 for t in samples])
    yield ctx.measurement(WeightUpdateMetrics.step_time_ms, value=step_ms.median, params=params,
                          stats=step_ms)  # fmt: skip
    yield ctx.measurement(WeightUpdateMetrics.update_rel_error, value=error,
                          params={**params, "tolerance": round(tolerance, 6)})  # fmt: skip


def _check(
    tensors: steps.LayoutTensors,
    *,
    before: torch.Tensor,
    checked: int,
    family: steps.Family,
    num_steps: int,
    what: str,
) -> tuple[float, float]:
    """The checked parameter against its float64 reference; raises when it is off."""
    reference = steps.reference_update(
        before, tensors.gradient(checked), family=family, num_steps=num_steps
    )
    after = tensors.params[checked].detach()
    error, tolerance = steps.check_update(
        before=before, after=after, reference=reference, num_steps=num_steps
    )
    if not error <= tolerance:  # also a NaN
        raise RuntimeError(
            f"weight_update: {what} moved the weights {error:.3g} of the update off the float64 "
            f"reference of {num_steps} {family} steps (tolerance {tolerance:.3g}): the update "
            "is wrong"
        )
    steps.check_written_back(tensors, checked)
    return error, tolerance


def _spec_reference(ctx: DistContext) -> Reference | None:
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    if spec is None or spec.hbm_gbps <= 0:
        return None
    return Reference(value=spec.hbm_gbps, kind="spec_peak", source=spec.source)
