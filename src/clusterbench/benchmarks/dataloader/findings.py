"""Verdicts on the input pipeline (``dataloader`` benchmark): is the device waiting for data?

The sweep's winner is advice (:mod:`.advice`) where it beat PyTorch's defaults beyond the
noise of their windows (:func:`~clusterbench.judging.advice.compare_samples`, p below
``thresholds.regression_alpha``).  Pure functions: a :class:`~clusterbench.schema.Results`
in, a list of findings out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.benchmarks.dataloader.thresholds import DataloaderThresholds
from clusterbench.judging.advice import advice_evidence, compare_samples
from clusterbench.judging.measurements import gpu_severity, scope_label
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = ["findings", "input_bound_findings", "slow_default_findings"]

_REMEDIES = (
    "more CPU cores per GPU, cheaper per-sample work (decode on the GPU with NVIDIA DALI or "
    "torchvision.io.decode_jpeg(device='cuda'), smaller or pre-decoded images, sequential "
    "formats such as WebDataset/FFCV), data on local NVMe."
)


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every input-pipeline verdict (the busy limit is ``thresholds.gpu_busy_min``)."""
    limits = thresholds.of(DataloaderThresholds)
    return [
        *input_bound_findings(results, min_busy=limits.gpu_busy_min),
        *slow_default_findings(results, alpha=thresholds.regression_alpha),
    ]


def _key(m: Measurement) -> tuple[str, str, str]:
    return (m.host, m.device, str(m.params.get("dataset")))


def _settings(m: Measurement) -> str:
    p = m.params
    return (
        f"num_workers={p.get('num_workers')}, pin_memory={p.get('pin_memory')}, "
        f"prefetch_factor={p.get('prefetch_factor')}"
    )


def _is_default(m: Measurement) -> bool:
    """PyTorch's DataLoader defaults: no worker processes, no pinning."""
    return m.params.get("num_workers") == 0 and not m.params.get("pin_memory")


def _rate(m: Measurement) -> str:
    return f"{_settings(m)}: {m.value:,.0f} samples/s"


def _bound_fix(loaders: list[Measurement]) -> str:
    """What to do about an input-bound device, from the sweep's measured winner."""
    if not loaders:
        return f"Sweep the loader settings (see the dataloader benchmark); then: {_REMEDIES}"
    winner = max(loaders, key=lambda m: m.value)
    with_workers = [m for m in loaders if not _is_default(m)]
    if _is_default(winner) and with_workers:
        other = max(with_workers, key=lambda m: m.value)
        return (
            f"More loader workers did not help here: the sweep's best is PyTorch's default "
            f"({_rate(winner)}; the best with workers or pinning: {_rate(other)}). As it still "
            f"leaves the device waiting: {_REMEDIES}"
        )
    return (
        f"Use the sweep's best loader settings ({_rate(winner)}); as even they leave the "
        f"device waiting: {_REMEDIES}"
    )


def input_bound_findings(results: Results, *, min_busy: float) -> list[Finding]:
    """Busy below ``min_busy`` at any loader setting tried -> warn; the fix follows from the
    sweep's measured winner (the defaults, or the settings it found faster)."""
    busy: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in DataloaderMetrics.gpu_busy.select(results):
        busy[_key(m)].append(m)
    loaders: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in DataloaderMetrics.loader_samples_per_s.select(results):
        loaders[_key(m)].append(m)
    out = []
    for key, ms in busy.items():
        low = [m for m in ms if m.value < 100.0 * min_busy]
        if not low:
            continue
        # Input-bound only if even the best loader settings tried leave the device waiting;
        # when they fix it, the defaults' shortfall is the slow_default_loader info.
        best_busy = [m for m in ms if m.params.get("choice") == "best"]
        if best_busy and all(m.value >= 100.0 * min_busy for m in best_busy):
            continue
        host, device, dataset = key
        swept = loaders.get(key, [])
        top = max(swept, key=lambda m: m.value) if swept else None
        seen = "; ".join(f"{m.value:.0f}% with {_settings(m)}" for m in ms)
        out.append(
            Finding(
                id="dataloader.input_bound",
                severity=gpu_severity(results, "warn"),
                scope=scope_label(host, device),
                message=(
                    f"Input-bound on the {dataset} dataset: the device is busy {seen} while "
                    f"training from the DataLoader (threshold {min_busy:.0%})."
                ),
                evidence={
                    "dataset": dataset,
                    "gpu_busy_pct": {str(m.params.get("choice")): m.value for m in ms},
                    "best_loader": dict(top.params) if top else None,
                    "best_loader_samples_per_s": top.value if top else None,
                    "loader_sweep": {_settings(m): m.value for m in swept},
                    "threshold": min_busy,
                },
                fix=_bound_fix(swept),
            )
        )
    return out


