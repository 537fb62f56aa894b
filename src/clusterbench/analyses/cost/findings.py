"""The price of each finding: the share of the cluster's spend a finding's measured or
predicted gain would save (or a slow node costs), at the prices given.

A finding is priced by the share ``f`` of the training time it wastes; at a monthly spend
``M`` of the cluster priced that is ``M x f`` a month (docs/reference.md, "The price of a
finding"):

- a throughput or efficiency ``now`` against a reachable ``target`` (the training scaling
  efficiency against the threshold, the predicted efficiency at the GPU count priced against
  the target, the GPU busy share of an input-bound loader against the best loader tried or
  the threshold): the same work at the target takes now / target of the time, f = 1 - now /
  target;
- advice (:mod:`.advice`) whose gain is of the training step itself (the batch partition's
  time to batch; the accumulation sweep's coordination idle, a share of the iteration):
  f = the gain (a rate's gain g: 1 - 1 / (1 + g));
- advice whose gain is of a part of the step, times that part's share: NCCL tuning's
  all_reduce time x the exposed communication share (attribution, else the prediction at the
  GPU count priced), the fused/foreach optimizer step's time saved / the training step time;
- a slow node (the drain list, :mod:`.drain`): drained, its share of the cluster's nodes;
  kept, the scaling model's efficiency at the GPU count priced with the inter-node bandwidth
  cut to the slow pairs' ratio, against the same model's at full bandwidth (:mod:`.cost_nodes`).

A finding with a gain that none of these turns into training time is listed as not priced,
with the reason.  Pure: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from clusterbench.analyses.cost.scale import AtScale, Throughput
from clusterbench.declared.attribution import AttributionMetrics
from clusterbench.declared.training import TrainingMetrics, TrainingThresholds
from clusterbench.declared.weight_update import WeightUpdateMetrics
from clusterbench.judging.advice import Advice, collect_advice
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "PriceBasis",
    "PricedFinding",
    "Unpriced",
    "price_advice",
    "price_targets",
    "wasted_fraction",
]

PriceBasis = Literal["measured", "predicted", "target", "capacity"]
"""measured: a gain this run measured; predicted: the scaling model's; target: the gap from a
measured figure to the threshold's; capacity: nodes out of service."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PricedFinding:
    finding_id: str
    scope: str
    statement: str
    """What the price is of: 'tiny ddp bf16 runs at 59% weak scaling measured at 2 GPUs;
    reaching the 90% target' (read on with :attr:`verb` and the amount)."""
    fraction: float
    """The share of the cluster's spend: saved by the fix, or what the finding costs."""
    basis: PriceBasis
    note: str = ""
    """How the share was reached ('12% less all_reduce time x 15% of the step exposed')."""
    savings: dict[str, float] = field(default_factory=dict)
    """Offer -> $ per month."""
    verb: Literal["would save", "costs"] = "would save"


@dataclass(frozen=True, slots=True)
class Unpriced:
    finding_id: str
    scope: str
    reason: str


def wasted_fraction(now: float, target: float) -> float:
    """The share of the time wasted running at ``now`` instead of ``target`` (both rates or
    efficiencies): the same work at the target takes now / target of the time."""
    if not now > 0 or not target > 0:
        raise ValueError(f"rates must be positive, got {now} and {target}")
    return max(0.0, 1 - now / target)


def _step_fraction(a: Advice) -> float:
    """The advice's gain as a share of the time: a time's gain, or 1 - 1 / (1 + g) of a rate's."""
    assert a.gain is not None
    return a.gain if a.better == "lower" else 1 - 1 / (1 + a.gain)


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.0f}%" if fraction >= 0.0995 else f"{100 * fraction:.1f}%"


def _comm_share(results: Results, at: AtScale) -> tuple[float, str] | None:
    """The exposed communication share of the step: attribution's (mean over ranks), else the
    prediction's at the GPU count priced."""
    values = [
        m.value
        for m in AttributionMetrics.communication.select(results)
        if m.params.get("rank_step", "mean") == "mean"
    ]
    if values:
        share = statistics.fmean(values) / 100
        return share, f"{_pct(share)} of the step in exposed communication (attribution)"
    if at.comm_share is not None:
        return at.comm_share, (
            f"{_pct(at.comm_share)} of the step in exposed communication (predicted at {at.gpus})"
        )
    return None


