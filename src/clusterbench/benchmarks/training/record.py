"""What a timed case records: its step times, loss and memory, and the measurements made from
them (step time, throughput, MFU / HFU, memory, loss), then scaling efficiency over world sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from clusterbench.benchmarks.gemm import TOLERANCE
from clusterbench.benchmarks.gemm.measure import make_product, spec_reference
from clusterbench.benchmarks.training import formulas
from clusterbench.benchmarks.training.settings import (
    Case,
    Precision,
    ScalingMode,
    TrainingMetrics,
)
from clusterbench.benchmarks.training.workload import Workload
from clusterbench.metrics import Metric
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.precision import matmul_precision
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, ParamValue, Reference, Stats

__all__ = ["Outcome", "Timed", "case_measurements", "scaling_measurements"]

_GEMM_SIZE = 8192
_gemm_tflops: dict[str, float] = {}


@dataclass(frozen=True, kw_only=True, slots=True)
class Timed:
    """What the step loop recorded (:func:`.cases.time_steps`)."""

    step_times_s: list[float]
    loss: float
    """Of the last step."""
    peak_memory_bytes: int | None
    """CUDA: the peak allocated over warm-up and timed steps; None on CPU."""
    resident_memory_bytes: int | None = None
    """CUDA: allocated between steps, after the timed ones (model, optimizer state, the
    step's batches): what does not grow with the micro-batch; None on CPU."""


@dataclass(kw_only=True)
class Outcome:
    """One case at one world size, for the scaling series."""

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


def _throughput_metrics(workload: Workload) -> tuple[Metric, Metric]:
    """(per GPU, whole group): tokens/s for decoders, samples/s for everything else."""
    if workload.kind == "decoder":
        return TrainingMetrics.tokens_per_s_per_gpu, TrainingMetrics.tokens_per_s
    return TrainingMetrics.samples_per_s_per_gpu, TrainingMetrics.samples_per_s


def case_measurements(
    ctx: DistContext,
    *,
    workload: Workload,
    case: Case,
    params: dict[str, ParamValue],
    outcome: Outcome,
    timed: Timed,
    gemm_reference: bool,
) -> Iterator[Measurement]:
    """Step time, throughput (per GPU and in total), utilisation, peak memory and loss."""
    w = outcome.world_size
    ms = Stats.from_samples([t * 1e3 for t in timed.step_times_s])
    yield ctx.measurement(TrainingMetrics.step_time_ms, value=ms.median, params=params, stats=ms)
    tokens = workload.tokens_per_sample if workload.kind == "decoder" else 1
    # throughput = global batch x tokens per sample / step time
    work = outcome.samples_per_step * tokens
    total = rate_stats(timed.step_times_s, work=work, scale=1.0)
    per_gpu = rate_stats(timed.step_times_s, work=work / w, scale=1.0)
    per_gpu_metric, total_metric = _throughput_metrics(workload)
    yield ctx.measurement(per_gpu_metric, value=per_gpu.median, params=params, stats=per_gpu)
    yield ctx.measurement(total_metric, value=total.median, params=params, stats=total)
    yield from _utilisation(
        ctx, workload=workload, case=case, params=params,
        samples_per_s_per_gpu=outcome.samples_per_s / w, gemm_reference=gemm_reference,
    )  # fmt: skip
    if timed.peak_memory_bytes is not None:
        gb = timed.peak_memory_bytes / 1e9
        yield ctx.measurement(TrainingMetrics.peak_memory_gb, value=gb, params=params)
    yield ctx.measurement(TrainingMetrics.loss, value=timed.loss, params=params)


def _utilisation(
    ctx: DistContext,
    *,
    workload: Workload,
    case: Case,
    params: dict[str, ParamValue],
    samples_per_s_per_gpu: float,
    gemm_reference: bool,
) -> Iterator[Measurement]:
    """mfu against the spec's dense peak and against a measured GEMM; hfu with recomputation.
    MFU = FLOPs per sample x samples/s per GPU / peak FLOP/s (PaLM appendix B); HFU counts the
    recomputed FLOPs too."""
    flops, rate = workload.flops_per_sample, samples_per_s_per_gpu
    p = {**params, "flops_formula": workload.flops_formula}
    ref = spec_reference(ctx, case.precision)
    achieved = flops * rate / 1e12
    yield ctx.measurement(TrainingMetrics.model_tflops, value=achieved, params=p, reference=ref)
    if ref is None:
        return  # CPU, or an unknown GPU: no peak to compare with
    peak = ref.value
    pct = Reference(value=100.0, kind="spec_peak", source=f"{ref.source}; {peak} TFLOP/s dense")
    mfu = 100 * formulas.mfu(flops_per_sample=flops, samples_per_s_per_gpu=rate, peak_tflops=peak)
    yield ctx.measurement(TrainingMetrics.mfu, value=mfu, params=p, reference=pct)
    if case.activation_checkpointing and workload.recompute_flops_per_sample > 0:
        hw = flops + workload.recompute_flops_per_sample
        hfu = 100 * formulas.mfu(flops_per_sample=hw, samples_per_s_per_gpu=rate, peak_tflops=peak)
        yield ctx.measurement(TrainingMetrics.hfu, value=hfu, params=p, reference=pct)
    gemm = _measured_gemm_tflops(ctx, case.precision) if gemm_reference else None
    if gemm:
        vs = 100 * formulas.mfu(
            flops_per_sample=flops, samples_per_s_per_gpu=rate, peak_tflops=gemm
        )
        src = f"measured {_GEMM_SIZE}^3 {case.precision} matmul, {gemm:.0f} TFLOP/s"
        achievable = Reference(value=100.0, kind="achievable", source=src)
        yield ctx.measurement(TrainingMetrics.mfu_vs_gemm, value=vs, params=p, reference=achievable)


def _measured_gemm_tflops(ctx: DistContext, precision: Precision) -> float | None:
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
    ctx: DistContext, *, mode: ScalingMode, outcomes: dict[int, Outcome]
) -> Iterator[Measurement]:
    """scaling_efficiency (%) of every world size > 1 against world size 1."""
    base = outcomes.get(1)
    if base is None:
        return
    for w, o in sorted(outcomes.items()):
        if w == 1:
            continue
        if mode == "weak":
            e = formulas.weak_scaling_efficiency(
                throughput_n=o.samples_per_s, throughput_1=base.samples_per_s, n=w
            )
        else:
            e = formulas.strong_scaling_efficiency(
                step_time_1=base.step_time_s, step_time_n=o.step_time_s, n=w
            )
        params = dict(o.measurements[0].params) if o.measurements else {}
        params.update(scaling_mode=mode, world_size=w)
        yield ctx.measurement(TrainingMetrics.scaling_efficiency, value=100 * e, params=params)
