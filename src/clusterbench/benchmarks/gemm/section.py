"""The gemm section: best shape, geometric mean over shapes and the error check, per dtype."""

from __future__ import annotations

from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Section, metric_rows, param

__all__ = ["section"]


def _gemm_label(m: Measurement) -> str | None:
    dtype = param(m, "dtype")
    if GemmMetrics.tflops_best.matches(m):
        return f"{dtype} best shape"
    if GemmMetrics.tflops_geomean.matches(m):
        n = param(m, "num_shapes")
        return f"{dtype} geomean of {n} shape{'' if n == 1 else 's'}"
    if GemmMetrics.rel_error.matches(m):
        return f"{dtype} rel. error (tol {param(m, 'tolerance')})"
    return None  # per-shape figures: too many for a summary; results.json has them


def section(ms: list[Measurement], multi_host: bool) -> Section:
    return Section("gemm", rows=metric_rows(ms, label=_gemm_label, multi_host=multi_host))
