"""Verdicts on ``weight_update``: how near the optimizer step comes to the device's memory
bandwidth, and what fusing the step buys (:mod:`.weight_update_fused`).

The step's GB/s (the bytes it must move, docs/reference.md) is compared per device with the
best copy bandwidth the ``memory`` benchmark measured on the same device in the same run (the
HBM figure of this run) and with the HBM spec (the bottleneck-analysis paper's comparison,
docs/sources.md: FP16 weight updates at 65% of theoretical on H100).  Pure functions: a
:class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.weight_update import WeightUpdateMetrics
from clusterbench.benchmarks.weight_update.fused import LAYOUT_TEXT, fused_findings
from clusterbench.benchmarks.weight_update.optimizers import OPTIMIZER_SPECS, OptimizerSpec
from clusterbench.benchmarks.weight_update.thresholds import WeightUpdateThresholds
from clusterbench.judging.measurements import (
    best_by,
    gpu_severity,
    per_device,
    ref_value,
    scope_label,
)
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = ["LAYOUT_TEXT", "findings", "fused_findings", "hbm_copies", "hbm_findings"]

_PAPER = "the bottleneck-analysis paper saw FP16 weight updates at 65% of theoretical HBM on H100"
_SPECS: dict[str, OptimizerSpec] = {name: spec for name, spec in OPTIMIZER_SPECS.items()}
Device = tuple[str, str]


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every verdict on the weight-update measurements."""
    limits = thresholds.of(WeightUpdateThresholds)
    return [
        *hbm_findings(results, min_vs_hbm=limits.weight_update_min_vs_hbm),
        *fused_findings(results, alpha=thresholds.regression_alpha),
    ]


def hbm_copies(results: Results) -> dict[Device, float]:
    """The best device-memory copy GB/s the memory benchmark measured, per (host, device)."""
    copies = [m for m in MemoryMetrics.bandwidth.select(results) if m.params.get("op") == "copy"]
    return {dev: m.value for dev, m in best_by(copies, per_device).items()}


def _by_layout(results: Results) -> dict[str, dict[str, list[Measurement]]]:
    """layout -> optimizer -> the devices' bandwidth measurements, in recorded order."""
    out: dict[str, dict[str, list[Measurement]]] = defaultdict(lambda: defaultdict(list))
    for m in WeightUpdateMetrics.bandwidth.select(results):
        out[str(m.params.get("layout"))][str(m.params.get("optimizer"))].append(m)
    return out


@dataclass(frozen=True, slots=True)
class _Summary:
    """One optimizer of one layout over the devices: medians of its GB/s and of its fractions
    of each device's measured copy and of the spec (None where unknown)."""

    optimizer: str
    gbps: float
    vs_hbm: float | None
    vs_spec: float | None
    bytes_per_param: object

    def text(self) -> str:
        share = f" ({self.vs_hbm:.0%})" if self.vs_hbm is not None else ""
        return f"{self.optimizer} {_gbps(self.gbps)} GB/s{share}"

    def evidence(self) -> dict[str, object]:
        return {
            "bandwidth_gbps": round(self.gbps, 3),
            "bytes_per_param": self.bytes_per_param,
            "hbm_fraction": None if self.vs_hbm is None else round(self.vs_hbm, 4),
            "spec_fraction": None if self.vs_spec is None else round(self.vs_spec, 4),
        }


