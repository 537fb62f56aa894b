"""Derived training figures: MFU, scaling efficiency, synchronisation idle (pure functions)."""

from __future__ import annotations

__all__ = ["idle_fraction", "mfu", "strong_scaling_efficiency", "weak_scaling_efficiency"]


def mfu(*, flops_per_sample: float, samples_per_s_per_gpu: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation as a fraction: FLOPs/sample x samples/s per GPU / peak FLOP/s
    (PaLM appendix B; docs/reference.md).  With the recomputed FLOPs added it is HFU."""
    if peak_tflops <= 0:
        raise ValueError(f"peak_tflops must be positive, got {peak_tflops}")
    return flops_per_sample * samples_per_s_per_gpu / (peak_tflops * 1e12)


def weak_scaling_efficiency(*, throughput_n: float, throughput_1: float, n: int) -> float:
    """Same work per GPU: E(N) = throughput(N) / (N x throughput(1))."""
    return throughput_n / (n * throughput_1)


def strong_scaling_efficiency(*, step_time_1: float, step_time_n: float, n: int) -> float:
    """Same global batch: E(N) = t(1) / (N x t(N))."""
    return step_time_1 / (n * step_time_n)


def idle_fraction(*, step_time: float, compute_time: float) -> float:
    """Share of a step spent waiting on synchronisation: (t_step - t_compute) / t_step, floored
    at 0 (noise can make the compute-only step the slower one)."""
    return max(0.0, step_time - compute_time) / step_time
