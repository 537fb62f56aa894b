"""Step time of data-parallel training at larger GPU counts, from the alpha-beta link fits.

A step on N GPUs (weak scaling: the per-GPU batch stays, so does the per-GPU compute) costs

    step(N) = compute + exposed(comm(N)),   exposed(c) = c - min(overlap * c, compute)

``comm(N)`` is the step's collectives in the cost model of :mod:`comm_model` (docs/reference.md,
"Communication cost model"), ``n`` the gradient bytes of one step, ``g`` GPUs per node and
``k = N / g`` nodes:

* DDP, N <= g: one all_reduce of n over the N GPUs of a node. N > g, hierarchical: intra-node
  reduce_scatter of n, inter-node all_reduce of n/g over the k nodes (one per rail, all g rails
  at once), intra-node all_gather of n.
* FSDP (full sharding, ZeRO stage 3: Rajbhandari et al. 2020, "ZeRO: Memory optimizations
  toward training trillion parameter models", SC20, section 7.2.1; PyTorch FSDP's FULL_SHARD:
  Zhao et al. 2023, "PyTorch FSDP: Experiences on scaling fully sharded data parallel", VLDB
  16(12)): an all_gather of the parameters before forward, another before backward, and a
  reduce_scatter of the gradients, each of n bytes (parameters gathered in the gradients'
  dtype), hierarchical past one node as above (all_gather: inter-node of n/g, then intra-node
  of n; reduce_scatter: the mirror). Every alpha and beta term is 3/2 of DDP's, the ZeRO paper's
  "1.5x" communication volume of stage 3 (3 Psi against 2 Psi).

Which of the two exposed forms: the overlap attribution measures is a fraction of the
communication (communication_overlapped / (overlapped + exposed)), so the fraction form
``c * (1 - overlap)`` is what was observed; but communication hides only under compute running
at the same time, so the hidden part is at most ``compute``. The form ``max(0, c - overlap *
compute)`` would read the overlap as a fraction of the compute, which is not what was measured.

The band: each term's prediction interval (:meth:`Fit.prediction_interval_s` of the link's fit
carried to the term's op and group size) summed end to end, as if the errors of all terms were
fully correlated (they are within one fit, which serves several terms): wider than independent
errors would give. The compute time is taken as given, with no band of its own. No I/O here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from clusterbench.analyses.prediction.comm_model import Algorithm, Fit, coefficients

__all__ = [
    "Links",
    "StepPrediction",
    "Strategy",
    "Term",
    "Validation",
    "ValidationPoint",
    "Workload",
    "bandwidth_for_efficiency",
    "beta_for_node_gbps",
    "collective_terms",
    "fit_compute_s",
    "node_gbps",
    "predict_step",
    "terms_s",
    "validate",
]

Strategy = Literal["ddp", "fsdp"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What one GPU does in one step, measured on few GPUs."""

    compute_s: float
    """Seconds of one step without communication (the step time at world size 1)."""
    grad_bytes: float
    """Gradient bytes of one step: parameters x bytes per gradient element."""
    overlap: float
    """Fraction of the communication hidden under compute, 0..1 (from attribution)."""

    def __post_init__(self) -> None:
        if not (self.compute_s > 0 and math.isfinite(self.compute_s)):
            raise ValueError(f"compute_s must be finite and > 0, got {self.compute_s}")
        if not (self.grad_bytes > 0 and math.isfinite(self.grad_bytes)):
            raise ValueError(f"grad_bytes must be finite and > 0, got {self.grad_bytes}")
        if not 0.0 <= self.overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """The link fits: alpha and beta carry over to every op and group size on that link."""

    gpus_per_node: int
    intra: Fit | None
    """Fit of an intra-node group (None with one GPU per node)."""
    inter: Fit | None
    """Fit of an inter-node group, one GPU per node, measured with all rails busy: its beta is
    one rail's share, so a node's bandwidth is gpus_per_node / beta (None: one node only)."""

    def __post_init__(self) -> None:
        if isinstance(self.gpus_per_node, bool) or self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPrediction:
    """One step at ``world_size`` GPUs; ``_low`` / ``_high`` bound the fits' band."""

    world_size: int
    strategy: Strategy
    compute_s: float
    comm_s: float
    """All of the step's communication, hidden or not."""
    comm_low_s: float
    comm_high_s: float
    exposed_s: float
    """The part of comm_s not hidden under compute."""
    step_s: float
    step_low_s: float
    step_high_s: float
    comm_share: float
    """exposed_s / step_s: the share of the step spent waiting on communication."""
    efficiency: float
    """Weak-scaling efficiency: step time at the base world size / step_s."""
    efficiency_low: float
    efficiency_high: float


