"""``clusterbench predict --workload FILE``: a training job as a published result states it, its
throughput at the base size predicted at larger sizes through :mod:`.parallel_model`.

A workload (a TOML or YAML document, read by the command) names its source, the cluster (GPU,
GPUs per node, links), the training (precision, strategy, recomputation, how its published
figures count FLOPs) and its points: the GPU counts with their layout (TP, PP, CP, EP, DP),
batch and, where published, the measured throughput. The smallest published point is the base:
its figure fixes the one free quantity of the model, the GPU's compute rate (FLOP/s outside
communication and the pipeline bubble); every other point is predicted from it:

    compute(N) = FLOP per GPU per step at N / rate,   step(N) = the step model's time

An input the source does not state is an assumption, written where the value goes as
``{assumed = X, ends = [A, B], why = "..."}``; the prediction is made at X and again at each
end (one at a time), and the band holds them all, the link fits' prediction intervals and the
model's own error on published results (:data:`MODEL_ERROR_SIGMA`). Defaults the workload does
not override (latencies, link efficiency, gradient bytes) are listed as assumed too. No I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterbench.analyses.prediction.parallel_model import (
    Layout,
    Which,
    calibrate_compute_s,
    step_breakdown,
)
from clusterbench.analyses.prediction.scaling_model import Links
from clusterbench.analyses.prediction.workload_file import (
    LINK_EFFICIENCY,
    Point,
    collect_assumptions,
    overlap_of,
    read_points,
    resolve,
    stated_links,
    table,
    whole,
)

__all__ = ["MODEL_ERROR_SIGMA", "PointPrediction", "WorkloadPrediction", "predict_workload"]

MODEL_ERROR_SIGMA = 0.041
"""The model's error spread on published results: the robust sigma
(:func:`.published_validation.robust_sigma`) of the errors of every case of
docs/results/predict-validation.md the model represents (35 points; a test recomputes it). It
widens the band for what no stated input explains."""
_Z95 = 1.959963984540054  # standard normal 97.5% quantile: the two-sided 95% band


@dataclass(frozen=True, slots=True, kw_only=True)
class PointPrediction:
    gpus: int
    layout: str
    unit: str
    predicted: float
    low: float
    high: float
    published: float | None
    base: bool
    scale: float
    """GPUs / the base's GPUs."""

    @property
    def error(self) -> float | None:
        """(predicted - published) / published."""
        if self.published is None or self.base:
            return None
        return (self.predicted - self.published) / self.published

    @property
    def holds(self) -> bool | None:
        """Whether the band holds the published figure."""
        if self.published is None or self.base:
            return None
        return self.low <= self.published <= self.high


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadPrediction:
    name: str
    source: dict[str, Any]
    points: tuple[PointPrediction, ...]
    assumptions: tuple[str, ...]
    """One line each: what was assumed, its value and ends, why."""
    ends: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Assumption -> (prediction at its low end, at its high end) at the largest point."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "points": [
                {"gpus": p.gpus, "layout": p.layout, "unit": p.unit, "predicted": p.predicted,
                 "band": [p.low, p.high], "published": p.published, "base": p.base,
                 "scale": p.scale,
                 "error": p.error, "band_holds": p.holds}
                for p in self.points
            ],
            "assumptions": list(self.assumptions),
            "assumption_ends_at_largest": {k: list(v) for k, v in self.ends.items()},
        }  # fmt: skip


# --- prediction ----------------------------------------------------------------------------


def _step_of(point: Point, unit: str, value: float, peak_tflops: float | None) -> float:
    tokens = point.global_batch * point.shape.seq_len
    flops_gpu = point.flops_per_token * tokens / point.gpus
    if unit == "tokens_per_s_per_gpu":
        return tokens / point.gpus / value
    if unit == "samples_per_s_per_gpu":
        return point.global_batch / point.gpus / value
    if unit == "samples_per_s":
        return point.global_batch / value
    if unit == "tflops_per_gpu":
        return flops_gpu / (value * 1e12)
    if unit == "mfu":
        if peak_tflops is None:
            raise ValueError("an mfu figure needs cluster.peak_tflops")
        return flops_gpu / (value * peak_tflops * 1e12)
    return value  # step_s


def _figure(point: Point, unit: str, step_s: float, peak_tflops: float | None) -> float:
    """The published unit's figure of a step of ``step_s`` (the inverse of :func:`_step_of`)."""
    return _step_of(point, unit, step_s, peak_tflops) if unit != "step_s" else step_s


def _flops_gpu(point: Point) -> float:
    return point.flops_per_token * point.global_batch * point.shape.seq_len / point.gpus


def _predict_once(
    doc: Mapping[str, Any],
    *,
    links: Links | None,
    efficiency: float,
    extra_gpus: Sequence[int],
    which: Which = "central",
) -> tuple[list[tuple[Point, float]], list[str]]:
    """Every point's predicted figure (in the base's published unit), and notes; the first
    published point is the base."""
    cluster, training = table(doc, "cluster"), table(doc, "training")
    stated, notes = stated_links(cluster, efficiency)
    use = links or stated
    g = whole(cluster, "gpus_per_node", "cluster")
    points = _extend(read_points(doc, gpus_per_node=g), extra_gpus, table(doc, "source"))
    peak = cluster.get("peak_tflops")
    peak_tflops = float(peak) if isinstance(peak, int | float) else None
    overlap = overlap_of(training.get("overlap", "auto"))
    base = next((p for p in points if p.published is not None), None)
    if base is None or base.published is None:
        raise ValueError("points: no point has a published figure to start from")
    unit, value = base.published
    base_step = _step_of(base, unit, value, peak_tflops)
    compute = calibrate_compute_s(base_step, base.layout, base.shape, use, flops=_flops_gpu(base),
                                  overlap=overlap)  # fmt: skip
    rate = _flops_gpu(base) / compute
    out = []
    for p in points:
        c = _flops_gpu(p) / rate
        step = step_breakdown(
            p.layout, p.shape, use, compute_s=c, flop_rate=rate, overlap=overlap, which=which
        ).step_s
        out.append((p, _figure(p, unit, step, peak_tflops)))
    return out, notes