def _values(m: Measurement) -> list[float]:
    return list(m.stats.values or []) if m.stats is not None else []


def _advice(
    default: Measurement, winner: Measurement, *, change: str, alpha: float
) -> dict[str, Any]:
    """The winner as advice where its windows beat the defaults' beyond the noise, else {}."""
    gain = compare_samples(_values(default), _values(winner), better="higher", alpha=alpha)
    if gain is None or not gain.beyond_noise:
        return {}
    low, high = gain.interval
    evidence = (
        f"medians of {len(_values(winner))} vs {len(_values(default))} timed windows "
        f"(default), one-sided Mann–Whitney p {gain.p_value:.1g}, 95% CI of the speed-up "
        f"{low:.2f}–{high:.2f}×"
    )
    return advice_evidence(
        change=change, gain=gain.gain, better="higher", basis="measured", noise=gain.noise,
        gain_of=f"DataLoader samples/s on the {winner.params.get('dataset')} dataset",
        evidence=evidence,
    )  # fmt: skip


def slow_default_findings(results: Results, *, alpha: float) -> list[Finding]:
    """The loader at PyTorch's defaults (no workers, no pinning) slower than the step, and the
    sweep found a faster setting -> info naming it.  When the defaults were the sweep's best,
    more workers are no advice (the input-bound finding says what is left to do); the setting
    is advice where its windows beat the defaults' beyond the noise (p below ``alpha``)."""
    steps = {_key(m): m for m in DataloaderMetrics.step_samples_per_s.select(results)}
    loaders: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in DataloaderMetrics.loader_samples_per_s.select(results):
        loaders[_key(m)].append(m)
    out = []
    for key, swept in loaders.items():
        step = steps.get(key)
        default = next((m for m in swept if _is_default(m)), None)
        if step is None or default is None or default.value >= step.value:
            continue
        winner = max(swept, key=lambda m: m.value)
        if _is_default(winner):
            continue
        p = winner.params
        setting = f"num_workers={p.get('num_workers')}, prefetch_factor={p.get('prefetch_factor')}"
        pin = ", pin_memory=True" if p.get("pin_memory") else ""
        change = f"DataLoader({setting}{pin})"
        out.append(
            Finding(
                id="dataloader.slow_default_loader",
                severity="info",
                scope=scope_label(default.host, default.device),
                message=(
                    f"With DataLoader defaults (num_workers=0) the {p.get('dataset')} loader "
                    f"delivers {default.value:,.0f} samples/s, below the {step.value:,.0f} "
                    f"samples/s that the {step.params.get('model')} step consumes; the sweep's "
                    f"best, {_settings(winner)}, delivers {winner.value:,.0f} samples/s."
                ),
                evidence={
                    "loader_samples_per_s": default.value,
                    "step_samples_per_s": step.value,
                    "best_loader": dict(p),
                    "best_loader_samples_per_s": winner.value,
                    **_advice(default, winner, change=change, alpha=alpha),
                },
                fix=f"Set {setting}{pin} in the DataLoader (the sweep's best here).",
            )
        )
    return out
