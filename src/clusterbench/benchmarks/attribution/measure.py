"""The ``attribution`` benchmark (Level 3): where the time of a training step goes, per rank.

Every rank trains the ``training`` workload, then profiles a few steps with torch.profiler
(Kineto; a wait / warm-up / active schedule) and keeps the trace, gzip-compressed, at
``traces/rank-NNNNN.pt.trace.json.gz`` in the run folder (it opens in Perfetto or
TensorBoard).  Each profiled step is split into compute, memory, communication and
coordination (:mod:`clusterbench.traces.trace`), after the ranks have exchanged their collectives'
start offsets and durations: the time a collective waited for the last rank is coordination,
and the spread of start offsets shows the straggler.  The profiler's own cost is measured: the
same number of steps timed without and with it (:mod:`.steps` runs the steps).

With ``accum_sweep``, the same workload is then profiled at each accumulation count k (DDP's
no_sync on all micro-steps but the last, as ``training`` does), one trace per k and rank, and
each iteration (one optimizer step of k micro-steps) is read for the device's idle time and the
time its collectives waited for the slowest rank (:mod:`clusterbench.traces.idle`): whether
coordination idle rises with accumulation, as the bottleneck-analysis paper found past four
steps.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch.distributed as dist

from clusterbench.benchmarks.attribution import steps as steps
from clusterbench.benchmarks.attribution.settings import (
    AttributionConfig,
    AttributionMetrics,
    sweep_counts,
)
from clusterbench.benchmarks.training import cases
from clusterbench.benchmarks.training.strategies import StepTrainer, case_scope
from clusterbench.benchmarks.training.workload import Batch
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, ParamValue, Stats
from clusterbench.traces import idle as idle
from clusterbench.traces import ranks as ranks
from clusterbench.traces import trace as trace

__all__ = ["attribution"]


def _peaks(ctx: DistContext, precision: str) -> trace.Peaks | None:
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    tflops = spec.dense_tflops.get(precision) if spec is not None else None
    if spec is None or not tflops or spec.hbm_gbps <= 0:
        return None
    return trace.Peaks(flops_per_s=tflops * 1e12, bytes_per_s=spec.hbm_gbps * 1e9)


def _trace_path(ctx: DistContext, scratch: Path, *, keep: bool, tag: str = "") -> Path:
    """Where the rank's trace goes: the run folder's traces/ if it is kept, else scratch;
    ``tag`` tells the sweep's traces apart (rank-NNNNN.accum-KK.pt.trace.json.gz)."""
    folder = (ctx.run_dir if keep and ctx.run_dir else scratch) / "traces"
    return folder / f"rank-{ctx.rank:05d}{tag}.pt.trace.json.gz"


def _kept(ctx: DistContext, cfg: AttributionConfig, path: Path) -> str | None:
    """The trace's path in the run folder, None when it is not kept."""
    return str(path.relative_to(ctx.run_dir)) if ctx.run_dir and cfg.keep_traces else None


def _params(ctx: DistContext, cfg: AttributionConfig, **extra: ParamValue) -> dict[str, ParamValue]:
    return {
        "model": cfg.model, "strategy": cfg.strategy, "precision": cfg.precision,
        "world_size": ctx.world_size, "batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum,
        "compile": cfg.compile, "backend": ctx.backend, **extra,
    }  # fmt: skip


def _workload(
    ctx: DistContext, cfg: AttributionConfig, *, num_batches: int
) -> tuple[StepTrainer, list[Batch]]:
    """The configured workload (a check workload, or ``training``'s) ready to train, and
    ``num_batches`` micro-batches (an optimizer step over ``batches[:k]`` accumulates k)."""
    if steps.is_local_model(cfg.model):
        return steps.local_trainer(
            ctx, cfg.model, batch_size=cfg.batch_size, grad_accum=num_batches
        )
    assert dist.group.WORLD is not None
    training = cfg.training_config()
    _, trainer, batches = cases.setup_case(
        ctx, training, case=training.case(), group=dist.group.WORLD, grad_accum=num_batches
    )
    return trainer, batches


def _reusable(cfg: AttributionConfig) -> bool:
    """Whether one trainer takes any number of micro-batches: all but pipelines, whose schedule
    is built for a number of microbatches (the sweep builds one per k)."""
    return steps.is_local_model(cfg.model) or cfg.strategy != "pp"


def _step(
    ctx: DistContext, cfg: AttributionConfig, *, trainer: StepTrainer, batches: list[Batch]
) -> Callable[[], None]:
    """One optimizer step over ``batches`` with the planted delays (the input delay per
    micro-batch)."""
    return steps.build_step(
        ctx, train=lambda: trainer.step(batches),
        input_delay_ms=cfg.input_delay_ms * len(batches),
        straggle_ms=cfg.delay_ms if ctx.rank == cfg.delay_rank else None,
    )  # fmt: skip


