"""Dense matrix-multiply throughput per device, swept over shapes (mamf-finder style).

For each dtype the benchmark times ``(M x K) @ (K x N)`` over a list of shapes with fresh random
inputs and the L2 flushed between repeats, and reports every shape, the best shape and the
geometric mean over shapes (ml-engineering's mamf-finder reports the same pair).  Every shape's
output is first checked against a float64 product of the same inputs.

With ``sweep_stop`` on (every suite but ``full``) a dtype's shapes run in order of work
(2MNK, smallest first; equal work in the order given) and its sweep stops once
``plateau_patience`` successive shapes each add less than ``plateau_tolerance`` to the best
TFLOP/s before them (:class:`.sweep_stop.PlateauRule`): the best shape has been reached.  The
shapes left out are named in the ``gemm.sweep_stopped`` info finding; the geometric mean is
over the shapes run (its ``num_shapes`` says how many: the first that many by work).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator

import torch

from clusterbench.benchmarks.gemm.settings import TOLERANCE, Dtype, GemmConfig, GemmMetrics
from clusterbench.benchmarks.sweep_stop import SweepStop, plateau_stop, stop_finding
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.precision import matmul_precision
from clusterbench.runtime.timing import L2Flusher, rate_stats, time_op
from clusterbench.schema import Finding, Measurement, ParamValue, Reference

__all__ = ["TORCH_DTYPES", "gemm", "make_product", "spec_reference"]

log = logging.getLogger(__name__)

_CHECK_ROWS = 128
"""Rows of the output compared with the float64 reference (keeps the check cheap)."""
_FP8_MAX = 448.0  # largest finite float8_e4m3fn value (OCP FP8 spec)
_FP8_MIN_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (sm_89) and Hopper (sm_90) onwards
TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def gemm(ctx: DistContext, cfg: GemmConfig) -> Iterator[Measurement | Finding]:
    """Matrix-multiply TFLOP/s per dtype over a sweep of shapes (best and geometric mean)."""
    runnable = [d for d in cfg.dtypes if _fp8_skip_reason(ctx.device, d) is None]
    for dtype in cfg.dtypes:
        if (reason := _fp8_skip_reason(ctx.device, dtype)) is not None:
            log.info("gemm: skipping %s: %s", dtype, reason)
    ctx.progress.start(sum(len(cfg.shapes_for(d)) for d in runnable))
    flush = L2Flusher(ctx.device)
    failed: list[str] = []
    stops: list[SweepStop] = []
    done = 0  # shapes timed: the time budget stops the sweep between shapes
    for dtype in runnable:
        with matmul_precision(dtype):
            for item in _sweep_dtype(ctx, cfg, dtype=dtype, flush=flush, failed=failed,
                                     stops=stops):  # fmt: skip
                done += GemmMetrics.tflops.matches(item)
                yield item
    total = sum(len(cfg.shapes_for(d)) for d in runnable)
    if ctx.budget.expired() and done < total:
        ctx.budget.stopped(done=done, total=total, unit="shapes")
    if stops:
        rule = cfg.plateau().describe(points="shapes (by work)", figure="TFLOP/s of the dtype")
        yield stop_finding("gemm", stops, scope=f"host:{ctx.host}/{ctx.device_label}",
                           rule=rule, settings=cfg.plateau().params())  # fmt: skip
    if failed:
        raise RuntimeError(f"gemm: wrong results (rel_error above tolerance): {'; '.join(failed)}")


def _sweep_dtype(
    ctx: DistContext,
    cfg: GemmConfig,
    *,
    dtype: Dtype,
    flush: L2Flusher,
    failed: list[str],
    stops: list[SweepStop],
) -> Iterator[Measurement]:
    tolerance = TOLERANCE[dtype]
    worst_error = 0.0
    timed: list[Measurement] = []
    points: list[tuple[str, float]] = []  # (shape, TFLOP/s) of the shapes timed, in order
    shapes = cfg.shapes_for(dtype)
    for i, (m, n, k) in enumerate(shapes):
        if i and ctx.budget.expired():  # this rank's clock: no collective to keep in step
            break  # (each dtype measures one shape at least)
        op, rel = make_product(
            ctx.device, dtype=dtype, shape=(m, n, k), fast_accum=cfg.fp8_fast_accum
        )
        # NaN must fail too: max() would drop it, so it is kept as inf.
        worst_error = max(worst_error, rel if math.isfinite(rel) else math.inf)
        if rel <= tolerance:  # time only what computes the right product
            timed.append(_time_shape(ctx, cfg, op=op, dtype=dtype, shape=(m, n, k), flush=flush))
            points.append((_shape_text((m, n, k)), timed[-1].value))
            yield timed[-1]
        else:
            failed.append(f"{dtype} {m}x{n}x{k}: {rel:.3g} > {tolerance:g}")
        ctx.progress.advance()
        if not cfg.sweep_stop or not rel <= tolerance:  # (NaN: not timed either)
            continue
        rest = [_shape_text(shape) for shape in shapes[i + 1 :]]
        stop = plateau_stop(cfg.plateau(), sweep=dtype, points=points, rest=rest,
                            noun="shapes", unit="TFLOP/s")  # fmt: skip
        if stop is not None:
            stops.append(stop)
            ctx.progress.advance(len(shapes) - i - 1)
            break
    yield from _summaries(ctx, dtype=dtype, timed=timed)
    yield ctx.measurement(
        GemmMetrics.rel_error, value=worst_error, params={"dtype": dtype, "tolerance": tolerance}
    )


def _shape_text(shape: tuple[int, int, int]) -> str:
    return "x".join(str(d) for d in shape)


def _time_shape(
    ctx: DistContext,
    cfg: GemmConfig,
    *,
    op: Callable[[], object],
    dtype: str,
    shape: tuple[int, int, int],
    flush: L2Flusher,
) -> Measurement:
    m, n, k = shape
    samples = time_op(
        op,
        device=ctx.device,
        warmup=cfg.warmup,
        repeats=cfg.repeats,
        before_each=flush,
        warmup_min_s=cfg.warmup_min_s,
    )
    # TFLOP/s = 2*M*N*K / t / 1e12 (a multiply and an add per term of each dot product)
    stats = rate_stats(samples, work=2.0 * m * n * k, scale=1e12)
    p: dict[str, ParamValue] = {"dtype": dtype, "m": m, "n": n, "k": k}
    ref = spec_reference(ctx, dtype)
    return ctx.measurement(
        GemmMetrics.tflops, value=stats.median, params=p, stats=stats, reference=ref
    )


def _summaries(
    ctx: DistContext, *, dtype: Dtype, timed: list[Measurement]
) -> Iterator[Measurement]:
    """The best shape, and the geometric mean over shapes, of one dtype's per-shape medians."""
    if not timed:
        return
    best = max(timed, key=lambda t: t.value)  # the best shape's row, under its own name
    yield ctx.measurement(
        GemmMetrics.tflops_best,
        value=best.value,
        params=best.params,
        stats=best.stats,
        reference=best.reference,
    )
    # geomean = exp(mean(log(median TFLOP/s of each shape)))
    geomean = math.exp(sum(math.log(t.value) for t in timed) / len(timed))
    yield ctx.measurement(
        GemmMetrics.tflops_geomean,
        value=geomean,
        params={"dtype": dtype, "num_shapes": len(timed)},
        reference=spec_reference(ctx, dtype),
    )