def _gbps(value: float) -> str:
    """1,234 GB/s on GPUs; 3 significant digits for the small rates of CPU workers."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(optimizer: str, ms: list[Measurement], copies: dict[Device, float]) -> _Summary:
    vs_hbm = [m.value / copies[per_device(m)] for m in ms if copies.get(per_device(m))]
    vs_spec = [m.value / peak for m in ms if (peak := ref_value(m)) is not None]
    return _Summary(
        optimizer=optimizer,
        gbps=statistics.median(m.value for m in ms),
        vs_hbm=_median(vs_hbm),
        vs_spec=_median(vs_spec),
        bytes_per_param=ms[0].params.get("bytes_per_param"),
    )


def hbm_findings(results: Results, *, min_vs_hbm: float) -> list[Finding]:
    """Per layout: how near its best optimizer comes to HBM (info), and the devices where it
    stays below ``min_vs_hbm`` of the memory benchmark's copy on that device (warn)."""
    copies = hbm_copies(results)
    out = []
    for layout, by_optimizer in _by_layout(results).items():
        summaries = [_summary(o, ms, copies) for o, ms in by_optimizer.items()]
        summaries.sort(key=lambda s: s.gbps, reverse=True)
        out.append(_reach_finding(layout, summaries, by_optimizer, copies=copies))
        low = _low_devices(by_optimizer, copies=copies, min_vs_hbm=min_vs_hbm)
        if low:
            out.append(_low_finding(results, layout, low, min_vs_hbm=min_vs_hbm))
    return out


def _reach_finding(
    layout: str,
    summaries: list[_Summary],
    by_optimizer: dict[str, list[Measurement]],
    *,
    copies: dict[Device, float],
) -> Finding:
    best = summaries[0]
    sample = by_optimizer[best.optimizer][0]
    devices = {per_device(m) for ms in by_optimizer.values() for m in ms}
    hbm = _median([copies[d] for d in devices if d in copies])
    spec = _median([p for ms in by_optimizer.values() for m in ms if (p := ref_value(m))])
    where = f"median of {len(devices)} devices" if len(devices) > 1 else "one device"
    others = ", ".join(s.text() for s in summaries[1:])
    message = (
        f"The weight update {_headline(best)} ({_PAPER}): {best.optimizer} at "
        f"{_gbps(best.gbps)} GB/s ({where}, {best.bytes_per_param} B/param); "
        f"{'; '.join(_against(best, hbm=hbm, spec=spec, sample=sample))}.  Layout: "
        f"{LAYOUT_TEXT.get(layout, layout)}; model {sample.params.get('model')}, "
        f"{_params_text(sample)}." + (f"  Others: {others}." if others else "")
    )
    evidence = {
        "layout": layout, "model": sample.params.get("model"),
        "num_params": sample.params.get("num_params"), "num_devices": len(devices),
        "hbm_copy_gbps": hbm, "spec_gbps": spec,
        "optimizers": {s.optimizer: s.evidence() for s in summaries},
    }  # fmt: skip
    return Finding(
        id="weight_update.hbm_fraction", severity="info", scope="run", message=message,
        evidence=evidence,
    )  # fmt: skip


def _headline(best: _Summary) -> str:
    if best.vs_hbm is not None:
        return f"reaches {best.vs_hbm:.0%} of HBM"
    if best.vs_spec is not None:
        return f"reaches {best.vs_spec:.0%} of the HBM spec"
    return f"reaches {_gbps(best.gbps)} GB/s"


def _against(
    best: _Summary, *, hbm: float | None, spec: float | None, sample: Measurement
) -> list[str]:
    """What the best update is measured against: the run's copy, the spec, and why a share
    above 100% is no paradox."""
    out = []
    if best.vs_hbm is not None and hbm is not None:
        out.append(f"the memory benchmark's copy reached {_gbps(hbm)} GB/s there")
    else:
        out.append(
            "the memory benchmark did not run on these devices, so there is no measured HBM "
            "figure to compare with (run both: --only memory,weight_update)"
        )
    if best.vs_spec is not None and spec is not None:
        out.append(f"{best.vs_spec:.0%} of the {spec:,.0f} GB/s HBM spec")
    if best.vs_hbm is not None and best.vs_hbm > 1:
        out.append(
            f"above 100%: the update's {_update_bytes(sample)} fit in caches that the memory "
            "benchmark's larger buffers do not (a model too small to judge the memory by)"
        )
    return out


