"""The ``attribution`` benchmark (Level 3): where the time of a training step goes, per rank.

Every rank trains the ``training`` workload, then profiles a few steps with torch.profiler
(Kineto; a wait / warm-up / active schedule) and keeps the trace, gzip-compressed, at
``traces/rank-NNNNN.pt.trace.json.gz`` in the run folder (it opens in Perfetto or
TensorBoard).  Each profiled step is split into compute, memory, communication and
coordination (:mod:`.attribution_trace`), after the ranks have exchanged their collectives'
start offsets and durations: the time a collective waited for the last rank is coordination,
and the spread of start offsets shows the straggler.  The profiler's own cost is measured: the
same number of steps timed without and with it (:mod:`.attribution_steps` runs the steps).

With ``accum_sweep``, the same workload is then profiled at each accumulation count k (DDP's
no_sync on all micro-steps but the last, as ``training`` does), one trace per k and rank, and
each iteration (one optimizer step of k micro-steps) is read for the device's idle time and the
time its collectives waited for the slowest rank (:mod:`.attribution_idle`): whether
coordination idle rises with accumulation, as the seed paper found past four steps.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch.distributed as dist

from clusterbench.benchmarks import attribution_idle as idle
from clusterbench.benchmarks import attribution_ranks as ranks
from clusterbench.benchmarks import attribution_steps as steps
from clusterbench.benchmarks import attribution_trace as trace
from clusterbench.benchmarks.training import cases
from clusterbench.benchmarks.training.models import Model
from clusterbench.benchmarks.training.settings import TrainingConfig, WorkloadSettings
from clusterbench.benchmarks.training.strategies import StepTrainer, case_scope
from clusterbench.benchmarks.training.workload import Batch
from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, ParamValue, Stats

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "ACCUM_MIN_RISE_PCT",
    "AttributionConfig",
    "AttributionMetrics",
    "AttributionModel",
    "attribution",
    "sweep_counts",
]

AttributionModel = Literal[Model, steps.LocalModel]
"""``training``'s presets and the attribution-only check workloads."""


