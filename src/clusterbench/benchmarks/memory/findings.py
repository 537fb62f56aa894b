"""Verdicts on ``memory``: the best device-memory copy against the HBM spec.

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.memory.thresholds import MemoryThresholds
from clusterbench.judging.measurements import best_by, per_device, ref_value, scope_label
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = ["findings", "hbm_findings"]


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every verdict on the memory measurements."""
    limits = thresholds.of(MemoryThresholds)
    return hbm_findings(results, min_efficiency=limits.hbm_min_efficiency)


def hbm_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """Best device-memory copy below ``min_efficiency`` x the HBM spec -> warn."""
    copies = [m for m in MemoryMetrics.bandwidth.select(results) if m.params.get("op") == "copy"]
    out = []
    for m in best_by(copies, per_device).values():
        peak = ref_value(m)
        if peak is None or m.value >= min_efficiency * peak:
            continue
        out.append(
            Finding(
                id="memory.low_bandwidth",
                severity="warn",
                scope=scope_label(m.host, m.device),
                message=(
                    f"Device memory copy reaches {m.value:,.0f} GB/s, {m.value / peak:.0%} of "
                    f"the {peak:,.0f} GB/s HBM spec (threshold {min_efficiency:.0%})."
                ),
                evidence={
                    "bandwidth_gbps": m.value,
                    "spec_gbps": peak,
                    "size_bytes": m.params.get("size_bytes"),
                    "efficiency": round(m.value / peak, 4),
                    "threshold": min_efficiency,
                },
                fix=(
                    "Check the memory clock (`nvidia-smi -q -d CLOCK`, at its maximum under "
                    "load), ECC and row remapping (`nvidia-smi -q -d ECC,ROW_REMAPPER`: pending "
                    "remaps need a GPU reset) and temperature (`nvidia-smi -q -d TEMPERATURE`)."
                ),
            )
        )
    return out