def node_gbps(beta_s_per_byte: float, *, gpus_per_node: int) -> float:
    """A node's inter-node bandwidth in Gb/s when each of its rails moves 1 / beta bytes/s."""
    return gpus_per_node / beta_s_per_byte * 8 / 1e9


def beta_for_node_gbps(gbps: float, *, gpus_per_node: int) -> float:
    """One rail's beta (s/B) when a node's ``gbps`` are shared by its ``gpus_per_node`` rails."""
    return gpus_per_node * 8 / (gbps * 1e9)


class Term(NamedTuple):
    """One collective of a step on its link: ``op`` over ``p`` ranks moving ``size_bytes``."""

    fit: Fit
    op: str
    p: int
    size_bytes: float
    inter_node: bool = False


def collective_terms(
    strategy: Strategy, *, world_size: int, size_bytes: float, links: Links
) -> list[Term]:
    """The collectives of one step, each on its link."""
    n, g, big = size_bytes, links.gpus_per_node, world_size > links.gpus_per_node
    if world_size == 1:
        return []
    if big and world_size % g:
        raise ValueError(f"world size {world_size} is not a multiple of {g} GPUs per node")
    if big and links.inter is None:
        raise ValueError(f"world size {world_size} spans nodes but there is no inter-node fit")
    if (not big or g > 1) and links.intra is None:
        raise ValueError(f"world size {world_size} needs an intra-node fit")

    def intra(op: str, p: int) -> Term:
        assert links.intra is not None
        return Term(links.intra, op, p, n)

    if not big:
        ops = ("all_reduce",) if strategy == "ddp" else ("all_gather",) * 2 + ("reduce_scatter",)
        return [intra(op, world_size) for op in ops]
    assert links.inter is not None
    inter, k = links.inter, world_size // g
    local: list[Term] = [] if g == 1 else [intra("reduce_scatter", g), intra("all_gather", g)]
    if strategy == "ddp":
        return [*local, Term(inter, "all_reduce", k, n / g, inter_node=True)]
    gather = [Term(inter, "all_gather", k, n / g, inter_node=True), *local[1:]]
    scatter = [*local[:1], Term(inter, "reduce_scatter", k, n / g, inter_node=True)]
    return [*gather, *gather, *scatter]


def _term_fit(term: Term, algorithm: Algorithm) -> Fit:
    # the link's alpha, beta and covariance, with the term's op and group size
    alg = algorithm if term.op == "all_reduce" else "ring"
    return dataclasses.replace(term.fit, op=term.op, p=term.p, algorithm=alg)


def terms_s(
    terms: Sequence[Term], *, algorithm: Algorithm, confidence: float
) -> tuple[float, float, float]:
    central = low = high = 0.0
    for term in terms:
        fit = _term_fit(term, algorithm)
        central += fit.predict_s(term.size_bytes)
        lo, hi = fit.prediction_interval_s(term.size_bytes, confidence=confidence)
        low, high = low + lo, high + hi
    return central, low, high


def _exposed_s(comm_s: float, workload: Workload) -> float:
    return comm_s - min(workload.overlap * comm_s, workload.compute_s)