def _update_bytes(m: Measurement) -> str:
    n, per_param = m.params.get("num_params"), m.params.get("bytes_per_param")
    if not isinstance(n, int) or not isinstance(per_param, int):
        return "bytes"
    return f"{n * per_param / 1e6:,.3g} MB"


def _params_text(m: Measurement) -> str:
    n = m.params.get("num_params")
    if not isinstance(n, int):
        return "parameters"
    return f"{n / 1e9:.2f}B parameters" if n >= 10**8 else f"{n:,} parameters"


@dataclass(frozen=True, slots=True)
class _Low:
    device: Device
    best: Measurement
    copy_gbps: float


def _low_devices(
    by_optimizer: dict[str, list[Measurement]], *, copies: dict[Device, float], min_vs_hbm: float
) -> list[_Low]:
    """Devices whose best optimizer of the layout stays below ``min_vs_hbm`` of their copy."""
    ms = [m for group in by_optimizer.values() for m in group]
    out = []
    for device, best in best_by(ms, per_device).items():
        copy = copies.get(device)
        if copy and best.value < min_vs_hbm * copy:
            out.append(_Low(device=device, best=best, copy_gbps=copy))
    return out


def _low_finding(results: Results, layout: str, low: list[_Low], *, min_vs_hbm: float) -> Finding:
    worst = min(low, key=lambda x: x.best.value / x.copy_gbps)
    best = worst.best
    share = best.value / worst.copy_gbps
    host, device = worst.device
    more = f" (and {len(low) - 1} more devices)" if len(low) > 1 else ""
    return Finding(
        id="weight_update.below_hbm",
        severity=gpu_severity(results, "warn"),
        scope=scope_label(host, device) if len(low) == 1 else "run",
        message=(
            f"The weight update ({LAYOUT_TEXT.get(layout, layout)}) reaches at best "
            f"{_gbps(best.value)} GB/s ({best.params.get('optimizer')}) on {host}/{device}"
            f"{more}, {share:.0%} of the {_gbps(worst.copy_gbps)} GB/s copy the memory "
            f"benchmark measured there (threshold {min_vs_hbm:.0%})."
        ),
        evidence={
            "layout": layout,
            "threshold": min_vs_hbm,
            "devices": [
                {
                    "host": x.device[0],
                    "device": x.device[1],
                    "optimizer": x.best.params.get("optimizer"),
                    "bandwidth_gbps": x.best.value,
                    "hbm_copy_gbps": x.copy_gbps,
                    "hbm_fraction": round(x.best.value / x.copy_gbps, 4),
                }
                for x in low
            ],
        },
        fix=_fix(str(best.params.get("optimizer")), layout),
    )


def _fix(optimizer: str, layout: str) -> str:
    spec = _SPECS.get(optimizer)
    steps = []
    if spec is None or spec.impl != "fused":
        steps.append(
            "use the fused optimizer (torch.optim.AdamW(..., fused=True), SGD(..., fused=True)): "
            "one kernel reads and writes each tensor once, where foreach writes and re-reads "
            "temporaries and a for-loop launches kernels per parameter (foreach=True is the "
            "next best)"
        )
    steps.append(
        "keep the parameters in few large tensors (a flat parameter buffer, as FSDP2 and "
        "Megatron-LM's distributed optimizer hold them; larger DDP buckets with "
        "gradient_as_bucket_view=True) so that every kernel launch moves more bytes"
    )
    if layout != "fp32":
        steps.append(
            "with half parameters, accumulate gradients in fp32 (Megatron-LM's main_grad) or "
            "step with a master-weight fused kernel (Transformer Engine's or apex's FusedAdam "
            "with master weights) that reads the half gradients and writes the half parameters "
            "in the same pass: 28 rather than 40 B/param for AdamW"
        )
    else:
        steps.append(
            "check that nothing else runs on the GPU during the step (nvidia-smi), and compare "
            "with the memory benchmark's copy: a low copy is a device problem, not the step's"
        )
    return "; ".join(s[0].upper() + s[1:] if i == 0 else s for i, s in enumerate(steps)) + "."
