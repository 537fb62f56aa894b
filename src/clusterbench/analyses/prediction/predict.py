"""The run's scaling prediction: step time, communication share and weak-scaling efficiency of
DDP and FSDP at larger GPU counts, from what the run measured (:mod:`.prediction_inputs`)
through the step-time model (:mod:`.scaling_model`, docs/reference.md), with the model's own
error measured on the world sizes the run trained at.

- Links: the slowest measured fit of each level (intra-node, inter-node), else an assumed one.
- Workload: the compute time (the step at world size 1, else fitted to the smallest size
  measured), the gradient bytes, the overlap attribution observed.
- Rows: at each GPU count and strategy (the training's first), the step time and its band
  (the link fits' prediction intervals), the communication share, the efficiency and its
  band, and the inter-node Gb/s per node that keeps the efficiency at the target.
- Validation: the compute time fitted on the smaller measured world sizes (the smallest two of
  three or more, the smallest of two), the larger ones predicted and compared.

Figures resting on an assumption say which. :func:`findings` states the prediction for the
run (``prediction.scaling``, ``prediction.validation``) when training and collectives both
ran. No I/O here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.analyses.prediction import inputs
from clusterbench.analyses.prediction.inputs import (
    DEFAULT_GPUS_PER_NODE,
    Link,
    NoPrediction,
    Quantity,
    TrainingSeries,
)
from clusterbench.analyses.prediction.scaling_model import (
    Links,
    StepPrediction,
    Strategy,
    Validation,
    Workload,
    bandwidth_for_efficiency,
    fit_compute_s,
    node_gbps,
    predict_step,
    validate,
)
from clusterbench.schema import Results

__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "DEFAULT_GPU_COUNTS",
    "NIC_CEILING_GBPS",
    "OUT_OF_REACH",
    "STRATEGIES",
    "NoPrediction",
    "Prediction",
    "Row",
    "applies",
    "predict",
    "run_prediction",
]

DEFAULT_GPU_COUNTS: tuple[int, ...] = (64, 256, 1024)
STRATEGIES: tuple[Strategy, ...] = ("ddp", "fsdp")
OUT_OF_REACH = "out of reach: latency and intra-node traffic alone exceed the target"
NIC_CEILING_GBPS = 6400.0
"""The most inter-node bandwidth a node has today: eight 800 Gb/s NICs (one per GPU of an
8-GPU node, ConnectX-8 / XDR InfiniBand); a need above it is beyond any NIC."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """The prediction at one GPU count for one strategy."""

    step: StepPrediction
    needed_gbps: float | None
    """Inter-node Gb/s per node for efficiency >= the target (None: see needed_note)."""
    needed_note: str
    """Why there is no figure: within one node, or out of reach; '' with a figure."""

    @property
    def beyond_nics(self) -> bool:
        """The needed bandwidth exceeds what any node's NICs carry today."""
        return self.needed_gbps is not None and self.needed_gbps > NIC_CEILING_GBPS

    assumed: tuple[str, ...]
    """The assumed inputs the row rests on (empty: measured and fitted only)."""

    @property
    def world_size(self) -> int:
        return self.step.world_size

    @property
    def strategy(self) -> Strategy:
        return self.step.strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Everything the prediction of one run rests on and says."""

    series: TrainingSeries
    gpus_per_node: int
    gpus_per_node_source: str
    target_efficiency: float
    confidence: float
    intra: Link | None
    """None with one GPU per node."""
    inter: Link
    fits: tuple[Link, ...]
    """Every measured group's fit, the used ones among them."""
    compute: Quantity
    """Seconds."""
    grad_bytes: Quantity
    overlap: Quantity
    strategies: tuple[Strategy, ...]
    rows: tuple[Row, ...]
    curve: tuple[StepPrediction, ...]
    """Each strategy at every drawn GPU count (1, powers of 2, the asked counts)."""
    validation: Validation | None
    validation_reason: str
    """Why there is no validation ('' with one)."""
    notes: tuple[str, ...]

    @property
    def inter_node_gbps(self) -> float:
        """The inter-node Gb/s per node the rows are predicted at."""
        return node_gbps(self.inter.fit.beta_s_per_byte, gpus_per_node=self.gpus_per_node)

    def assumptions(self) -> list[str]:
        """One line per assumed input."""
        named = [
            ("intra-node link", self.intra),
            ("inter-node link", self.inter),
        ]
        sources = [(what, link.source) for what, link in named if link and link.kind == "assumed"]
        for what, q in (("gradient bytes", self.grad_bytes), ("overlap", self.overlap)):
            if q.kind == "assumed":
                sources.append((what, q.source))
        out = [f"{what}: {source.removeprefix('assumed: ')}" for what, source in sources]
        if self.gpus_per_node_source.startswith("assumed"):
            out.append(f"GPUs per node: {self.gpus_per_node_source}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (non-finite numbers as None)."""
        return _finite(
            {
                "model": self.series.model,
                "strategy": self.series.strategy,
                "modelled_as": self.series.modelled,
                "gpus_per_node": self.gpus_per_node,
                "gpus_per_node_source": self.gpus_per_node_source,
                "target_efficiency": self.target_efficiency,
                "confidence": self.confidence,
                "inter_node_gbps_per_node": self.inter_node_gbps,
                "links": {
                    "intra": _link_dict(self.intra) if self.intra else None,
                    "inter": _link_dict(self.inter),
                    "fits": [_link_dict(link) for link in self.fits],
                },
                "workload": {
                    "compute_s": dataclasses.asdict(self.compute),
                    "grad_bytes": dataclasses.asdict(self.grad_bytes),
                    "overlap": dataclasses.asdict(self.overlap),
                    "measured_step_s": {str(w): t for w, t in self.series.step_s.items()},
                },
                "predictions": [_row_dict(r) for r in self.rows],
                "validation": _validation_dict(self.validation),
                "validation_reason": self.validation_reason,
                "assumptions": self.assumptions(),
                "notes": list(self.notes),
            }
        )


def _link_dict(link: Link) -> dict[str, Any]:
    f = link.fit
    return {
        "level": link.level, "kind": link.kind, "group": link.group, "source": link.source,
        "ranks": f.p if link.kind == "measured" else None, "alpha_s": f.alpha_s,
        "alpha_stderr_s": f.alpha_stderr_s, "beta_s_per_byte": f.beta_s_per_byte,
        "beta_stderr_s_per_byte": f.beta_stderr_s_per_byte, "busbw_gbps": f.busbw_gbps,
        "rel_sigma": f.rel_sigma, "dof": f.dof, "num_sizes": len(f.sizes_bytes),
    }  # fmt: skip


def _row_dict(row: Row) -> dict[str, Any]:
    return {
        **dataclasses.asdict(row.step),
        "needed_gbps_per_node": row.needed_gbps,
        "needed_note": row.needed_note,
        "assumed": list(row.assumed),
    }


def _validation_dict(v: Validation | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "compute_s": v.compute_s,
        "fit_sizes": list(v.fit_sizes),
        "points": [p._asdict() for p in v.points],
        "max_abs_rel_error": v.max_abs_rel_error,
    }


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def run_prediction(results: Results, *, target: float) -> Prediction | str | None:
    """The run's prediction at the default GPU counts and ``target`` efficiency; the reason
    when none can be made; None when it does not apply (training or collectives did not run).
    A run's one analysis holds it (the prediction run part's, read as
    :attr:`~clusterbench.analyses.run.RunAnalysis.prediction`)."""
    if not applies(results):
        return None
    try:
        return predict(results, target=target)
    except (ValueError, ArithmeticError) as exc:  # NoPrediction, or inputs the model refuses
        return str(exc)


def applies(results: Results) -> bool:
    """Whether the run's prediction belongs in its findings and report: training and the
    collectives both ran (a run of one GPU has no collectives to measure: asked for is ran)."""
    measured = {m.benchmark for m in results.measurements}
    asked = set(results.run.benchmarks) - set(results.run.skipped)
    return "training" in measured and ("collectives" in measured or "collectives" in asked)


def _checked_counts(counts: Sequence[int], gpus_per_node: int) -> tuple[int, ...]:
    out = sorted(set(counts))
    if not out:
        raise ValueError("--gpus needs at least one GPU count")
    for n in out:
        if isinstance(n, bool) or n < 1:
            raise ValueError(f"GPU counts must be >= 1, got {n}")
        if n > gpus_per_node and n % gpus_per_node:
            raise ValueError(f"{n} GPUs is not a multiple of {gpus_per_node} GPUs per node")
    return tuple(out)


def _compute(
    series: TrainingSeries, links: Links, *, grad_bytes: float, overlap: float
) -> Quantity:
    if 1 in series.step_s:
        return Quantity(
            value=series.step_s[1],
            kind="measured",
            source=f"measured: the training step at 1 {series.unit}"
            + (f" (median of {series.num_steps} steps)" if series.num_steps else ""),
        )
    smallest = min(series.step_s)
    try:
        compute_s = fit_compute_s(
            series.step_s, fit_sizes=[smallest], links=links, grad_bytes=grad_bytes,
            overlap=overlap, strategy=series.modelled,
        )  # fmt: skip
    except ValueError as exc:
        raise NoPrediction(f"no compute time from the step at {smallest}: {exc}") from None
    return Quantity(
        value=compute_s,
        kind="fitted",
        source=f"fitted: the step at {smallest} {series.unit}s less its modelled communication",
    )


def _validation(
    series: TrainingSeries, links: Links, *, grad_bytes: float, overlap: float
) -> tuple[Validation | None, str]:
    sizes = sorted(series.step_s)
    if len(sizes) < 2:
        one = f"one {series.unit} measured: the 1→2 check waits for two {series.unit}s"
        only = one if sizes == [1] else f"only {sizes[0]} {series.unit}s measured"
        return None, f"needs 2 measured world sizes; {only}"
    fit_sizes = sizes[:2] if len(sizes) >= 3 else sizes[:1]
    try:
        v = validate(
            series.step_s, fit_sizes=fit_sizes, links=links, grad_bytes=grad_bytes,
            overlap=overlap, strategy=series.modelled,
        )  # fmt: skip
    except ValueError as exc:
        return None, f"not checked: {exc}"
    return v, ""


def _rests_on(n: int, *, p: _Parts) -> tuple[str, ...]:
    g = p.links.gpus_per_node
    out = []
    if n > 1 and g > 1 and p.intra is not None and p.intra.kind == "assumed":
        out.append("intra-node link")
    if n > g and p.inter.kind == "assumed":
        out.append("inter-node link")
    if n > 1 and p.overlap.kind == "assumed":
        out.append("overlap")
    if n > 1 and p.grad_bytes.kind == "assumed":
        out.append("gradient bytes")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Parts:
    links: Links
    workload: Workload
    intra: Link | None
    inter: Link
    grad_bytes: Quantity
    overlap: Quantity


def _row(n: int, strategy: Strategy, *, p: _Parts, target: float, confidence: float) -> Row:
    step = predict_step(p.workload, p.links, world_size=n, strategy=strategy, confidence=confidence)
    needed, note = None, "within one node"
    if n > p.links.gpus_per_node:
        needed = bandwidth_for_efficiency(
            p.workload, p.links, world_size=n, target=target, strategy=strategy
        )
        note = "" if needed is not None else OUT_OF_REACH
    return Row(step=step, needed_gbps=needed, needed_note=note, assumed=_rests_on(n, p=p))


def _curve_sizes(counts: Sequence[int], gpus_per_node: int, measured: Sequence[int]) -> list[int]:
    """1, the powers of 2 within a node, the node and its doublings, the asked counts and the
    measured sizes that fit the node size: up to the largest count."""
    top, g = max(counts), gpus_per_node
    sizes = {1, *counts, *(w for w in measured if w <= g or w % g == 0)}
    size = 2
    while size <= min(g, top):
        sizes.add(size)
        size *= 2
    size = g
    while size <= top:
        sizes.add(size)
        size *= 2
    return sorted(s for s in sizes if s <= top)


def _strategies(given: Sequence[Strategy] | None, first: Strategy) -> tuple[Strategy, ...]:
    chosen = list(dict.fromkeys(given)) if given else list(STRATEGIES)
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown or not chosen:
        raise ValueError(f"strategies are ddp and fsdp, got {', '.join(map(str, unknown))}")
    return tuple(sorted(chosen, key=lambda s: s != first))


def _links(
    results: Results, fits: Sequence[Link], *, gpus_per_node: int, nic_gbps: float | None
) -> tuple[Link | None, Link, Links]:
    """(intra-node link, inter-node link) predicted with, and the run's own links (at its
    ranks per node, the NIC speed it had), which the compute fit and the validation use."""
    intra = inputs.slowest(fits, "intra") or inputs.assumed_intra(results)
    run_g = inputs.ranks_per_node(results)
    if intra is None and max(gpus_per_node, run_g) > 1:
        raise NoPrediction(
            "the intra-node link is neither measured (a back-to-back all_reduce sweep of the "
            "world on one node, or of the intra_node groups) nor known from a GPU spec"
        )
    rails = inputs.slowest(fits, "inter")
    run_inter = inputs.inter_for(results, measured=rails, gpus_per_node=run_g, nic_gbps=None)
    inter = inputs.inter_for(
        results, measured=rails, gpus_per_node=gpus_per_node, nic_gbps=nic_gbps
    )
    run_intra = intra.fit if intra is not None and run_g > 1 else None
    return intra, inter, Links(gpus_per_node=run_g, intra=run_intra, inter=run_inter.fit)


def predict(
    results: Results,
    *,
    gpu_counts: Sequence[int] = DEFAULT_GPU_COUNTS,
    gpus_per_node: int | None = None,
    nic_gbps: float | None = None,
    strategies: Sequence[Strategy] | None = None,
    target: float = 0.9,
    confidence: float = 0.95,
) -> Prediction:
    """The prediction of ``results`` at ``gpu_counts``.  Raises :class:`NoPrediction` when
    the run lacks what it needs, ValueError for bad arguments."""
    if not 0 < target <= 1:
        raise ValueError(f"the target efficiency must be in (0, 1], got {target}")
    series = inputs.training_series(results)
    g, g_source = inputs.gpus_per_node(results, gpus_per_node, series.unit)
    counts = _checked_counts(gpu_counts, g)
    chosen = _strategies(strategies, series.modelled)
    fits, notes = inputs.measured_links(results)
    intra, inter, run_links = _links(results, fits, gpus_per_node=g, nic_gbps=nic_gbps)
    grad = inputs.gradient_bytes(results, series)
    over = inputs.overlap(results, series)
    kw = {"grad_bytes": grad.value, "overlap": over.value}
    compute = _compute(series, run_links, **kw)
    validation, reason = _validation(series, run_links, **kw)
    links = Links(gpus_per_node=g, intra=intra.fit if intra and g > 1 else None, inter=inter.fit)
    workload = Workload(compute_s=compute.value, grad_bytes=grad.value, overlap=over.value)
    parts = _Parts(links, workload, intra if g > 1 else None, inter, grad, over)
    rows = tuple(
        _row(n, s, p=parts, target=target, confidence=confidence) for n in counts for s in chosen
    )
    curve = tuple(
        predict_step(workload, links, world_size=n, strategy=s, confidence=confidence)
        for s in chosen
        for n in _curve_sizes(counts, g, list(series.step_s))
    )
    if series.strategy != series.modelled:
        notes.append(f"{series.strategy} is modelled as {series.modelled}")
    return Prediction(
        series=series, gpus_per_node=g, gpus_per_node_source=g_source, target_efficiency=target,
        confidence=confidence, intra=parts.intra, inter=inter, fits=tuple(fits), compute=compute,
        grad_bytes=grad, overlap=over, strategies=chosen, rows=rows, curve=curve,
        validation=validation, validation_reason=reason, notes=tuple(notes),
    )  # fmt: skip