def predict_step(
    workload: Workload,
    links: Links,
    *,
    world_size: int,
    strategy: Strategy = "ddp",
    base_world_size: int = 1,
    algorithm: Algorithm = "ring",
    confidence: float = 0.95,
) -> StepPrediction:
    """Step time, communication share and weak-scaling efficiency at ``world_size`` GPUs
    against ``base_world_size`` (``algorithm``: of the all_reduce terms)."""
    if isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    terms = collective_terms(
        strategy, world_size=world_size, size_bytes=workload.grad_bytes, links=links
    )
    comm, comm_low, comm_high = terms_s(terms, algorithm=algorithm, confidence=confidence)
    exposed = _exposed_s(comm, workload)
    step = workload.compute_s + exposed
    base_step = step
    if base_world_size != world_size:
        base_step = predict_step(
            workload, links, world_size=base_world_size, strategy=strategy,
            base_world_size=base_world_size, algorithm=algorithm, confidence=confidence,
        ).step_s  # fmt: skip
    step_low = workload.compute_s + _exposed_s(comm_low, workload)
    step_high = workload.compute_s + _exposed_s(comm_high, workload)
    return StepPrediction(
        world_size=world_size, strategy=strategy, compute_s=workload.compute_s, comm_s=comm,
        comm_low_s=comm_low, comm_high_s=comm_high, exposed_s=exposed, step_s=step,
        step_low_s=step_low, step_high_s=step_high, comm_share=exposed / step,
        efficiency=base_step / step, efficiency_low=base_step / step_high,
        efficiency_high=base_step / step_low,
    )  # fmt: skip


def bandwidth_for_efficiency(
    workload: Workload,
    links: Links,
    *,
    world_size: int,
    target: float = 0.9,
    strategy: Strategy = "ddp",
    base_world_size: int = 1,
    algorithm: Algorithm = "ring",
) -> float | None:
    """Inter-node Gb/s per node for which the predicted efficiency at ``world_size`` is exactly
    ``target`` (any more keeps it above), keeping the inter-node fit's alpha.

    None when the target is out of reach even with infinite bandwidth: the latency (alpha) terms
    and the intra-node traffic alone already cost more exposed time than the target allows.
    Closed form: comm = A + B * beta is linear in the inter-node beta and ``exposed`` is
    increasing and piecewise linear, so the comm time the target allows is
    ``c* = min(E* / (1 - overlap), E* + compute)`` with ``E* = base step / target - compute``.
    """
    if not 0 < target <= 1:
        raise ValueError(f"target efficiency must be in (0, 1], got {target}")
    g = links.gpus_per_node
    if world_size <= g:
        raise ValueError(f"world size {world_size} fits in one node: no inter-node traffic")
    if base_world_size > g:
        raise ValueError(f"base world size {base_world_size} must fit in one node ({g} GPUs)")
    base = predict_step(
        workload, links, world_size=base_world_size, strategy=strategy,
        base_world_size=base_world_size, algorithm=algorithm,
    ).step_s  # fmt: skip
    allowed_exposed = base / target - workload.compute_s
    if allowed_exposed <= 0:
        return None
    allowed_comm = allowed_exposed + workload.compute_s
    if workload.overlap < 1:
        allowed_comm = min(allowed_exposed / (1 - workload.overlap), allowed_comm)
    terms = collective_terms(
        strategy, world_size=world_size, size_bytes=workload.grad_bytes, links=links
    )
    fixed = 0.0  # A: everything but the inter-node bytes
    per_beta = 0.0  # B: the inter-node seconds per unit of beta
    for term in terms:
        fit = _term_fit(term, algorithm)
        if term.inter_node:
            a, b = coefficients(fit.op, p=fit.p, algorithm=fit.algorithm)
            fixed += a * fit.alpha_s
            per_beta += b * term.size_bytes
        else:
            fixed += fit.predict_s(term.size_bytes)
    if allowed_comm <= fixed:
        return None
    return node_gbps((allowed_comm - fixed) / per_beta, gpus_per_node=g)


