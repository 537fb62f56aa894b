"""The batch-size partition search of the training benchmark (``training.partition``).

One global batch B (samples per optimizer step) can be trained as data-parallel size d x
micro-batch m x accumulation steps k = B, with activation checkpointing on or off.  The
candidates: every world size d of the training that divides B, every m dividing B / d,
k = B / (d m), each checkpointing setting; the default partition is the workload's own
(batch_size at the largest world size, k = B / (batch_size x d), its checkpointing setting).

Each candidate is trained for a few steps on ranks 0..d-1 (warm-up, then timed steps, as the
sweep does) and recorded as ``partition_time_to_batch_ms`` (the optimizer step: the time to
process B) with its throughput, or as not fitting (``fits`` 0 with the reason).

Memory (CUDA), before running a candidate: from a measured candidate of the same
checkpointing setting with the largest micro-batch m0 <= m at a data-parallel size d0 <= d,
its peak P0 and resident bytes R0 (allocated between steps: model, optimizer state, batches),

    estimate(m) = R0 + (P0 - R0) x m / m0        (activation memory grows with m)

and a candidate whose estimate exceeds the memory limit (the smallest free device memory of
the ranks when the search starts) is not run.  A candidate of the same setting with m >= and
d <= those of one that ran out of memory is not run either (it needs no less: the states a
sharded strategy holds per rank only shrink as d grows).  The candidates run in ascending m,
so the first of each setting, the smallest, is measured before any estimate.  CPU workers
record no peak: there is no limit, nothing is pruned.

Measurements go on rank 0 (group rank 0 of every d); the params are the partition's own
(:func:`params`), never the scaling series'.  Predictions past the world are analysis's
(``analyses/partition/search.py``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist

from clusterbench.benchmarks.training.cases import (
    check_replicas,
    free_memory,
    setup_case,
    time_steps,
)
from clusterbench.benchmarks.training.partition_plan import (
    Candidate,
    MemoryPoint,
    params,
    planned,
    prune_reason,
)
from clusterbench.benchmarks.training.record import Timed
from clusterbench.benchmarks.training.settings import TrainingConfig, TrainingMetrics
from clusterbench.benchmarks.training.strategies import case_scope
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats
from clusterbench.schema import Measurement, ParamValue, Stats

_MAX_REASON = 200
"""Characters of an exception kept as a candidate's reason."""

__all__ = ["search"]

log = logging.getLogger(__name__)


class _Report(NamedTuple):
    """One rank's account of one candidate, shared with every rank (a tuple: it is pickled)."""

    status: str
    """ran, oom, failed, idle (not in the group), or pruned (not run by any rank)."""
    reason: str = ""
    peak_bytes: int | None = None
    resident_bytes: int | None = None


class _Trained(NamedTuple):
    timed: Timed
    tokens_per_sample: int
    decoder: bool


def _partition_steps(cfg: TrainingConfig) -> tuple[int, int]:
    return max(2, cfg.partition_steps // 4), cfg.partition_steps


def _train(
    ctx: DistContext, cfg: TrainingConfig, c: Candidate, *, group: dist.ProcessGroup
) -> tuple[_Report, _Trained | None]:
    """Train ``c`` on this rank: its report, and what it timed (None: it did not run).  The
    failure is logged by the caller, never raised: the search goes on.  An error on only some
    ranks (e.g. one OOM) can leave the others waiting in a collective until the run's
    timeout, as in the sweep."""
    case_cfg = dataclasses.replace(
        cfg, batch_size=c.micro_batch, grad_accum=c.accum,
        activation_checkpointing=c.activation_checkpointing,
    )  # fmt: skip
    case = case_cfg.case()
    warmup, steps = _partition_steps(cfg)
    try:
        with case_scope(case.precision):
            built = setup_case(ctx, case_cfg, case=case, group=group, grad_accum=c.accum)
            timed = time_steps(
                ctx, trainer=built.trainer, batches=built.batches, warmup=warmup, steps=steps
            )
        check_replicas(built.trainer, case=case, group=group)
        decoder = built.workload.kind == "decoder"
        trained = _Trained(timed, built.workload.tokens_per_sample if decoder else 1, decoder)
        del built
    except torch.OutOfMemoryError:
        return _Report("oom", "out of memory"), None
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:_MAX_REASON]
        return _Report("failed", reason), None
    return _Report("ran", "", timed.peak_memory_bytes, timed.resident_memory_bytes), trained


