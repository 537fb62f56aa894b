"""``weight_update.fused_vs_foreach``: the fused optimizer step's time against foreach's, per
family and layout, and whether they differ beyond the noise of the repeats (a two-sided
Mann-Whitney U test per device).  The faster of the two is advice (:mod:`.advice`) where it is
faster beyond the noise on most devices tested and slower beyond it on none; its gain is the
time it saves, median over devices.  Pure functions: results in, findings out.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from clusterbench.benchmarks.weight_update import WeightUpdateMetrics
from clusterbench.benchmarks.weight_update.optimizers import OPTIMIZER_SPECS, OptimizerSpec
from clusterbench.judging.advice import advice_evidence
from clusterbench.judging.measurements import per_device
from clusterbench.schema import Finding, Measurement, Results

__all__ = ["LAYOUT_TEXT", "fused_findings"]

LAYOUT_TEXT = {
    "fp32": "fp32 parameters and gradients",
    "bf16_master": "bf16 parameters and gradients, fp32 master weights",
    "fp16_master": "fp16 parameters and gradients, fp32 master weights, loss scaling",
}
_SPECS: dict[str, OptimizerSpec] = {name: spec for name, spec in OPTIMIZER_SPECS.items()}
Device = tuple[str, str]


def fused_findings(results: Results, *, alpha: float) -> list[Finding]:
    """Per optimizer family: the fused step's time against foreach's, per layout, and whether
    the difference is beyond the noise of the repeats: on each device a two-sided Mann-Whitney
    U test of the two steps' repeat times, p below ``alpha``."""
    times: dict[tuple[str, str, str], dict[Device, Measurement]] = defaultdict(dict)
    for m in WeightUpdateMetrics.step_time_ms.select(results):
        spec = _SPECS.get(str(m.params.get("optimizer")))
        if spec is not None and spec.impl in ("fused", "foreach"):
            times[(spec.family, str(m.params.get("layout")), spec.impl)][per_device(m)] = m
    out = []
    for family in dict.fromkeys(k[0] for k in times):
        pairs = {
            layout: _pairs(times[(family, layout, "fused")], times[(family, layout, "foreach")])
            for layout in dict.fromkeys(k[1] for k in times if k[0] == family)
        }
        pairs = {layout: p for layout, p in pairs.items() if p}
        if pairs:
            out.append(_fused_finding(family, pairs, alpha=alpha))
    return out


_Pair = tuple[Measurement, Measurement]
"""One device's (fused, foreach) step times."""


def _pairs(fused: dict[Device, Measurement], foreach: dict[Device, Measurement]) -> list[_Pair]:
    return [(fused[d], foreach[d]) for d in fused if d in foreach]


@dataclass(frozen=True, slots=True)
class _Comparison:
    fused_ms: float
    foreach_ms: float
    num_devices: int
    num_tested: int
    """Devices with enough repeats for the test to reach ``alpha``."""
    num_beyond: int
    """...of them, where the two differ beyond the noise."""
    num_beyond_faster: int
    """...of those, where the faster of the medians over devices is the faster one."""
    num_repeats: int
    """The fewest repeats of either step on a tested device."""

    @property
    def fused_faster(self) -> bool:
        return self.foreach_ms >= self.fused_ms

    @property
    def is_advice(self) -> bool:
        """Faster beyond the noise on most devices tested, slower beyond it on none."""
        faster = self.num_beyond_faster
        return faster > self.num_tested / 2 and faster == self.num_beyond

    def verdict(self) -> str:
        faster = (
            f"fused {self.foreach_ms / self.fused_ms:.2f}x faster"
            if self.foreach_ms >= self.fused_ms
            else f"foreach {self.fused_ms / self.foreach_ms:.2f}x faster"
        )
        if self.num_tested == 0:
            return f"{faster}; too few repeats to tell it from the noise"
        if self.num_beyond == 0:
            return "within the noise"
        if self.num_beyond < self.num_tested:
            return f"{faster}, beyond the noise on {self.num_beyond} of {self.num_tested} devices"
        return faster