class ValidationPoint(NamedTuple):
    world_size: int
    predicted_s: float
    measured_s: float
    rel_error: float
    """(predicted - measured) / measured."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """The model fitted on the smaller world sizes, checked on the larger ones."""

    compute_s: float
    """The compute time fitted on the fit sizes."""
    fit_sizes: tuple[int, ...]
    points: tuple[ValidationPoint, ...]

    @property
    def max_abs_rel_error(self) -> float:
        return max(abs(p.rel_error) for p in self.points)


def fit_compute_s(
    measured: Mapping[int, float],
    *,
    fit_sizes: Sequence[int],
    links: Links,
    grad_bytes: float,
    overlap: float,
    strategy: Strategy = "ddp",
    algorithm: Algorithm = "ring",
) -> float:
    """The compute time that makes the model's step times closest to ``measured`` (world size
    -> seconds) on ``fit_sizes``: least squares on the relative error, the link fits and the
    overlap taken as given (at world size 1 alone, the measured step itself)."""
    fit_set = sorted(set(fit_sizes))
    missing = [w for w in fit_set if w not in measured]
    if not fit_set or missing:
        raise ValueError(f"fit sizes need measured step times: missing {missing or 'all'}")
    if any(not (measured[w] > 0 and math.isfinite(measured[w])) for w in fit_set):
        raise ValueError("measured step times must be finite and > 0")

    def loss(compute_s: float) -> float:
        return sum(
            (_step_s(compute_s, w, links=links, grad_bytes=grad_bytes, overlap=overlap,
                     strategy=strategy, algorithm=algorithm) / measured[w] - 1.0) ** 2
            for w in fit_set
        )  # fmt: skip

    upper = max(measured[w] for w in fit_set)
    return golden_section_min(loss, upper * 1e-9, upper, xatol=upper * 1e-12)


_GOLDEN = (math.sqrt(5) - 1) / 2


def golden_section_min(
    f: Callable[[float], float], low: float, high: float, *, xatol: float, grid: int = 200
) -> float:
    """The x in [low, high] (0 < low) where ``f`` is least, to within ``xatol``: ``grid``
    points spaced evenly in log between the bounds find the best neighbourhood (a step-time fit
    may have more than one local minimum, and one at a bound), then the golden-section search
    narrows it (each step keeps the 0.618 of the interval that holds the minimum).  Never worse
    than scipy's bounded ``minimize_scalar`` (a local search), without importing scipy.optimize
    (0.26 s)."""
    ratio = (high / low) ** (1 / (grid - 1))
    xs = [low * ratio**i for i in range(grid - 1)] + [high]
    values = [f(x) for x in xs]
    best = min(range(grid), key=values.__getitem__)
    a, b = xs[max(best - 1, 0)], xs[min(best + 1, grid - 1)]
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    while b - a > xatol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    inside = (a + b) / 2
    return inside if f(inside) <= values[best] else xs[best]


def _step_s(
    compute_s: float,
    world_size: int,
    *,
    links: Links,
    grad_bytes: float,
    overlap: float,
    strategy: Strategy,
    algorithm: Algorithm,
) -> float:
    w = Workload(compute_s=compute_s, grad_bytes=grad_bytes, overlap=overlap)
    return predict_step(
        w, links, world_size=world_size, strategy=strategy, base_world_size=world_size,
        algorithm=algorithm,
    ).step_s  # fmt: skip


def validate(
    measured: Mapping[int, float],
    *,
    fit_sizes: Sequence[int],
    links: Links,
    grad_bytes: float,
    overlap: float,
    strategy: Strategy = "ddp",
    algorithm: Algorithm = "ring",
) -> Validation:
    """The model's own error: ``measured`` maps world size -> measured step seconds.

    On ``fit_sizes`` the model's one free quantity, the compute time, is fitted
    (:func:`fit_compute_s`); every other measured size is predicted and compared. A fit size
    whose step is all communication (comm - compute exposed, the compute hidden under it) says
    nothing about the compute time: include a size whose step is not.
    """
    if any(not (t > 0 and math.isfinite(t)) for t in measured.values()):
        raise ValueError("measured step times must be finite and > 0")
    compute_s = fit_compute_s(
        measured, fit_sizes=fit_sizes, links=links, grad_bytes=grad_bytes, overlap=overlap,
        strategy=strategy, algorithm=algorithm,
    )  # fmt: skip
    fit_set = sorted(set(fit_sizes))
    checked = sorted(w for w in measured if w not in fit_set)
    if not checked:
        raise ValueError("no measured world size is left to check the prediction on")

    def step(world_size: int) -> float:
        return _step_s(
            compute_s, world_size, links=links, grad_bytes=grad_bytes, overlap=overlap,
            strategy=strategy, algorithm=algorithm,
        )  # fmt: skip

    points = tuple(
        ValidationPoint(w, p, measured[w], (p - measured[w]) / measured[w])
        for w in checked
        for p in (step(w),)
    )
    return Validation(compute_s=compute_s, fit_sizes=tuple(fit_set), points=points)
