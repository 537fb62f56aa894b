"""The alpha-beta (latency-bandwidth, Hockney) cost model of collectives, fitted to a size sweep.

One op over ``p`` ranks moving ``n`` bytes (``n`` as nccl-tests counts it, docs/reference.md)
costs ``T = a(p) * alpha + b(p) * n * beta``: ``alpha`` is the latency of one step (seconds),
``beta`` the time per byte on the link (seconds per byte, 1 / bandwidth). The coefficients
(Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in
MPICH"; ring all_reduce as its ring reduce-scatter followed by its ring all-gather):

==============  =========  ==============  ==================
op              algorithm  a(p)            b(p)
==============  =========  ==============  ==================
all_reduce      ring       2(p-1)          2(p-1)/p
all_reduce      tree       2 ceil(log2 p)  2
all_gather      ring       p-1             (p-1)/p
reduce_scatter  ring       p-1             (p-1)/p
all_to_all      ring       p-1             (p-1)/p (pairwise exchange)
send_recv       ring       1               1 (one message)
==============  =========  ==============  ==================

For the ring forms ``b(p)`` is the nccl-tests bus factor F, so ``1 / beta`` is the busbw the op
reaches at large sizes. Reduction arithmetic (Thakur's gamma) is not separated: it is part of
the fitted beta.

:func:`fit_alpha_beta` fits ``alpha`` and ``beta`` to measured (size, time) points of one group by
least squares on relative residuals (timings spread over orders of magnitude and their noise is
about proportional to the time), with ``alpha >= 0`` and ``beta > 0``; :func:`collectives_fit`
takes them from the collectives benchmark's back-to-back ``latency_us``. No I/O here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from clusterbench.collective_facts import bus_factor
from clusterbench.declared.collectives import CollectivesMetrics
from clusterbench.schema import Measurement, Results

if TYPE_CHECKING:  # numpy is imported where used: a run without a prediction needs none
    import numpy as np

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Fit",
    "coefficients",
    "collectives_fit",
    "collectives_points",
    "cost_s",
    "fit_alpha_beta",
]

Algorithm = Literal["ring", "tree"]
ALGORITHMS: tuple[Algorithm, ...] = ("ring", "tree")

_Coeffs = Callable[[int], tuple[float, float]]
# The bandwidth term of a ring algorithm is the bytes each rank moves per byte of the message:
# nccl-tests' bus factor, from the one table of per-op facts (collective_facts.py).
_CHUNKED: _Coeffs = lambda p: (p - 1.0, bus_factor("all_gather", p))  # noqa: E731
_FORMULAS: dict[tuple[str, Algorithm], _Coeffs] = {
    # ring reduce-scatter then ring all-gather (Thakur et al. 2005, sections 4.4 and 4.5)
    ("all_reduce", "ring"): lambda p: (2.0 * (p - 1), bus_factor("all_reduce", p)),
    # reduce up, broadcast down a pipelined binary tree (NCCL's double binary trees): the
    # latency of the tree's depth twice, each byte over a link once each way
    ("all_reduce", "tree"): lambda p: (2.0 * math.ceil(math.log2(p)), 2.0),
    ("all_gather", "ring"): _CHUNKED,  # ring all-gather (Thakur et al. 2005, section 4.1)
    ("reduce_scatter", "ring"): _CHUNKED,  # ring / pairwise reduce-scatter (section 4.5)
    ("all_to_all", "ring"): _CHUNKED,  # pairwise exchange, p-1 steps of n/p (section 4.6)
    ("send_recv", "ring"): lambda p: (1.0, bus_factor("send_recv", p)),  # Hockney: one message
}


def coefficients(op: str, *, p: int, algorithm: Algorithm = "ring") -> tuple[float, float]:
    """``(a, b)`` of ``T = a * alpha + b * n * beta`` for ``op`` over ``p`` ranks."""
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise ValueError(f"the cost model needs p >= 2 ranks, got {p!r}")
    formula = _FORMULAS.get((op, algorithm))
    if formula is None:
        known = ", ".join(f"{o}/{a}" for o, a in _FORMULAS)
        raise ValueError(f"no cost formula for {op} with algorithm {algorithm!r} (known: {known})")
    return formula(p)


def cost_s(
    op: str,
    *,
    p: int,
    size_bytes: float,
    alpha_s: float,
    beta_s_per_byte: float,
    algorithm: Algorithm = "ring",
) -> float:
    """Seconds one ``op`` of ``size_bytes`` takes over ``p`` ranks in the alpha-beta model."""
    a, b = coefficients(op, p=p, algorithm=algorithm)
    return a * alpha_s + b * size_bytes * beta_s_per_byte


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    """alpha and beta fitted to one group's size sweep of one op, with their uncertainty."""

    op: str
    algorithm: Algorithm
    p: int
    """Ranks in the group."""
    alpha_s: float
    """Latency of one step, seconds (>= 0)."""
    beta_s_per_byte: float
    """Time per byte on the link, seconds per byte (> 0); 1 / beta is the bus bandwidth."""
    alpha_stderr_s: float
    """Standard error of alpha from the residuals (inf with no degree of freedom left)."""
    beta_stderr_s_per_byte: float
    """Standard error of beta from the residuals (inf with no degree of freedom left)."""
    sizes_bytes: tuple[float, ...]
    times_s: tuple[float, ...]
    """The measured points the fit was made on."""
    residuals_s: tuple[float, ...]
    """Measured minus modelled time of each point, seconds."""
    rel_sigma: float
    """Residual standard deviation of the relative error (measured - model) / measured, the
    root of ``sum(relative residual^2) / dof``; inf when dof is 0."""
    dof: int
    """Degrees of freedom left: points - 2."""
    covariance: tuple[tuple[float, float], tuple[float, float]]
    """Covariance of (alpha, beta)."""

    @property
    def busbw_gbps(self) -> float:
        """1 / beta in GB/s (1e9 B/s): the busbw the model reaches at large sizes."""
        return 1.0 / self.beta_s_per_byte / 1e9

    def predict_s(self, size_bytes: float) -> float:
        """Modelled seconds of one op of ``size_bytes``."""
        return cost_s(
            self.op, p=self.p, size_bytes=size_bytes, alpha_s=self.alpha_s,
            beta_s_per_byte=self.beta_s_per_byte, algorithm=self.algorithm,
        )  # fmt: skip

    def prediction_interval_s(
        self, size_bytes: float, *, confidence: float = 0.95
    ) -> tuple[float, float]:
        """Interval in which a new measurement of ``size_bytes`` falls with ``confidence``:
        t_hat +- t_q(dof) * sqrt(x' C x + (rel_sigma * t_hat)^2), lower end at least 0.
        t_q is Student's t quantile (:func:`student_t_quantile`)."""
        import numpy as np

        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        t_hat = self.predict_s(size_bytes)
        if self.dof < 1:
            return 0.0, math.inf
        a, b = coefficients(self.op, p=self.p, algorithm=self.algorithm)
        x = np.array([a, b * size_bytes])
        var = float(x @ np.array(self.covariance) @ x) + (self.rel_sigma * t_hat) ** 2
        half = student_t_quantile(self.dof, confidence) * math.sqrt(max(var, 0.0))
        return max(0.0, t_hat - half), t_hat + half