class AttributionMetrics(MetricSet, benchmark="attribution"):
    """Per rank.  The four classes (in % of the step, summing to 100) and the split of
    communication come for the mean over the profiled steps (rank_step=mean) and for each step
    (rank_step=N)."""

    compute = Metric("%", "none", "compute-bound device work (GEMM, convolution, attention)")
    memory = Metric("%", "none", "other device work (elementwise, norms, copies, optimizer)")
    communication = Metric("%", "none", "exposed: collectives while no other device work runs")
    coordination = Metric("%", "none", "device idle: launch gaps, waiting for input or ranks")
    communication_exposed = Metric("%", "none", "communication again, beside the overlapped part")
    communication_overlapped = Metric("%", "none", "collectives under compute or memory work")
    step_time_ms = Metric("ms", "lower", "median profiled step time")
    profiler_overhead_pct = Metric("%", "none", "(profiled - plain median step) / plain step")
    collective_start_spread_ms = Metric(
        "ms", "lower", "latest - earliest rank's start of each matched collective (rank 0)",
        only_when="the profiled steps run collectives",
    )  # fmt: skip
    collective_start_lateness_ms = Metric(
        "ms", "lower", "how far behind the earliest rank this rank starts its collectives",
        only_when="the profiled steps run collectives",
    )  # fmt: skip
    # the accumulation sweep, per accum_steps: per iteration (rank_step=N) and their mean
    idle_ms = Metric(
        "ms", "lower", "device idle per iteration: no device activity (host and launch gaps)",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip
    collective_wait_ms = Metric(
        "ms", "lower", "per iteration, inside collectives until the latest rank starts them",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip
    idle_pct = Metric(
        "%", "lower", "idle_ms in % of the iteration", only_when="attribution.accum_sweep is set"
    )
    wait_pct = Metric(
        "%", "lower", "collective_wait_ms in % of the iteration",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip


ACCUM_MIN_RISE_PCT = 1.0
"""Default of ``accum_min_rise_pct``."""


@dataclass(kw_only=True, slots=True)
class AttributionConfig(WorkloadSettings):
    """Settings of the ``attribution`` benchmark; the workload settings are ``training``'s
    (``model`` may also be comm_heavy / gemm_heavy: attribution-only MLPs, DDP + SGD, built to
    be communication- and compute-bound as checks of the attribution)."""

    model: AttributionModel = "tiny"
    """Workload: a ``training`` preset, or comm_heavy / gemm_heavy (see above)."""
    warmup_steps: int = 3
    """Untimed steps before anything is timed (compilation, allocator, NCCL set-up)."""
    wait: int = 1
    """Profiler schedule: steps skipped after the profiler starts."""
    warmup: int = 2
    """Profiler schedule: steps traced but discarded (the profiler's own warm-up)."""
    active: int = 3
    """Profiler schedule: steps recorded and attributed; as many are timed without it."""
    keep_traces: bool = True
    """Keep every rank's trace in the run folder (traces/rank-NNNNN.pt.trace.json.gz)."""
    input_delay_ms: float = 0.0
    """Sleep this long per micro-batch before every step on every rank (k micro-batches: k
    times as long), as a slow input pipeline would: a planted cause that must come out
    coordination-bound (a check of the attribution)."""
    delay_rank: int = -1
    """Give this rank delay_ms of extra device work per step (a slower GPU): it must come
    out as the straggler.  -1: none."""
    delay_ms: float = 0.0
    """Extra device work per step on delay_rank."""
    accum_sweep: list[int] = field(default_factory=list)
    """Accumulation steps to profile the workload at, after the profile above (e.g. 1, 2, 4,
    8): each rank's idle and collective wait per iteration (one optimizer step of k
    micro-steps), from a trace per k (warmup + active steps each); empty: no sweep.  It runs
    on 2 or more ranks only: one rank has no collective to wait for (training's
    grad_accum_sweep likewise)."""
    accum_min_rise_pct: float = ACCUM_MIN_RISE_PCT
    """The sweep's statement: a rise of idle + wait past four accumulation steps is reported
    when it is beyond the noise and at least this many points of the iteration."""

    def __post_init__(self) -> None:
        if not steps.is_local_model(self.model):
            self.training_config()  # the training settings' own checks (ranges, conflicts)
        for name in ("batch_size", "grad_accum", "active"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "wait", "warmup", "input_delay_ms", "delay_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.delay_rank < -1:
            raise ValueError(f"delay_rank must be a rank or -1 (none), got {self.delay_rank}")
        sweep = self.accum_sweep
        if any(k < 1 for k in sweep) or len(set(sweep)) < len(sweep):
            raise ValueError(f"accum_sweep entries must be distinct and >= 1, got {sweep}")
        if self.accum_min_rise_pct < 0:
            raise ValueError(f"accum_min_rise_pct must be >= 0, got {self.accum_min_rise_pct}")

    def training_config(self) -> TrainingConfig:
        """The ``training`` settings of the same workload."""
        return TrainingConfig(**self.workload_settings())  # type: ignore[arg-type]

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """The ``training`` preset's workload; a shorter profile on CPU; the accumulation sweep
        from the standard suite on (16 steps too in full)."""
        t = TrainingConfig.preset(suite=suite, device_type=device_type)
        short = device_type == "cpu"
        sweep = {"quick": [], "standard": [1, 2, 4, 8]}.get(suite, [1, 2, 4, 8, 16])
        return cls(
            **t.workload_settings(),  # type: ignore[arg-type]
            warmup_steps=2 if short else 10, wait=1, warmup=1 if short else 2,
            active=2 if short else 3, accum_sweep=sweep,
        )  # fmt: skip


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


def sweep_counts(cfg: AttributionConfig, *, world_size: int) -> list[int]:
    """The accumulation counts the sweep profiles: ``accum_sweep`` with 2 or more ranks, none
    with one (no collective waits for a slower rank there)."""
    return list(cfg.accum_sweep) if world_size > 1 else []


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
    return {n: [(c.name, c.offset_ms, c.duration_ms) for c in cs] for n, cs in collectives.items()}


def _unplain(obj: dict[int, list[tuple]]) -> dict[int, list[trace.Collective]]:
    return {n: [trace.Collective(*c) for c in cs] for n, cs in obj.items()}