def spec_reference(ctx: DistContext, dtype: str) -> Reference | None:
    """The dense peak of ``dtype`` on this rank's GPU, from its spec (None: unknown)."""
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    if spec is None or dtype not in spec.dense_tflops:
        return None
    return Reference(value=spec.dense_tflops[dtype], kind="spec_peak", source=spec.source)


def _fp8_skip_reason(device: torch.device, dtype: str) -> str | None:
    if dtype != "fp8":
        return None
    if device.type != "cuda":
        return "fp8 matrix products need a CUDA GPU"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no fp8 matrix product"
    capability = torch.cuda.get_device_capability(device)
    if capability < _FP8_MIN_CAPABILITY:
        return f"compute capability {capability[0]}.{capability[1]} < 8.9 has no fp8 tensor cores"
    return None


def make_product(
    device: torch.device, *, dtype: str, shape: tuple[int, int, int], fast_accum: bool
) -> tuple[Callable[[], object], float]:
    """The product to time, and its relative error on the first rows against float64."""
    m, n, k = shape
    if dtype == "fp8":
        return _make_fp8_op(device, shape=shape, fast_accum=fast_accum)
    torch_dtype = TORCH_DTYPES[dtype]
    a = torch.randn(m, k, device=device, dtype=torch_dtype)
    b = torch.randn(k, n, device=device, dtype=torch_dtype)
    out = torch.empty(m, n, device=device, dtype=torch_dtype)
    rows = min(m, _CHECK_ROWS)
    out[:rows].fill_(float("nan"))  # poison: rows the product does not write fail the check
    torch.mm(a, b, out=out)
    rel = _rel_error(out[:rows], a[:rows].double() @ b.double())

    def op() -> object:
        return torch.mm(a, b, out=out)

    return op, rel


def _make_fp8_op(
    device: torch.device, *, shape: tuple[int, int, int], fast_accum: bool
) -> tuple[Callable[[], object], float]:
    m, n, k = shape
    a, scale_a = _quantize_fp8(torch.randn(m, k, device=device))
    # B is column-major, as cuBLASLt's fp8 kernels require: a row-major (N x K) transposed.
    b_t, scale_b = _quantize_fp8(torch.randn(n, k, device=device))
    b = b_t.t()

    def op() -> torch.Tensor:
        out = torch._scaled_mm(
            a,
            b,
            scale_a=scale_a,
            scale_b=scale_b,
            out_dtype=torch.bfloat16,
            use_fast_accum=fast_accum,
        )
        # torch < 2.5 returned (out, amax)
        return out[0] if isinstance(out, tuple) else out

    rows = min(m, _CHECK_ROWS)
    got = op()[:rows]
    # reference: the dequantized inputs, x = q * scale, multiplied in float64
    ref = (a[:rows].double() * scale_a.double()) @ (b.double() * scale_b.double())
    return op, _rel_error(got, ref)


def _quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor scaling: q = x / s with s = amax / 448, so q spans e4m3's range; x ~ q * s."""
    scale = (x.abs().amax().float() / _FP8_MAX).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    # rel = ||out - ref||_F / ||ref||_F, in float64 (NaN if out holds NaN)
    diff = torch.linalg.vector_norm(out.double() - ref)
    return float(diff / torch.linalg.vector_norm(ref))
