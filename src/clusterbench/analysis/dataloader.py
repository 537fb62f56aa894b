"""Verdicts on the input pipeline (``dataloader`` benchmark): is the device waiting for data?

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from collections import defaultdict

from clusterbench.analysis._common import best_by, gpu_severity, scope_label
from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = ["findings", "input_bound_findings", "slow_default_findings"]

_BOUND_FIX = (
    "Use the best loader settings found ({settings}); as they still leave the device waiting: "
    "more CPU cores per GPU, cheaper per-sample work (decode on the GPU with NVIDIA DALI or "
    "torchvision.io.decode_jpeg(device='cuda'), smaller or pre-decoded images, sequential "
    "formats such as WebDataset/FFCV), data on local NVMe."
)


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every input-pipeline verdict (the busy limit is ``thresholds.gpu_busy_min``)."""
    return [
        *input_bound_findings(results, min_busy=thresholds.gpu_busy_min),
        *slow_default_findings(results),
    ]


def _key(m: Measurement) -> tuple[str, str, str]:
    return (m.host, m.device, str(m.params.get("dataset")))


def _settings(m: Measurement) -> str:
    p = m.params
    return (
        f"num_workers={p.get('num_workers')}, pin_memory={p.get('pin_memory')}, "
        f"prefetch_factor={p.get('prefetch_factor')}"
    )


def input_bound_findings(results: Results, *, min_busy: float) -> list[Finding]:
    """Busy below ``min_busy`` at any loader setting tried -> warn, naming the best settings."""
    busy: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in DataloaderMetrics.gpu_busy.select(results):
        busy[_key(m)].append(m)
    loaders = DataloaderMetrics.loader_samples_per_s.select(results)
    best = best_by(loaders, _key)
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
        top = best.get(key)
        settings = _settings(top) if top else "see the loader sweep"
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
                    "threshold": min_busy,
                },
                fix=_BOUND_FIX.format(settings=settings),
            )
        )
    return out


def slow_default_findings(results: Results) -> list[Finding]:
    """The loader at PyTorch's defaults (no workers, no pinning) slower than the step -> info."""
    steps = {_key(m): m for m in DataloaderMetrics.step_samples_per_s.select(results)}
    out = []
    for m in DataloaderMetrics.loader_samples_per_s.select(results):
        step = steps.get(_key(m))
        if m.params.get("num_workers") != 0 or m.params.get("pin_memory") or step is None:
            continue
        if m.value >= step.value:
            continue
        out.append(
            Finding(
                id="dataloader.slow_default_loader",
                severity="info",
                scope=scope_label(m.host, m.device),
                message=(
                    f"With DataLoader defaults (num_workers=0) the {m.params.get('dataset')} "
                    f"loader delivers {m.value:.0f} samples/s, below the {step.value:.0f} "
                    f"samples/s that the {step.params.get('model')} step consumes."
                ),
                evidence={"loader_samples_per_s": m.value, "step_samples_per_s": step.value},
                fix="Set num_workers > 0 (and pin_memory=True on GPUs) in the DataLoader.",
            )
        )
    return out
