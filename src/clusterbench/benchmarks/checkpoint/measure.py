"""Checkpoint save and load of a training workload's state, in the formats people use, and the
times that rate gives for the checkpoints users ask about.

The state is the model and its AdamW state after one training step (so exp_avg/exp_avg_sq
exist), as ``torch.distributed.checkpoint.state_dict.get_state_dict`` returns it; the formats
and their rounds are in ``checkpoint_rounds``.

Bounded by default: each format writes at most ``max_bytes`` of that state (whole parameters,
each with its optimizer state), at ``num_sizes`` sizes halving from there, each repeated until
its spread is small.  The α–β fit t = α + S/β over those sizes (``checkpoint_fit``) then gives
the time to save and load the workload's whole checkpoint and those of 7B and 70B models, with
and without the optimizer state, and what ``dcp.async_save`` hides of it.  ``max_bytes=0``
writes the whole state (the full-size save; the ``full`` suite does).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from clusterbench.benchmarks.checkpoint import fit as fit
from clusterbench.benchmarks.checkpoint import io as io
from clusterbench.benchmarks.checkpoint.rounds import (
    SPECS,
    FormatSpec,
    Run,
    gloo_group,
    replicate,
    shared_dir,
    state_dict_of,
)
from clusterbench.benchmarks.checkpoint.settings import (
    STATES,
    CheckpointConfig,
    CheckpointMetrics,
)
from clusterbench.benchmarks.dataloader.workload import load_workload, make_train_step
from clusterbench.benchmarks.training.strategies import Trainer
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats
from clusterbench.schema import Measurement, ParamValue, Stats

__all__ = ["checkpoint"]
_DCP = ("dcp", "dcp_async")


def checkpoint(ctx: DistContext, cfg: CheckpointConfig) -> Iterator[Measurement]:
    """Checkpoint save/load GB/s per format and state size, the α–β fit of each, the predicted
    seconds of whole checkpoints, and what an async save blocks and slows."""
    if ctx.num_nodes > 1 and not cfg.directory and any(f in _DCP for f in cfg.formats):
        raise ValueError(
            "checkpoint: DCP on several nodes needs a shared `directory` "
            "(--set checkpoint.directory=/shared/path)"
        )
    ctx.progress.start(len(cfg.formats) + 1)
    workload = load_workload(cfg.model, device=ctx.device)
    step = make_train_step(workload, precision="bf16" if ctx.is_cuda else "fp32")
    batch = workload.make_batch(cfg.batch_size)
    step.step([batch])  # the optimizer state exists after one step
    state = state_dict_of(step)
    layout = _Layout.of(step, state, cfg)
    with shared_dir(ctx, cfg.directory) as root, gloo_group(ctx) as group:
        run = Run(ctx=ctx, step=step, batch=batch, state=state, root=root, group=group,
                  num_checked=cfg.num_checked, stall_steps=cfg.stall_steps)  # fmt: skip
        if ctx.rank == 0:
            yield _free_space(run, layout, cfg)
        ctx.progress.advance()
        points = _Count(total=len(cfg.formats) * cfg.num_sizes)
        for fmt in cfg.formats:
            if points.done and ctx.budget.agree_expired(ctx):  # rank 0 decides, barriers in step
                points.stopped = True
                break
            yield from _format(run, cfg, SPECS[fmt], layout, points)
            ctx.barrier()
            # rank 0 counted (and stopped) its own formats alone
            points.done, points.stopped = ctx.broadcast_from_root((points.done, points.stopped))
            ctx.progress.advance()
        if points.stopped:
            ctx.budget.stopped(done=points.done, total=points.total, unit="format x size points")


@dataclass(kw_only=True, slots=True)
class _Count:
    """Format x size points measured, of those planned (the time budget stops between them)."""

    done: int = 0
    total: int
    stopped: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """The workload's checkpoint: its parameters, bytes per parameter with and without the
    optimizer state, and the models whose checkpoints are predicted."""

    num_params: int
    state_bytes: int
    bytes_per_param: dict[str, float]
    models: list[fit.ModelSize]

    @classmethod
    def of(cls, step: Trainer, state: dict[str, Any], cfg: CheckpointConfig) -> _Layout:
        num_params = sum(p.numel() for p in step.model.parameters())  # shared ones once
        state_bytes = io.nbytes(state)
        weights = io.nbytes(io.unique(state["model"]))
        return cls(
            num_params=num_params,
            state_bytes=state_bytes,
            bytes_per_param={STATES[0]: state_bytes / num_params, STATES[1]: weights / num_params},
            models=fit.model_sizes(workload=str(cfg.model), workload_params=num_params,
                                   billions=cfg.predict_params_b),
        )  # fmt: skip


def _trees(full: Any, cfg: CheckpointConfig, *, weights_only: bool) -> list[Any]:
    """The states one format writes, smallest first: ``num_sizes`` sizes halving from the
    largest (``max_bytes``, or the whole state), each a distinct size."""
    whole = io.nbytes(full)
    largest = whole if cfg.max_bytes == 0 else min(cfg.max_bytes, whole)
    bound = io.bounded_weights if weights_only else io.bounded_state
    trees: dict[int, Any] = {}
    for target in fit.halving_sizes(largest, cfg.num_sizes):
        tree = bound(full, target)
        trees.setdefault(io.nbytes(tree), tree)
    return [trees[size] for size in sorted(trees)]


@dataclass(frozen=True, slots=True)
class _Point:
    size_bytes: int
    samples: dict[str, list[float]]


def _format(
    run: Run, cfg: CheckpointConfig, spec: FormatSpec, layout: _Layout, count: _Count
) -> Iterator[Measurement]:
    """Every size of one format, then its fits and predictions (rank 0 records them); the
    time budget stops it between sizes (rank 0's clock: alone for its own formats, agreed
    with every rank for DCP's)."""
    if not spec.collective and run.ctx.rank != 0:
        return  # rank 0 saves, as DDP scripts do; the others wait at the barrier
    if spec.collective:
        replicate(run)  # once: saves and loads leave the state as it is
    full = io.unique(run.state["model"]) if spec.weights_only else run.state
    trees = _trees(full, cfg, weights_only=spec.weights_only)
    expected = io.sample(trees[0], cfg.num_checked)
    for r in range(cfg.warmup):
        spec.round_(run, trees[0], run.root / f"{spec.name}-warmup-{r}", expected)
    points: list[_Point] = []
    budget = run.ctx.budget
    for i, tree in enumerate(trees):
        if points and (budget.agree_expired(run.ctx) if spec.collective else budget.expired()):
            count.stopped = True
            break
        point = _Point(io.nbytes(tree), _rounds(run, cfg, spec, tree, tag=f"{spec.name}-{i}"))
        points.append(point)
        count.done += 1
        if run.ctx.rank == 0:
            yield from _point_measurements(run, spec, point)
    if run.ctx.rank == 0:
        yield from _stall_measurement(run, spec, points[-1])
        yield from _fit_measurements(run, spec, points, layout)


def _rounds(
    run: Run, cfg: CheckpointConfig, spec: FormatSpec, tree: Any, *, tag: str
) -> dict[str, list[float]]:
    """Rounds of one size until :func:`checkpoint_fit.is_stable` (rank 0 decides for DCP)."""
    expected = io.sample(tree, cfg.num_checked)  # the state does not change between rounds
    samples: dict[str, list[float]] = {}
    while True:
        got = spec.round_(run, tree, run.root / f"{tag}-{len(samples.get(spec.ops[0], []))}",
                          expected)  # fmt: skip
        for key, value in got.items():
            samples.setdefault(key, []).append(value)
        stop = fit.is_stable([samples[op] for op in spec.ops], min_repeats=cfg.min_repeats,
                             max_repeats=cfg.repeats, target_cv=cfg.target_cv)  # fmt: skip
        if spec.collective:
            stop = run.ctx.broadcast_from_root(stop)
        if stop:
            return samples


def _base_params(run: Run, spec: FormatSpec) -> dict[str, ParamValue]:
    params: dict[str, ParamValue] = {"format": spec.name}
    if spec.collective:
        params["num_ranks"] = run.ctx.world_size
    return params


def _point_measurements(run: Run, spec: FormatSpec, point: _Point) -> Iterator[Measurement]:
    """GB/s and seconds of one size's saves and loads, or of its async saves."""
    params = {**_base_params(run, spec), "size_bytes": point.size_bytes}
    c = CheckpointMetrics
    if spec.name == "dcp_async":
        params["steps"] = run.stall_steps
        for metric, key in ((c.async_block_s, "async_block"), (c.async_total_s, "async_total")):
            stats = Stats.from_samples(point.samples[key])
            yield run.ctx.measurement(metric, value=stats.median, params=params, stats=stats)
        return
    for op in spec.ops:
        samples = point.samples[op]
        # GB/s = bytes / t / 1e9
        gbps = rate_stats(samples, work=point.size_bytes, scale=1e9)
        yield run.ctx.measurement(c.get(f"{op}_gbps"), value=gbps.median, params=params, stats=gbps)
        secs = Stats.from_samples(samples)
        yield run.ctx.measurement(c.get(f"{op}_s"), value=secs.median, params=params, stats=secs)


def _stall_measurement(run: Run, spec: FormatSpec, point: _Point) -> Iterator[Measurement]:
    """How much slower training steps ran during the async saves of the largest size."""
    if "stall_pct" not in point.samples:
        return
    params = {**_base_params(run, spec), "size_bytes": point.size_bytes, "steps": run.stall_steps}
    stats = Stats.from_samples(point.samples["stall_pct"])
    yield run.ctx.measurement(
        CheckpointMetrics.async_stall_pct, value=stats.median, params=params, stats=stats
    )


def _fit_measurements(
    run: Run, spec: FormatSpec, points: list[_Point], layout: _Layout
) -> Iterator[Measurement]:
    """The fit of each operation over the sizes, its held-out error, and the predicted seconds
    of each model's checkpoint (async: the blocking part and the part hidden behind training)."""
    c = CheckpointMetrics
    sizes = [p.size_bytes for p in points]
    base = {**_base_params(run, spec), "num_sizes": len(points), "max_size_bytes": max(sizes)}
    fits: dict[str, fit.Fit] = {}
    for op in spec.ops:
        all_sizes = [p.size_bytes for p in points for _ in p.samples[op]]
        all_seconds = [t for p in points for t in p.samples[op]]
        fits[op] = line = fit.fit_line(all_sizes, all_seconds)
        params = {**base, "op": op}
        yield run.ctx.measurement(c.fit_gbps, value=line.gbps, params=params)
        if len(points) >= 2:
            yield run.ctx.measurement(c.fit_latency_s, value=line.alpha_s, params=params)
        error = fit.held_out_error_pct(all_sizes, all_seconds)
        if error is not None:
            yield run.ctx.measurement(c.fit_error_pct, value=error, params=params)
    states = STATES[1:] if spec.weights_only else STATES
    for model in layout.models:
        for state in states:
            per_param = layout.bytes_per_param[state]
            params = {
                **_base_params(run, spec), "model": model.label, "num_params": model.num_params,
                "state": state, "bytes_per_param": round(per_param, 4),
                "checkpoint_bytes": round(model.num_params * per_param),
            }  # fmt: skip
            for op, seconds in _predicted(fits, num_params=model.num_params,
                                          bytes_per_param=per_param).items():  # fmt: skip
                yield run.ctx.measurement(c.predicted_s, value=seconds,
                                          params={**params, "op": op})  # fmt: skip


def _predicted(
    fits: dict[str, fit.Fit], *, num_params: int, bytes_per_param: float
) -> dict[str, float]:
    """Seconds per operation; an async save's total becomes its hidden part (total - block)."""
    out = {
        op: fit.predicted_seconds(line, num_params=num_params, bytes_per_param=bytes_per_param)
        for op, line in fits.items()
    }
    if "async_total" in out:
        out["async_hidden"] = max(0.0, out.pop("async_total") - out["async_block"])
    return out


def _free_space(run: Run, layout: _Layout, cfg: CheckpointConfig) -> Measurement:
    """Free space where the checkpoints go (judged against the whole checkpoint); an error
    when even the largest state this run writes does not fit."""
    usage = shutil.disk_usage(run.root)
    needed = layout.state_bytes if cfg.max_bytes == 0 else min(cfg.max_bytes, layout.state_bytes)
    if usage.free < needed:
        raise RuntimeError(
            f"checkpoint: {run.root} has {usage.free / 1e9:.1f} GB free, the "
            f"checkpoint needs {needed / 1e9:.3g} GB"
        )
    params: dict[str, ParamValue] = {
        "directory": str(run.root.parent),
        "filesystem": io.filesystem_of(run.root),
        "checkpoint_bytes": layout.state_bytes,
    }
    return run.ctx.measurement(
        CheckpointMetrics.free_space_gb, value=usage.free / 1e9, params=params
    )