def fit_alpha_beta(
    points: Iterable[tuple[float, float]], *, op: str, p: int, algorithm: Algorithm = "ring"
) -> Fit:
    """alpha and beta of ``op`` over ``p`` ranks from measured ``(size_bytes, time_s)`` points.

    Least squares on the relative residual ``(t - a*alpha - b*n*beta) / t`` with alpha >= 0 and
    beta >= 0 (:func:`nonnegative_least_squares`); the covariance is
    ``rel_sigma^2 (X_w' X_w)^-1`` of the weighted design matrix ``X_w``.
    """
    import numpy as np

    a, b = coefficients(op, p=p, algorithm=algorithm)
    sizes, times = _checked_points(points)
    design = np.column_stack([np.full_like(sizes, a), b * sizes])
    # columns scaled to about 1 so that alpha (~1e-5 s) and beta (~1e-11 s/B) are both resolved
    scale = 1.0 / np.abs(design / times[:, None]).max(axis=0)
    weighted = design / times[:, None] * scale
    solved = nonnegative_least_squares(weighted, np.ones_like(times))
    alpha, beta = (float(v) for v in solved * scale)
    if beta <= 0:
        raise ValueError(f"{op}: the times do not grow with the message size, beta fits as 0")
    model = design @ np.array([alpha, beta])
    dof = len(times) - 2
    rel_sigma = math.sqrt(float(np.sum((1.0 - model / times) ** 2)) / dof) if dof else math.inf
    cov = _covariance(weighted, scale, rel_sigma)
    return Fit(
        op=op, algorithm=algorithm, p=p, alpha_s=alpha, beta_s_per_byte=beta,
        alpha_stderr_s=math.sqrt(cov[0][0]), beta_stderr_s_per_byte=math.sqrt(cov[1][1]),
        sizes_bytes=tuple(sizes.tolist()), times_s=tuple(times.tolist()),
        residuals_s=tuple((times - model).tolist()), rel_sigma=rel_sigma, dof=dof,
        covariance=cov,
    )  # fmt: skip