def _update_share(results: Results, finding: Finding) -> tuple[float, str] | str:
    """The optimizer step time the advice saves, as a share of the training step of the
    same model (ms saved / step ms at 1 device), or why it cannot be said."""
    layouts = finding.evidence.get("layouts")
    wu = WeightUpdateMetrics.step_time_ms.select(results)
    if not isinstance(layouts, dict) or not wu:
        return "the finding carries no update times"
    saved = [
        max(v["fused_ms"], v["foreach_ms"]) - min(v["fused_ms"], v["foreach_ms"])
        for v in layouts.values()
        if isinstance(v, dict)
        and isinstance(v.get("fused_ms"), int | float)
        and isinstance(v.get("foreach_ms"), int | float)
    ]
    model = wu[0].params.get("model")
    steps = [
        m.value
        for m in TrainingMetrics.step_time_ms.select(results)
        if m.params.get("series", "scaling") == "scaling"
        and m.params.get("model") == model
        and m.params.get("world_size") == 1
    ]
    if not saved or not steps:
        return f"no training step of the {model} at 1 device to compare the update time with"
    ms = max(saved)
    share = min(ms / steps[0], 1.0)
    return share, f"{ms:.3g} ms of a {steps[0]:.3g} ms training step of the {model}"


def _priced(a: Advice, fraction: float, *, basis: PriceBasis, note: str) -> PricedFinding:
    gain = f"{'−' if a.better == 'lower' else '+'}{_pct(a.gain or 0)} {a.gain_of}"
    return PricedFinding(
        finding_id=a.finding_id,
        scope=a.scope,
        fraction=fraction,
        basis=basis,
        note=note,
        statement=f"{a.change} ({gain}, {a.basis})",
    )


def price_advice(results: Results, at: AtScale) -> list[PricedFinding | Unpriced]:
    """Each piece of advice with a gain, priced where its gain is of the training time."""
    out: list[PricedFinding | Unpriced] = []
    by_id = {f.id: f for f in results.findings}
    input_bound = any(f.id == "dataloader.input_bound" for f in results.findings)
    for a in collect_advice(results):
        if a.gain is None or a.source == "prediction":  # the prediction is priced at N
            continue
        step = _step_fraction(a)
        if a.finding_id.startswith(("training.partition", "attribution.accum_idle")):
            out.append(_priced(a, step, basis="measured", note="a share of the training step"))
        elif a.finding_id.startswith("collectives.tune"):
            share = _comm_share(results, at)
            if share is None:
                out.append(
                    Unpriced(
                        a.finding_id,
                        a.scope,
                        "no communication share of the training step in the run (run attribution)",
                    )
                )
                continue
            out.append(
                _priced(
                    a,
                    step * share[0],
                    basis="measured",
                    note=f"{_pct(step)} less all_reduce time x {share[1]}",
                )
            )
        elif a.finding_id.startswith("weight_update"):
            got = _update_share(results, by_id[a.finding_id])
            if isinstance(got, str):
                out.append(Unpriced(a.finding_id, a.scope, got))
                continue
            out.append(_priced(a, got[0], basis="measured", note=got[1]))
        elif a.finding_id.startswith("dataloader") and not input_bound:
            out.append(
                Unpriced(
                    a.finding_id,
                    a.scope,
                    "the devices did not wait for input "
                    "(no dataloader.input_bound): a faster loader saves no "
                    "training time",
                )
            )
        elif not a.finding_id.startswith("dataloader"):  # input-bound: priced by its busy share
            out.append(
                Unpriced(
                    a.finding_id,
                    a.scope,
                    f"its gain ({a.gain_of}) is not a share of the training step",
                )
            )
    return out