def attribution(ctx: DistContext, cfg: AttributionConfig) -> Iterator[Measurement]:
    """Step time split into compute, memory, communication and coordination, per rank; then
    the idle and wait per iteration at each accumulation count of ``accum_sweep`` (with 2 or
    more ranks)."""
    counts = sweep_counts(cfg, world_size=ctx.world_size)
    sweep_steps = len(counts) * (cfg.warmup + cfg.active)
    ctx.progress.start(cfg.warmup_steps + 2 * cfg.active + cfg.wait + cfg.warmup + sweep_steps)
    most = max([cfg.grad_accum, *counts]) if _reusable(cfg) else cfg.grad_accum
    with tempfile.TemporaryDirectory() as tmp, case_scope(cfg.precision):
        scratch = Path(tmp)
        trainer, batches = _workload(ctx, cfg, num_batches=most)
        step = _step(ctx, cfg, trainer=trainer, batches=batches[: cfg.grad_accum])
        profiled = steps.profile_steps(
            ctx, step=step, trace=_trace_path(ctx, scratch, keep=cfg.keep_traces),
            warmup_steps=cfg.warmup_steps, wait=cfg.wait, warmup=cfg.warmup, active=cfg.active,
        )  # fmt: skip
        ctx.barrier()
        yield from _profiled_measurements(ctx, cfg, profiled=profiled)
        sweep: Iterator[tuple[int, StepTrainer, list[Batch]]]
        if _reusable(cfg):
            sweep = ((k, trainer, batches[:k]) for k in counts)
        else:
            del trainer, batches, step
            sweep = _fresh_workloads(ctx, cfg, counts)
        for i, (k, sweep_trainer, sweep_batches) in enumerate(sweep):
            if ctx.budget.agree_expired(ctx):  # rank 0 decides: every rank stops at the same k
                ctx.budget.stopped(
                    done=1 + i,
                    total=1 + len(counts),
                    unit="profiles (the step, then each accumulation count)",
                )
                break
            yield from _accum_measurements(
                ctx, cfg, k=k, step=_step(ctx, cfg, trainer=sweep_trainer, batches=sweep_batches),
                trace_path=_trace_path(ctx, scratch, keep=cfg.keep_traces, tag=f".accum-{k:02d}"),
            )  # fmt: skip
            del sweep_trainer, sweep_batches  # a pipeline's next one is built without this one


def _fresh_workloads(
    ctx: DistContext, cfg: AttributionConfig, counts: list[int]
) -> Iterator[tuple[int, StepTrainer, list[Batch]]]:
    """Per k of ``counts``, the workload built for k micro-batches (pipelines), each after the
    one before is freed."""
    cases.free_memory(ctx)
    for k in counts:
        trainer, batches = _workload(ctx, cfg, num_batches=k)
        yield k, trainer, batches
        del trainer, batches
        cases.free_memory(ctx)


def _profiled_measurements(
    ctx: DistContext, cfg: AttributionConfig, *, profiled: steps.Profiled
) -> Iterator[Measurement]:
    """The four classes, the step time, the profiler's overhead and the straggler's figures."""
    events = steps.load_trace_events(profiled.trace)
    acts = trace.activities(events, peaks=_peaks(ctx, cfg.precision))  # classified once
    mine = trace.step_collectives(events, acts=acts)
    everyone = ctx.all_gather(_plain(mine))
    per_rank = [_unplain(r) for r in everyone]
    waits = ranks.collective_waits(per_rank)[ctx.rank]
    breakdowns = trace.step_breakdowns(events, waits_ms=waits, acts=acts)
    spreads, lateness = ranks.start_lateness(per_rank)
    kept = _kept(ctx, cfg, profiled.trace)
    params = _params(ctx, cfg, rank_step="mean", num_steps=len(breakdowns), trace=kept)
    yield from _class_measurements(ctx, breakdowns=breakdowns, params=params)
    step_ms = [s.step_ms for s in breakdowns]
    yield ctx.measurement(AttributionMetrics.step_time_ms, value=statistics.median(step_ms),
                          params=params, stats=Stats.from_samples(step_ms))  # fmt: skip
    overhead = steps.overhead_pct(profiled)
    yield ctx.measurement(AttributionMetrics.profiler_overhead_pct, value=overhead, params=params)
    yield from _straggler_measurements(ctx, spreads=spreads, lateness=lateness[ctx.rank],
                                       params=params)  # fmt: skip