@functools.cache
def student_t_quantile(dof: int, confidence: float) -> float:
    """The t with P(|T| <= t) = ``confidence`` for Student's t of ``dof`` (an integer >= 1)
    degrees of freedom: the two-sided quantile, ``scipy.stats.t.ppf(0.5 + confidence / 2,
    dof)``, without importing scipy (0.2-0.5 s).  P(|T| <= t) of integer dof is a finite sum in
    theta = atan(t / sqrt(dof)) (Abramowitz and Stegun 26.7.3-4), increasing in theta on
    [0, pi/2); bisection on theta finds it to machine precision."""
    if dof < 1 or int(dof) != dof:
        raise ValueError(f"degrees of freedom must be an integer >= 1, got {dof}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    low, high = 0.0, math.pi / 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_two_sided(mid, int(dof)) < confidence:
            low = mid
        else:
            high = mid
        if high - low <= 1e-17:
            break
    return math.sqrt(dof) * math.tan((low + high) / 2)


def _t_two_sided(theta: float, dof: int) -> float:
    """P(|T| <= sqrt(dof) tan(theta)) for Student's t of ``dof`` degrees of freedom."""
    c2 = math.cos(theta) ** 2
    if dof % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ...))
        series, term = 0.0, 1.0
        for k in range(1, (dof - 1) // 2 + 1):
            series += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * series)
    series, term = 0.0, 1.0  # even: sin (1 + 1/2 c2 + 1*3/(2*4) c2^2 + ...)
    for k in range(1, dof // 2 + 1):
        series += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return math.sin(theta) * series


def nonnegative_least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The x >= 0 of two columns that minimises ``|design @ x - target|``: the unconstrained
    solution where both are >= 0, else the better of each column alone (clipped at 0).  With
    two unknowns the optimum has at most one of them at its bound, so these candidates hold it
    (the KKT conditions); scipy's bounded solvers give the same x, at 0.26 s of import that a
    command reading a run should not pay."""
    import numpy as np

    if design.shape[1] != 2:
        raise ValueError(f"two columns expected, got {design.shape[1]}")
    gram = design.T @ design
    rhs = design.T @ target
    candidates = []
    if abs(np.linalg.det(gram)) > 1e-300:
        both = np.linalg.solve(gram, rhs)
        if (both >= 0).all():
            return both
    for j in range(2):
        x = np.zeros(2)
        if gram[j, j] > 0:
            x[j] = max(0.0, float(rhs[j] / gram[j, j]))
        candidates.append(x)
    return min(candidates, key=lambda x: float(np.sum((design @ x - target) ** 2)))


def _checked_points(points: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    pts = sorted((float(s), float(t)) for s, t in points)
    if any(not (math.isfinite(s) and math.isfinite(t)) or s <= 0 or t <= 0 for s, t in pts):
        raise ValueError("every point needs a finite size_bytes > 0 and time_s > 0")
    if len({s for s, _ in pts}) < 2:
        raise ValueError(f"fitting alpha and beta needs at least 2 sizes, got {len(pts)} points")
    arr = np.array(pts, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def _covariance(
    weighted: np.ndarray, scale: np.ndarray, rel_sigma: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    import numpy as np

    if not math.isfinite(rel_sigma):
        return (math.inf, math.inf), (math.inf, math.inf)
    c = rel_sigma**2 * np.linalg.inv(weighted.T @ weighted) * np.outer(scale, scale)
    return (float(c[0, 0]), float(c[0, 1])), (float(c[1, 0]), float(c[1, 1]))


def collectives_points(
    source: Results | Sequence[Measurement], *, op: str, group: str
) -> tuple[int, list[tuple[float, float]]]:
    """``(group_size, [(size_bytes, seconds per op), ...])`` of ``op`` on ``group`` from the
    collectives benchmark's back-to-back ``latency_us`` (the mean over the group's ranks of
    total time / iters, microseconds)."""
    ms = [
        m
        for m in CollectivesMetrics.latency_us.select(source)
        if m.params.get("op") == op
        and m.params.get("group") == group
        and m.params.get("mode") == "back_to_back"
    ]
    if not ms:
        raise ValueError(f"no back-to-back collectives latency of {op} on group {group}")
    group_sizes = {m.params.get("group_size") for m in ms}
    if len(group_sizes) != 1:
        raise ValueError(f"group {group} has several sizes in the results: {group_sizes}")
    p = group_sizes.pop()
    if not isinstance(p, int) or isinstance(p, bool):
        raise ValueError(f"group {group}: group_size {p!r} is not a rank count")
    points = []
    for m in ms:
        size = m.params.get("size_bytes")
        if not isinstance(size, int | float) or isinstance(size, bool):
            raise ValueError(f"{op} on {group}: size_bytes {size!r} is not a number")
        points.append((float(size), m.value * 1e-6))
    return p, sorted(points)


def collectives_fit(
    source: Results | Sequence[Measurement],
    *,
    op: str,
    group: str,
    algorithm: Algorithm = "ring",
) -> Fit:
    """:func:`fit_alpha_beta` on :func:`collectives_points` of ``op`` on ``group``."""
    p, points = collectives_points(source, op=op, group=group)
    return fit_alpha_beta(points, op=op, p=p, algorithm=algorithm)