def _scaling(
    results: Results, t: Thresholds, *, at: AtScale, tp: Throughput
) -> list[PricedFinding | Unpriced]:
    """The measured scaling efficiency against the target the finding clears at (the
    threshold's warn level, named as the finding names it), priced only where it is the
    efficiency of the cluster priced: the row priced was measured at that world size."""
    out: list[PricedFinding | Unpriced] = []
    target = t.of(TrainingThresholds).scaling_min_efficiency_warn
    for f in results.findings:
        if f.id != "training.scaling_efficiency":
            continue
        e, w = f.evidence.get("efficiency_pct"), f.evidence.get("world_size")
        if not isinstance(e, int | float) or not 0 < e / 100 < target:
            continue
        mode = f.evidence.get("scaling_mode", "weak")
        measured = f"{e / 100:.0%} {mode} scaling measured at {w} {tp.device}s"
        if w != at.measured_at:
            out.append(Unpriced(f.id, f.scope, _elsewhere(measured, at=at, tp=tp)))
            continue
        out.append(
            PricedFinding(
                finding_id=f.id,
                scope=f.scope,
                basis="target",
                fraction=wasted_fraction(e / 100, target),
                statement=f"{tp.case} runs at {measured}; reaching the {target:.0%} target",
                note=f"1 - {e / 100:.3f} / {target:.2f}: the same work in that share less time",
            )
        )
    return out


def _elsewhere(measured: str, *, at: AtScale, tp: Throughput) -> str:
    """Why a scaling efficiency measured at another world size is not the cluster's price."""
    how = "predicted" if at.basis == "predicted" else f"measured at {at.measured_at}"
    return (
        f"{measured}, not at the {at.gpus} {tp.device}s priced, which run at "
        f"{at.efficiency:.1%} ({how}): the cost is priced at that efficiency alone"
    )


def _predicted(at: AtScale, tp: Throughput) -> list[PricedFinding]:
    p, target = at.prediction, at.target_efficiency
    if at.basis != "predicted" or p is None or not at.efficiency < target:
        return []
    row = next(r for r in p.rows if r.world_size == at.gpus and r.strategy == p.strategies[0])
    how = f" with {row.needed_gbps:,.0f} Gb/s per node" if row.needed_gbps is not None else ""
    error = f"; the model's error on this run ±{at.model_error:.0%}" if at.model_error else ""
    return [
        PricedFinding(
            finding_id="prediction.scaling",
            scope="run",
            basis="predicted",
            fraction=wasted_fraction(at.efficiency, target),
            statement=(
                f"this cluster would run at {at.efficiency:.0%} weak scaling predicted at "
                f"{at.gpus} {tp.device}s; reaching the {target:.0%} target{how}"
            ),
            note=f"1 - {at.efficiency:.3f} / {target:.2f}{error}",
        )
    ]


def _input_bound(results: Results) -> list[PricedFinding]:
    worst: dict[str, PricedFinding] = {}
    for f in results.findings:
        busy = f.evidence.get("gpu_busy_pct") if f.id == "dataloader.input_bound" else None
        if not isinstance(busy, Mapping) or not busy:
            continue
        values = {str(k): float(v) for k, v in busy.items() if isinstance(v, int | float)}
        now = values.get("default", min(values.values(), default=0.0)) / 100
        best = values.get("best", 0.0) / 100
        threshold = float(f.evidence.get("threshold") or 0.9)
        target, basis, what = (
            (best, "measured", f"the best loader settings tried ({best:.0%} busy)")
            if best > now
            else (threshold, "target", f"the {threshold:.0%} busy the threshold asks")
        )
        if not now > 0 or not target > now:
            continue
        dataset = str(f.evidence.get("dataset"))
        priced = PricedFinding(
            finding_id=f.id,
            scope=f.scope,
            basis=basis,  # type: ignore[arg-type]
            fraction=wasted_fraction(now, target),
            statement=(
                f"the devices wait for input on the {dataset} dataset, busy {now:.0%} of "
                f"the time; {what}"
            ),
            note=f"1 - {now:.2f} / {target:.2f}; a synchronous job waits for its slowest input",
        )
        if dataset not in worst or priced.fraction > worst[dataset].fraction:
            worst[dataset] = priced
    return list(worst.values())


def price_targets(
    results: Results, at: AtScale, tp: Throughput, thresholds: Thresholds
) -> list[PricedFinding | Unpriced]:
    """The findings priced by a gap to a target: scaling efficiency (measured, predicted) and
    an input-bound loader."""
    return [
        *_scaling(results, thresholds, at=at, tp=tp),
        *_predicted(at, tp),
        *_input_bound(results),
    ]
