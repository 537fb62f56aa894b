"""Verdicts on the training benchmark: scaling efficiency, MFU of large models, whether
synchronisation idle grows with gradient accumulation.  The batch-size partition search is
judged by its run part (``analyses/partition/findings.py``).

Only the ``scaling`` series is judged for scaling and MFU (sweep cases are comparisons, not
targets).  The limits are :class:`clusterbench.thresholds.Thresholds`'
``scaling_min_efficiency_warn``, ``scaling_min_efficiency_fail`` and ``mfu_min``.
"""

from __future__ import annotations

from clusterbench.benchmarks.training.settings import TrainingMetrics
from clusterbench.benchmarks.training.thresholds import TrainingThresholds
from clusterbench.judging.measurements import gpu_severity, scope_label
from clusterbench.metrics import Metric
from clusterbench.model_shapes import Model
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "LARGE_MODELS",
    "findings",
    "grad_accum_findings",
    "low_mfu_findings",
    "scaling_findings",
]

LARGE_MODELS: frozenset[Model] = frozenset({"1.3b", "2b", "7b", "8b"})
_ACCUM_KNEE = 4  # the bottleneck-analysis paper's claim: idle grows past four accumulation steps


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every verdict on the training benchmark's measurements."""
    limits = thresholds.of(TrainingThresholds)
    return [
        *scaling_findings(
            results,
            warn=limits.scaling_min_efficiency_warn,
            fail=limits.scaling_min_efficiency_fail,
        ),
        *low_mfu_findings(results, mfu_min=limits.mfu_min),
        *grad_accum_findings(results),
    ]


def _scaling_series(results: Results, metric: Metric) -> list[Measurement]:
    return [m for m in metric.select(results) if m.params.get("series", "scaling") == "scaling"]


def _case(m: Measurement) -> str:
    p = m.params
    return f"{p.get('model')} {p.get('strategy')} {p.get('precision')}"


def scaling_findings(results: Results, *, warn: float, fail: float) -> list[Finding]:
    """Scaling efficiency (in %) below ``fail`` -> fail, below ``warn`` -> warn."""
    out = []
    for m in _scaling_series(results, TrainingMetrics.scaling_efficiency):
        e = m.value / 100
        if e >= warn:
            continue
        # CPU workers share the host's cores: scaling there describes the machine's core
        # count, not a cluster, so it is stated but not judged.
        severity = gpu_severity(results, "fail" if e < fail else "warn")
        w, mode = m.params.get("world_size"), m.params.get("scaling_mode", "weak")
        out.append(
            Finding(
                id="training.scaling_efficiency",
                severity=severity,
                scope="run",
                message=(
                    f"{_case(m)}: {mode} scaling efficiency {m.value:.1f}% at {w} "
                    f"{'GPUs' if results.run.backend == 'nccl' else 'CPU ranks'} "
                    f"(below {100 * warn:.0f}%, the target"
                    f"{f'; under {100 * fail:.0f}% fails' if e < fail else ''})."
                ),
                evidence={"efficiency_pct": m.value, "world_size": w, **m.params},
                fix=(
                    "Compare the collectives results of the same GPUs (busbw against the link); "
                    "check NCCL uses NVLink / RDMA (NCCL_DEBUG=INFO), raise the per-GPU batch or "
                    "gradient accumulation to hide communication, or try fsdp2 / zero1."
                ),
            )
        )
    return out


def low_mfu_findings(results: Results, *, mfu_min: float) -> list[Finding]:
    """MFU of a large preset (>= 1.3b) below ``mfu_min`` -> warn."""
    out = []
    for m in _scaling_series(results, TrainingMetrics.mfu):
        if m.params.get("model") not in LARGE_MODELS or m.value / 100 >= mfu_min:
            continue
        out.append(
            Finding(
                id="training.low_mfu",
                severity="warn",
                scope=scope_label(m.host, m.device),
                message=(
                    f"{_case(m)} at {m.params.get('world_size')} GPUs: MFU {m.value:.1f}% is "
                    f"below {100 * mfu_min:.0f}% (public large runs on H100s: Megatron-LM "
                    "41-48%, torchtitan 8B 33-39%)."
                ),
                evidence={"mfu_pct": m.value, **m.params},
                fix=(
                    "Check the GEMM benchmark reaches its peak first; then use bf16, "
                    "torch.compile (--set training.compile=true) and a larger per-GPU batch."
                ),
            )
        )
    return out


def grad_accum_findings(results: Results) -> list[Finding]:
    """Synchronisation idle fraction per accumulation count; info when it rises past four."""
    idle = TrainingMetrics.sync_idle_fraction.select(results)
    ms = [m for m in idle if m.params.get("series") == "grad_accum"]
    by_k = {int(k): m.value for m in ms if isinstance(k := m.params.get("grad_accum"), int)}
    at_knee = by_k.get(_ACCUM_KNEE)
    beyond = {k: v for k, v in by_k.items() if k > _ACCUM_KNEE}
    if at_knee is None or not beyond:
        return []
    rising = max(beyond.values()) > at_knee
    numbers = ", ".join(f"{k}: {v:.1f}%" for k, v in sorted(by_k.items()))
    verdict = "rises" if rising else "does not rise"
    return [
        Finding(
            id="training.grad_accum_idle",
            severity="info",
            scope="run",
            message=(
                f"Synchronisation idle per step (share of step time) by accumulation steps: "
                f"{numbers}; it {verdict} past {_ACCUM_KNEE} steps."
            ),
            evidence={"idle_pct_by_grad_accum": {str(k): v for k, v in sorted(by_k.items())}},
            fix=(
                "If idle rises past 4 steps, keep accumulation at or below 4 and raise the "
                "per-GPU batch instead."
                if rising
                else ""
            ),
        )
    ]