def _accum_measurements(
    ctx: DistContext, cfg: AttributionConfig, *, k: int, step: Callable[[], None], trace_path: Path
) -> Iterator[Measurement]:
    """Profile ``step`` (k micro-steps) for warmup + active iterations (no wait: the steps
    before warmed everything up), then each iteration's idle and collective wait."""
    steps.trace_steps(
        ctx, step=step, trace=trace_path, wait=0, warmup=cfg.warmup, active=cfg.active,
        shapes=False,
    )  # fmt: skip
    ctx.barrier()
    events = steps.load_trace_events(trace_path)
    acts = trace.activities(events)  # idle and wait need no roofline
    everyone = ctx.all_gather(_plain(trace.step_collectives(events, acts=acts)))
    waits = ranks.start_waits([_unplain(r) for r in everyone])[ctx.rank]
    iterations = idle.iteration_idle(events, acts=acts, waits_ms=waits)
    if not iterations:
        raise RuntimeError(f"attribution: no profiled iteration in {trace_path.name}")
    # the sweep's count replaces grad_accum (the profile above used that one)
    params = {key: v for key, v in _params(ctx, cfg).items() if key != "grad_accum"}
    params.update(accum_steps=k, num_steps=len(iterations), trace=_kept(ctx, cfg, trace_path))
    a = AttributionMetrics
    per_metric = {
        a.idle_ms: [it.idle_ms for it in iterations],
        a.collective_wait_ms: [it.wait_ms for it in iterations],
        a.idle_pct: [it.idle_pct for it in iterations],
        a.wait_pct: [it.wait_pct for it in iterations],
    }
    for metric, samples in per_metric.items():
        yield ctx.measurement(metric, value=statistics.fmean(samples),
                              params={**params, "rank_step": "mean"},
                              stats=Stats.from_samples(samples))  # fmt: skip
    for i, it in enumerate(iterations):
        for metric, samples in per_metric.items():
            yield ctx.measurement(metric, value=samples[i],
                                  params={**params, "rank_step": str(it.step)})  # fmt: skip


def _class_measurements(
    ctx: DistContext, *, breakdowns: list[trace.StepBreakdown], params: dict[str, ParamValue]
) -> Iterator[Measurement]:
    shares = trace.mean_percentages(breakdowns)
    per_step = [s.percentages() for s in breakdowns]
    for name in trace.CLASSES:
        samples = [p[name] for p in per_step]
        yield ctx.measurement(AttributionMetrics.get(name), value=shares[name], params=params,
                              stats=Stats.from_samples(samples))  # fmt: skip
    # the split of communication: exposed (the class above) and overlapped (under compute)
    yield ctx.measurement(AttributionMetrics.communication_exposed,
                          value=shares["communication"], params=params)  # fmt: skip
    overlapped = shares["communication_overlapped"]
    yield ctx.measurement(AttributionMetrics.communication_overlapped, value=overlapped,
                          params=params)  # fmt: skip
    # and every profiled step on its own (rank_step = N of ProfilerStep#N)
    for breakdown, shares_of_step in zip(breakdowns, per_step, strict=True):
        step_params = {**params, "rank_step": str(breakdown.step)}
        for name in (*trace.CLASSES, "communication_overlapped"):
            yield ctx.measurement(AttributionMetrics.get(name), value=shares_of_step[name],
                                  params=step_params)  # fmt: skip


def _straggler_measurements(
    ctx: DistContext, *, spreads: list[float], lateness: list[float], params: dict[str, ParamValue]
) -> Iterator[Measurement]:
    if not spreads:
        return  # one rank, or no collectives to match
    if ctx.rank == 0:
        yield ctx.measurement(
            AttributionMetrics.collective_start_spread_ms, value=statistics.median(spreads),
            params={**params, "num_collectives": len(spreads)},
            stats=Stats.from_samples(spreads),
        )  # fmt: skip
    # how far behind the earliest rank this rank starts its collectives (0: never last)
    yield ctx.measurement(
        AttributionMetrics.collective_start_lateness_ms, value=statistics.median(lateness),
        params=params, stats=Stats.from_samples(lateness),
    )  # fmt: skip


def _plain(collectives: dict[int, tuple[trace.Collective, ...]]) -> dict[int, list[tuple]]:
    return {n: [(c.name, c.offset_ms, c.duration_ms, c.at_ms) for c in cs]
            for n, cs in collectives.items()}  # fmt: skip


def _unplain(obj: dict[int, list[tuple]]) -> dict[int, list[trace.Collective]]:
    return {n: [trace.Collective(*c) for c in cs] for n, cs in obj.items()}