def _extend(points: list[Point], extra: Sequence[int], source: Mapping[str, Any]) -> list[Point]:
    """Points at ``extra`` GPU counts: the largest point's layout with more data parallelism;
    weak scaling keeps the batch per replica, strong scaling the global batch."""
    if not extra:
        return points
    top = points[-1]
    strong = source.get("scaling") == "strong"
    have = {p.gpus for p in points}
    out = list(points)
    for n in sorted(set(extra) - have):
        model = top.layout.tp * top.layout.pp * top.layout.cp
        if n % model:
            raise ValueError(f"--gpus {n}: not a multiple of the model-parallel size {model}")
        dp = n // model
        batch = top.global_batch if strong else top.global_batch / top.layout.dp * dp
        m = batch / (top.shape.micro_batch * dp)
        if m < 1 - 1e-9:
            raise ValueError(f"--gpus {n}: the global batch has less than one micro-batch "
                             "per replica")  # fmt: skip
        layout = dataclasses.replace(top.layout, gpus=n, microbatches=max(1, round(m)))
        out.append(dataclasses.replace(top, gpus=n, layout=layout, global_batch=batch,
                                       published=None))  # fmt: skip
    return sorted(out, key=lambda q: q.gpus)


def _layout_text(layout: Layout) -> str:
    parts = [f"{layout.sharding} {layout.dp}"]
    for name in ("tp", "pp", "cp", "ep"):
        size = getattr(layout, name)
        if size > 1:
            parts.append(f"{name} {size}")
    if layout.pp > 1:
        sched = "1F1B" if layout.schedule == "1f1b" else f"interleaved v{layout.virtual_stages}"
        parts.append(f"{sched}, m {layout.microbatches}")
    return " × ".join(parts)


def predict_workload(
    doc: Mapping[str, Any],
    *,
    name: str = "workload",
    links: Links | None = None,
    extra_gpus: Sequence[int] = (),
    model_sigma: float | None = None,
) -> WorkloadPrediction:
    """The workload ``doc`` (a parsed TOML/YAML document) predicted at its points and at
    ``extra_gpus``; ``links`` (a run's measured ones) replace the stated links. Raises
    ValueError with one line on bad input."""
    if not isinstance(doc, Mapping):
        raise ValueError("the workload must be a table of tables (source, cluster, training, "
                         "model, points)")  # fmt: skip
    assumptions = collect_assumptions(doc)
    central_doc = resolve(doc, {})
    eff, eff_low, eff_high = LINK_EFFICIENCY
    base, notes = _predict_once(central_doc, links=links, efficiency=eff, extra_gpus=extra_gpus)
    variants: list[list[float]] = []
    ends: dict[str, tuple[float, float]] = {}
    for a in assumptions:
        at_ends = []
        for end in a.ends:
            varied, _ = _predict_once(resolve(copy.deepcopy(doc), {a.path: end}), links=links,
                                      efficiency=eff, extra_gpus=extra_gpus)  # fmt: skip
            variants.append([s for _, s in varied])
            at_ends.append(varied[-1][1])
        if len(at_ends) == 2:
            ends[a.name] = (at_ends[0], at_ends[1])
    stated = table(central_doc, "cluster")
    if links is None and ("inter_gbps_per_gpu" in stated or "inter_gbps_per_node" in stated):
        for e in (eff_low, eff_high):
            varied, _ = _predict_once(central_doc, links=None, efficiency=e, extra_gpus=extra_gpus)
            variants.append([s for _, s in varied])
    ends_of_fits: tuple[Which, Which] = ("low", "high")
    for which in ends_of_fits:
        varied, _ = _predict_once(central_doc, links=links, efficiency=eff,
                                  extra_gpus=extra_gpus, which=which)  # fmt: skip
        variants.append([s for _, s in varied])
    sigma = MODEL_ERROR_SIGMA if model_sigma is None else model_sigma
    widen = math.exp(_Z95 * sigma)
    base_point = next(p for p, _ in base if p.published is not None)
    unit = base_point.published[0] if base_point.published else "step_s"
    rows = []
    for i, (p, fig) in enumerate(base):
        figs = [fig, *(v[i] for v in variants)]
        published = p.published[1] if p.published and p.published[0] == unit else None
        rows.append(PointPrediction(
            gpus=p.gpus, layout=_layout_text(p.layout), unit=unit, predicted=fig,
            low=min(figs) / widen, high=max(figs) * widen, published=published,
            base=p is base_point, scale=p.gpus / base_point.gpus,
        ))  # fmt: skip
    lines = [f"{a.name} = {a.value!r}" + (f" (ends {a.ends[0]!r}, {a.ends[1]!r})" if a.ends else "")
             + f": {a.why}" for a in assumptions]  # fmt: skip
    lines.append(f"inter-node links reach {eff:g} of their line rate (ends {eff_low:g}, "
                 f"{eff_high:g}): docs/reference.md, NDR 400G moves 46-48 GB/s of 50")  # fmt: skip
    lines.extend(notes)
    if sigma:
        lines.append(f"band widened by the model's own error on published results: "
                     f"sigma {sigma:.3g} (docs/results/predict-validation.md)")  # fmt: skip
    source = dict(table(central_doc, "source"))
    return WorkloadPrediction(name=name, source=source, points=tuple(rows),
                              assumptions=tuple(lines), ends=ends)  # fmt: skip