def _compare(pairs: list[_Pair], *, alpha: float) -> _Comparison:
    from scipy.stats import mannwhitneyu

    fused_ms = statistics.median(f.value for f, _ in pairs)
    foreach_ms = statistics.median(f.value for _, f in pairs)
    tested = beyond = faster = 0
    repeats: list[int] = []
    for fused, foreach in pairs:
        a = fused.stats.values if fused.stats and fused.stats.values else []
        b = foreach.stats.values if foreach.stats and foreach.stats.values else []
        if not a or not b or 2 / math.comb(len(a) + len(b), len(a)) >= alpha:
            continue  # the test cannot reach alpha with so few repeats
        tested += 1
        repeats.append(min(len(a), len(b)))
        if float(mannwhitneyu(a, b, alternative="two-sided").pvalue) < alpha:
            beyond += 1
            # this device's faster step, against the faster of the medians over devices
            faster += (statistics.median(a) <= statistics.median(b)) == (foreach_ms >= fused_ms)
    return _Comparison(
        fused_ms=fused_ms,
        foreach_ms=foreach_ms,
        num_devices=len(pairs),
        num_tested=tested,
        num_beyond=beyond,
        num_beyond_faster=faster,
        num_repeats=min(repeats, default=0),
    )


def _fused_finding(family: str, pairs: dict[str, list[_Pair]], *, alpha: float) -> Finding:
    compared = {layout: _compare(p, alpha=alpha) for layout, p in pairs.items()}
    parts = [
        f"{layout} {c.fused_ms:.3g} vs {c.foreach_ms:.3g} ms ({c.verdict()})"
        for layout, c in compared.items()
    ]
    name = {"adamw": "AdamW", "sgd": "SGD"}.get(family, family)
    faster = [c for c in compared.values() if c.num_beyond]
    return Finding(
        id="weight_update.fused_vs_foreach",
        severity="info",
        scope="run",
        message=(
            f"{name} update time, fused against foreach (median over devices): "
            f"{'; '.join(parts)}.  Beyond the noise: a Mann-Whitney U test of the repeats, "
            f"p < {alpha:g}, per device."
        ),
        evidence={
            "family": family,
            "alpha": alpha,
            "layouts": {
                layout: {
                    "fused_ms": round(c.fused_ms, 4),
                    "foreach_ms": round(c.foreach_ms, 4),
                    "speedup": round(c.foreach_ms / c.fused_ms, 4) if c.fused_ms > 0 else None,
                    "num_devices": c.num_devices,
                    "num_tested": c.num_tested,
                    "num_beyond_noise": c.num_beyond,
                }
                for layout, c in compared.items()
            },
            **_advice(name, compared, alpha=alpha),
        },
        fix=(
            "Train with the faster of the two (torch.optim's fused=True or foreach=True)."
            if faster
            else ""
        ),
    )


def _advice(name: str, compared: dict[str, _Comparison], *, alpha: float) -> dict[str, object]:
    """The layout where the faster step gains most, as advice ({} where none is advice); the
    change names the layout when another layout's faster step is the other one."""
    advised = {layout: c for layout, c in compared.items() if c.is_advice and _time_saved(c) > 0}
    if not advised:
        return {}
    layout, c = max(advised.items(), key=lambda item: _time_saved(item[1]))
    impl = "fused" if c.fused_faster else "foreach"
    change = f"torch.optim.{name}(..., {impl}=True)"
    if any(other.fused_faster != c.fused_faster for other in advised.values()):
        change += f" with {LAYOUT_TEXT.get(layout, layout)}"
    devices = f"median of {c.num_devices} devices" if c.num_devices > 1 else "one device"
    where = (
        "on the one device tested"
        if c.num_tested == 1
        else f"on {c.num_beyond_faster} of {c.num_tested} devices tested, slower on none"
    )
    return advice_evidence(
        change=change,
        gain=_time_saved(c),
        gain_of=f"{name} update time, {LAYOUT_TEXT.get(layout, layout)} ({devices})",
        basis="measured",
        evidence=(
            f"faster beyond the noise {where}: two-sided Mann–Whitney p < {alpha:g}, "
            f"≥ {c.num_repeats} repeats of each step"
        ),
    )


def _time_saved(c: _Comparison) -> float:
    """1 - faster / slower median time."""
    return 1 - min(c.fused_ms, c.foreach_ms) / max(c.fused_ms, c.foreach_ms)
