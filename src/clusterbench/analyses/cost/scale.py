"""The throughput a cost rests on: the run's measured training throughput per GPU, and what it
is at the GPU count priced, measured where the run trained at that count, else the scaling
model's prediction (:mod:`.prediction`), else the nearest measured efficiency, assumed to hold.

The training benchmark's ``scaling`` series of its first case gives, per world size, the
throughput per GPU (``tokens_per_s_per_gpu`` of a decoder, ``samples_per_s_per_gpu`` of an
encoder or a vision model: images) and the scaling efficiency against world size 1.  At N
GPUs the throughput per GPU is X(1) x E(N) (docs/reference.md, "Cost per unit of work").
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from clusterbench.analyses.prediction.inputs import gpus_per_node as choose_gpus_per_node
from clusterbench.analyses.prediction.predict import NoPrediction, Prediction, applies, predict
from clusterbench.declared.training import TrainingMetrics
from clusterbench.model_shapes import DECODER_PRESETS, VISION_PRESETS
from clusterbench.schema import Measurement, Results
from clusterbench.thresholds import run_thresholds

__all__ = [
    "PER",
    "PER_TEXT",
    "AtScale",
    "Basis",
    "NoThroughput",
    "Throughput",
    "Work",
    "at_scale",
    "cluster_gpus",
    "throughput",
]

Work = Literal["tokens", "images", "samples"]
Basis = Literal["measured", "predicted", "assumed"]
PER: dict[Work, float] = {"tokens": 1e6, "images": 1e3, "samples": 1e3}
"""The amount of work a price is quoted for: a million tokens, a thousand images or samples."""
PER_TEXT: dict[Work, str] = {
    "tokens": "million tokens",
    "images": "thousand images",
    "samples": "thousand samples",
}
_CASE_KEYS = (
    "model",
    "strategy",
    "precision",
    "batch_size",
    "activation_checkpointing",
    "compile",
    "cuda_graphs",
)


class NoThroughput(ValueError):
    """The run has no training throughput to price (say why, one line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Throughput:
    """The training scaling series of one case: per-device rate and efficiency per world size."""

    model: str
    strategy: str
    precision: str
    work: Work
    mode: str
    """weak or strong scaling."""
    per_device: dict[int, float]
    """World size -> work per second per device (tokens/s, images/s or samples/s)."""
    efficiency: dict[int, float]
    """World size -> measured scaling efficiency, a fraction (1 at world size 1)."""
    on_cpu: bool

    @property
    def device(self) -> str:
        """What one device is: GPU, or rank for CPU workers."""
        return "rank" if self.on_cpu else "GPU"

    @property
    def case(self) -> str:
        return f"{self.model} {self.strategy} {self.precision}"


def _work(model: str) -> Work:
    if model in DECODER_PRESETS:
        return "tokens"
    return "images" if model in VISION_PRESETS else "samples"


def _scaling(ms: list[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.params.get("series", "scaling") == "scaling"]


def _by_world(ms: list[Measurement], first: Measurement) -> dict[int, float]:
    out: dict[int, float] = {}
    for m in ms:
        w = m.params.get("world_size")
        same = all(m.params.get(k) == first.params.get(k) for k in _CASE_KEYS)
        if same and isinstance(w, int) and not isinstance(w, bool) and w not in out:
            out[w] = m.value
    return dict(sorted(out.items()))


def throughput(results: Results) -> Throughput:
    """The first training case's scaling series; NoThroughput when the run has none."""
    T = TrainingMetrics
    rates = _scaling(T.tokens_per_s_per_gpu.select(results)) or _scaling(
        T.samples_per_s_per_gpu.select(results)
    )
    if not rates:
        raise NoThroughput(
            "no training throughput in the run (clusterbench run --only training measures it)"
        )
    first = rates[0]
    per_device = {w: v for w, v in _by_world(rates, first).items() if v > 0 and math.isfinite(v)}
    if not per_device:
        raise NoThroughput("the run's training throughput is zero or not finite")
    measured = _by_world(_scaling(T.scaling_efficiency.select(results)), first)
    efficiency = {w: measured.get(w, 100.0) / 100 if w > 1 else 1.0 for w in per_device}
    modes = {m.params.get("scaling_mode", "weak") for m in T.scaling_efficiency.select(results)}
    model = str(first.params.get("model"))
    return Throughput(
        model=model,
        strategy=str(first.params.get("strategy")),
        precision=str(first.params.get("precision")),
        work=_work(model),
        mode="strong" if "strong" in modes else "weak",
        per_device=per_device,
        efficiency=efficiency,
        on_cpu=first.device.startswith("cpu"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AtScale:
    """The throughput at the GPU count priced and what it rests on."""

    gpus: int
    gpus_per_node: int
    gpus_per_node_source: str
    per_device: float
    """Work per second per device at :attr:`gpus`."""
    efficiency: float
    basis: Basis
    source: str
    """One line: 'measured at 2 ranks', 'predicted by the scaling model (...)', 'assumed: ...'."""
    comm_share: float | None = None
    """The predicted exposed communication share of the step at :attr:`gpus` (None: not
    predicted)."""
    target_efficiency: float = 0.9
    """The run's target efficiency (thresholds.prediction_target_efficiency)."""
    prediction: Prediction | None = None
    """The prediction at :attr:`gpus` (None: none made)."""
    model_error: float | None = None
    """The scaling model's largest error on this run's measured world sizes (None: not checked)."""
    measured_at: int | None = None
    """The world size whose measured efficiency :attr:`efficiency` is (None: predicted)."""


def cluster_gpus(
    results: Results, *, gpus: int | None, nodes: int | None, gpus_per_node: int | None
) -> int | None:
    """The GPU count priced from ``--gpus`` or ``--nodes`` (x the GPUs per node: given, the
    run's, or 8); ValueError when both are given and disagree.  None: neither given (the
    run's world size is priced)."""
    if nodes is None:
        return gpus
    g, _ = choose_gpus_per_node(results, gpus_per_node, "GPU")
    if gpus is not None and gpus != nodes * g:
        raise ValueError(f"--gpus {gpus} is not --nodes {nodes} x {g} GPUs per node: give one")
    return nodes * g


def _nearest(sizes: list[int], n: int) -> int:
    return min(sizes, key=lambda w: (abs(math.log(w / n)), -w))


def _predicted(
    results: Results, tp: Throughput, *, gpus: int, g: int, target: float
) -> Prediction | str:
    """The prediction at ``gpus`` or why there is none."""
    if not applies(results):
        return "no scaling prediction: it needs the training and collectives benchmarks"
    if tp.mode != "weak":
        return "no scaling prediction: the model predicts weak scaling, the run scaled strong"
    if 1 not in tp.per_device:
        return "no scaling prediction: it needs the throughput at 1 GPU"
    try:
        return predict(results, gpu_counts=[gpus], gpus_per_node=g, target=target)
    except (NoPrediction, ValueError, ArithmeticError) as exc:
        return f"no scaling prediction: {exc}"


def at_scale(results: Results, tp: Throughput, *, gpus: int, gpus_per_node: int | None) -> AtScale:
    """The throughput per device at ``gpus``: measured, predicted, or the nearest measured
    efficiency assumed to hold."""
    g, g_source = choose_gpus_per_node(results, gpus_per_node, tp.device)
    target = run_thresholds(results).prediction_target_efficiency
    got = _predicted(results, tp, gpus=gpus, g=g, target=target)
    p = got if isinstance(got, Prediction) else None
    error = p.validation.max_abs_rel_error if p is not None and p.validation else None
    row = None
    if p is not None:
        row = next(r for r in p.rows if r.world_size == gpus and r.strategy == p.strategies[0])
    base = AtScale(
        gpus=gpus,
        gpus_per_node=g,
        gpus_per_node_source=g_source,
        target_efficiency=target,
        prediction=p,
        model_error=error,
        comm_share=row.step.comm_share if row else None,
        per_device=0.0,
        efficiency=0.0,
        basis="assumed",
        source="",
    )
    unit = f"{tp.device}{'s' if gpus > 1 else ''}"
    if gpus in tp.per_device:
        return dataclasses.replace(
            base,
            per_device=tp.per_device[gpus],
            efficiency=tp.efficiency[gpus],
            basis="measured",
            source=f"measured at {gpus} {unit}",
            measured_at=gpus,
        )
    if p is not None and row is not None:
        e = row.step.efficiency
        checked = f"; its error on this run's sizes ±{error:.0%}" if error is not None else ""
        assumed = f"; rests on assumptions: {'; '.join(p.assumptions())}" if row.assumed else ""
        source = (
            f"predicted by the scaling model ({p.strategies[0]}, {g} {tp.device}s per node, "
            f"{p.inter_node_gbps:,.0f} Gb/s per node{checked}{assumed}): the throughput at 1 "
            f"{tp.device} x the predicted efficiency"
        )
        return dataclasses.replace(
            base, per_device=tp.per_device[1] * e, efficiency=e, basis="predicted", source=source
        )
    w = _nearest(list(tp.per_device), gpus)
    why = got if isinstance(got, str) else ""
    source = (
        f"assumed: the throughput measured at {w} {tp.device}{'s' if w > 1 else ''} holds at "
        f"{gpus}; {why}"
    )
    return dataclasses.replace(
        base,
        per_device=tp.per_device[w],
        efficiency=tp.efficiency[w],
        source=source,
        measured_at=w,
    )