def _combined(reports: Sequence[_Report]) -> _Report:
    """The candidate as every rank saw it: out of memory or failed on any rank is that."""
    active = [r for r in reports if r.status != "idle"]
    for status in ("oom", "failed"):
        bad = [r for r in active if r.status == status]
        if bad:
            return _Report(status, bad[0].reason)
    peaks = [r.peak_bytes for r in active if r.peak_bytes is not None]
    resident = [r.resident_bytes for r in active if r.resident_bytes is not None]
    return _Report("ran", "", max(peaks) if peaks else None, max(resident) if resident else None)


def _memory_limit(ctx: DistContext) -> int | None:
    """The smallest free device memory of the ranks (CUDA), None on CPU workers."""
    free = torch.cuda.mem_get_info(ctx.device)[0] if ctx.is_cuda else None
    got = [f for f in ctx.all_gather(free) if f is not None]
    return min(got) if got else None


def search(
    ctx: DistContext, cfg: TrainingConfig, *, groups: Mapping[int, dist.ProcessGroup]
) -> Iterator[Measurement]:
    """The partition search over ``groups`` (world size -> the group of ranks 0..w-1); every
    rank of the world calls it (the ranks outside a candidate's group wait for it)."""
    default, chosen = planned(cfg, list(groups))
    free_memory(ctx)
    limit = _memory_limit(ctx)
    points: list[MemoryPoint] = []
    out_of_memory: list[Candidate] = []
    for c in chosen:
        pruned = prune_reason(c, points=points, out_of_memory=out_of_memory, limit_bytes=limit)
        trained, mine = None, _Report("idle")
        if pruned is None and ctx.rank < c.d:
            mine, trained = _train(ctx, cfg, c, group=groups[c.d])
            free_memory(ctx)  # the candidate's model and optimizer are gone with _train's frame
        got = _combined(ctx.all_gather(mine)) if pruned is None else _Report("pruned", pruned[0])
        if got.status == "oom":
            out_of_memory.append(c)
        if got.status == "ran" and got.peak_bytes is not None and got.resident_bytes is not None:
            points.append(MemoryPoint(candidate=c, peak_bytes=got.peak_bytes,
                                      resident_bytes=got.resident_bytes))  # fmt: skip
        if got.status != "ran":
            log.warning("training partition: %s does not run: %s", c, got.reason)
        if ctx.rank == 0:
            estimate = pruned[1] if pruned is not None else None
            yield from _measurements(
                ctx, params(cfg, c, default=default), c=c, got=got,
                trained=trained if got.status == "ran" else None, estimate=estimate, limit=limit,
            )  # fmt: skip
        ctx.progress.advance()


def _measurements(
    ctx: DistContext,
    p: dict[str, ParamValue],
    *,
    c: Candidate,
    got: _Report,
    trained: _Trained | None,
    estimate: float | None,
    limit: int | None,
) -> Iterator[Measurement]:
    m = TrainingMetrics
    if trained is not None:
        times = trained.timed.step_times_s
        ms = Stats.from_samples([t * 1e3 for t in times])
        yield ctx.measurement(m.partition_time_to_batch_ms, value=ms.median, params=p, stats=ms)
        # throughput = global batch x tokens per sample / time to batch
        rate = rate_stats(times, work=c.global_batch * trained.tokens_per_sample, scale=1.0)
        metric = m.partition_tokens_per_s if trained.decoder else m.partition_samples_per_s
        yield ctx.measurement(metric, value=rate.median, params=p, stats=rate)
        if got.peak_bytes is not None:
            yield ctx.measurement(m.partition_peak_memory_gb, value=got.peak_bytes / 1e9, params=p)
    fit_params = {
        **p,
        "reason": got.reason or None,
        "estimated_memory_gb": estimate / 1e9 if estimate is not None else None,
        "memory_limit_gb": limit / 1e9 if limit is not None else None,
    }
    yield ctx.measurement(m.fits, value=1 if got.status == "ran" else 0, params=fit_params)
