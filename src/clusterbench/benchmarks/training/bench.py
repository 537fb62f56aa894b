"""The ``training`` benchmark (Level 3): real training steps at several world sizes.

For each world size w, ranks 0..w-1 train the workload with the chosen strategy (the others wait
at a barrier); group rank 0 records step time, throughput per GPU and in total, MFU (and HFU
with activation checkpointing), peak memory and the final loss, then weak (or strong) scaling
efficiency against w = 1.  Optionally a sweep over strategy x precision x activation
checkpointing x compile at the largest world size (Megatron-LM's scripts' table: throughput
and memory, or "does not fit"), a gradient-accumulation sweep of the synchronisation idle, and
the partition search of one global batch (:mod:`.partition`).  Measurements carry
``series``: ``scaling``, ``sweep``, ``grad_accum`` or ``partition``.  The settings
(``TrainingConfig``) and the metrics (``TrainingMetrics``) are in :mod:`.settings`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch.distributed as dist

from clusterbench.benchmarks.training import cases, partition, partition_plan, sweeps
from clusterbench.benchmarks.training.record import Outcome, scaling_measurements
from clusterbench.benchmarks.training.settings import TrainingConfig, default_world_sizes
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement

__all__ = ["default_world_sizes", "training"]


def _world_sizes(cfg: TrainingConfig, world_size: int) -> list[int]:
    sizes = sorted(set(cfg.world_sizes)) or default_world_sizes(world_size)
    if sizes[-1] > world_size:
        raise ValueError(f"world_sizes {sizes} exceed the world size {world_size}")
    if cfg.scaling_mode == "strong" and any(sizes[-1] % w for w in sizes):
        raise ValueError(f"strong scaling needs every world size to divide {sizes[-1]}: {sizes}")
    return sizes


@dataclass(frozen=True, slots=True)
class _Group:
    size: int
    pg: dist.ProcessGroup
    owned: bool
    """Created here (destroyed at the end), not the world group."""


def _make_groups(ctx: DistContext, sizes: list[int]) -> dict[int, _Group]:
    """Ranks 0..w-1 for each w; every rank creates every group, in the same order (torch)."""
    out = {}
    for w in sizes:
        if w == ctx.world_size:
            assert dist.group.WORLD is not None
            out[w] = _Group(w, dist.group.WORLD, owned=False)
        else:
            out[w] = _Group(w, dist.new_group(list(range(w))), owned=True)
    return out


def training(ctx: DistContext, cfg: TrainingConfig) -> Iterator[Measurement]:
    """Training throughput, MFU, memory and scaling efficiency of a model and strategy."""
    sizes = _world_sizes(cfg, ctx.world_size)
    # a global batch the search cannot partition is refused before anything runs
    num_partition = partition_plan.num_candidates(cfg, sizes) if cfg.partition else 0
    groups = _make_groups(ctx, sizes)
    largest = groups[sizes[-1]]
    sweep_cases = cases.sweep_cases(cfg) if cfg.sweep else []
    total = len(sizes) + len(sweep_cases) + len(cfg.grad_accum_sweep) + num_partition
    ctx.progress.start(total)
    outcomes: dict[int, Outcome] = {}
    done = 0  # cases run; the time budget is checked before each, rank 0 deciding for all
    for w in sizes:
        if done and ctx.budget.agree_expired(ctx):  # the first case always runs
            break
        done += 1
        ga = cfg.grad_accum * (sizes[-1] // w if cfg.scaling_mode == "strong" else 1)
        if ctx.rank < w:
            outcome = cases.run_case(
                ctx, cfg, case=cfg.case(), group=groups[w].pg, grad_accum=ga, series="scaling"
            )
            outcomes[w] = outcome
            yield from outcome.measurements
        ctx.progress.advance()
        ctx.barrier()
    if ctx.rank == 0 and outcomes:
        yield from scaling_measurements(ctx, mode=cfg.scaling_mode, outcomes=outcomes)
    if ctx.rank < largest.size:
        for case in sweep_cases:
            if ctx.budget.agree_expired(ctx, group=largest.pg):
                break
            done += 1
            yield from sweeps.run_sweep_case(ctx, cfg, case=case, group=largest.pg)
            ctx.progress.advance()
        accum = largest.size > 1 and cfg.grad_accum_sweep
        if accum and not ctx.budget.agree_expired(ctx, group=largest.pg):
            done += len(cfg.grad_accum_sweep)
            yield from sweeps.grad_accum_sweep(ctx, cfg, group=largest.pg)
    # every rank: those outside a candidate's group wait for it
    if cfg.partition and not ctx.budget.agree_expired(ctx):
        done += num_partition
        yield from partition.search(ctx, cfg, groups={w: g.pg for w, g in groups.items()})
    if ctx.budget.agree_expired(ctx) and done < total:  # every rank asks, then each says
        ctx.budget.stopped(done=done, total=total, unit="training cases")
    ctx.barrier()  # every rank is done with every group before any is destroyed
    for g in groups.values():
        if g.owned:
            dist.destroy_process_group(g.pg)
