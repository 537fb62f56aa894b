"""The alpha-beta cost model: the formulas, the fit on synthetic timings with known alpha and
beta, its uncertainty and the points taken from collectives measurements (the fit of a real CPU
sweep is in tests/integration/test_comm_model.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusterbench.analyses.prediction.comm_model import (
    Algorithm,
    Fit,
    coefficients,
    collectives_fit,
    collectives_points,
    cost_s,
    fit_alpha_beta,
)
from clusterbench.benchmarks.collectives import CollectivesMetrics as C
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement, ParamValue

ALPHA_S = 12e-6  # 12 us per step
BETA_S_PER_BYTE = 1 / 40e9  # 40 GB/s
SIZES = [2**e for e in range(3, 34)]  # 8 B .. 8 GiB, as the GPU sweep


def synthetic(
    op: str,
    *,
    p: int,
    algorithm: Algorithm = "ring",
    sizes: list[int] = SIZES,
    noise: float = 0.01,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """Model times of ``op`` with multiplicative Gaussian noise of relative sd ``noise``."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        t = cost_s(
            op, p=p, size_bytes=n, alpha_s=ALPHA_S, beta_s_per_byte=BETA_S_PER_BYTE,
            algorithm=algorithm,
        )  # fmt: skip
        out.append((float(n), t * (1 + noise * rng.standard_normal())))
    return out


def test_formulas_follow_the_cost_model() -> None:
    # ring all_reduce over 4 ranks: 2(p-1) = 6 steps, 2(p-1)/p = 1.5 bytes per byte
    assert coefficients("all_reduce", p=4) == (6.0, 1.5)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert coefficients(op, p=4) == (3.0, 0.75)
    assert coefficients("all_reduce", p=8, algorithm="tree") == (6.0, 2.0)
    assert coefficients("all_reduce", p=6, algorithm="tree") == (6.0, 2.0)  # ceil(log2 6) = 3
    t = cost_s("all_reduce", p=4, size_bytes=1e6, alpha_s=1e-5, beta_s_per_byte=1e-10)
    assert t == pytest.approx(6e-5 + 1.5e-4)


@pytest.mark.parametrize(
    ("op", "algorithm", "p"),
    [
        ("all_reduce", "ring", 8),
        ("all_reduce", "ring", 2),
        ("all_gather", "ring", 8),
        ("reduce_scatter", "ring", 4),
        ("all_to_all", "ring", 16),
        ("all_reduce", "tree", 64),
    ],
)
def test_fit_recovers_known_alpha_and_beta(op: str, algorithm: Algorithm, p: int) -> None:
    fit = fit_alpha_beta(synthetic(op, p=p, algorithm=algorithm), op=op, p=p, algorithm=algorithm)
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=0.02)
    assert fit.beta_s_per_byte == pytest.approx(BETA_S_PER_BYTE, rel=0.02)
    assert fit.busbw_gbps == pytest.approx(40.0, rel=0.02)
    # the true values lie within 4 standard errors of the estimates
    assert abs(fit.alpha_s - ALPHA_S) < 4 * fit.alpha_stderr_s
    assert abs(fit.beta_s_per_byte - BETA_S_PER_BYTE) < 4 * fit.beta_stderr_s_per_byte
    assert fit.rel_sigma == pytest.approx(0.01, rel=0.4)
    assert fit.dof == len(SIZES) - 2 and len(fit.residuals_s) == len(SIZES)
    measured = np.array(fit.times_s)
    model = np.array([fit.predict_s(n) for n in fit.sizes_bytes])
    assert np.allclose(measured - model, fit.residuals_s)


def test_fit_without_noise_is_exact_and_has_zero_error() -> None:
    fit = fit_alpha_beta(synthetic("all_gather", p=4, noise=0.0), op="all_gather", p=4)
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-9)
    assert fit.beta_s_per_byte == pytest.approx(BETA_S_PER_BYTE, rel=1e-9)
    assert fit.rel_sigma == pytest.approx(0.0, abs=1e-9)


def test_uncertainty_shrinks_with_more_points_and_less_noise() -> None:
    def fit_of(sizes: list[int], noise: float) -> Fit:
        return fit_alpha_beta(
            synthetic("all_reduce", p=8, sizes=sizes, noise=noise), op="all_reduce", p=8
        )

    few, many = SIZES[::6], [2**e for e in np.arange(3, 34, 0.25)]
    noisy, quiet = fit_of(SIZES, 0.05), fit_of(SIZES, 0.005)
    assert quiet.alpha_stderr_s < noisy.alpha_stderr_s / 3
    assert quiet.beta_stderr_s_per_byte < noisy.beta_stderr_s_per_byte / 3
    f_few, f_many = fit_of(few, 0.02), fit_of([int(n) for n in many], 0.02)
    assert f_many.alpha_stderr_s < f_few.alpha_stderr_s
    assert f_many.beta_stderr_s_per_byte < f_few.beta_stderr_s_per_byte
    n = 2**26
    widths = [f.prediction_interval_s(n)[1] - f.prediction_interval_s(n)[0] for f in (noisy, quiet)]
    assert widths[1] < widths[0] / 3
    lo, hi = noisy.prediction_interval_s(n, confidence=0.5)
    lo99, hi99 = noisy.prediction_interval_s(n, confidence=0.99)
    assert lo99 < lo < noisy.predict_s(n) < hi < hi99


def test_prediction_interval_covers_new_measurements() -> None:
    fit = fit_alpha_beta(synthetic("all_reduce", p=8, noise=0.03), op="all_reduce", p=8)
    fresh = synthetic("all_reduce", p=8, noise=0.03, seed=7)
    inside = [lo <= t <= hi for n, t in fresh for lo, hi in [fit.prediction_interval_s(n)]]
    assert sum(inside) / len(inside) >= 0.85


def test_two_sizes_fit_exactly_with_unknown_error() -> None:
    fit = fit_alpha_beta(synthetic("all_gather", p=2, sizes=[8, 2**30], noise=0.0),
                         op="all_gather", p=2)  # fmt: skip
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-6)
    assert fit.dof == 0 and math.isinf(fit.alpha_stderr_s)
    assert fit.prediction_interval_s(2**20) == (0.0, math.inf)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"points": [(1024, 1e-5)], "op": "all_reduce", "p": 8}, "at least 2 sizes"),
        ({"points": [(1024, 1e-5), (1024, 2e-5)], "op": "all_reduce", "p": 8}, "at least 2"),
        ({"points": [], "op": "all_reduce", "p": 8}, "at least 2 sizes"),
        ({"points": [(8, 1e-5), (1024, 2e-5)], "op": "all_reduce", "p": 1}, "p >= 2"),
        ({"points": [(8, 1e-5), (1024, 2e-5)], "op": "all_reduce", "p": 0}, "p >= 2"),
        ({"points": [(8, 1e-5), (1024, -2e-5)], "op": "all_reduce", "p": 2}, "time_s > 0"),
        ({"points": [(8, 1e-5), (1024, math.nan)], "op": "all_reduce", "p": 2}, "finite"),
        ({"points": [(8, 1e-5), (1024, 2e-5)], "op": "broadcast", "p": 2}, "no cost formula"),
        ({"points": [(8, 1e-5), (16, 2e-5)], "op": "all_gather", "p": 2, "algorithm": "tree"},
         "no cost formula"),
        ({"points": [(8, 2e-5), (2**20, 1e-5)], "op": "all_gather", "p": 2}, "do not grow"),
    ],
)  # fmt: skip
def test_bad_input_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_alpha_beta(**kwargs)


# --- from collectives measurements ---------------------------------------------------------


def make(metric: Metric, value: float, **params: ParamValue) -> Measurement:
    """A measurement of ``metric`` as the collectives benchmark records it."""
    return Measurement(
        benchmark=metric.benchmark, metric=metric.name, value=value, unit=metric.unit,
        params=params, rank=0, host="node0", device="cuda:0",
    )  # fmt: skip


def sweep_measurements(op: str, *, group: str, p: int, kind: str = "world") -> list[Measurement]:
    """latency_us, algbw and busbw of a model sweep in both timing modes (blocking 10% slower)."""
    out = []
    for n, t in synthetic(op, p=p, sizes=SIZES[::3], noise=0.0):
        for mode, factor in (("back_to_back", 1.0), ("blocking", 1.1)):
            params: dict[str, ParamValue] = {
                "op": op, "size_bytes": int(n), "group": group, "group_kind": kind,
                "group_size": p, "mode": mode, "dtype": "bf16",
            }  # fmt: skip
            t_mode = t * factor
            out += [
                make(C.latency_us, t_mode * 1e6, **params),
                make(C.algbw, n / t_mode / 1e9, **params),
                make(C.busbw, n / t_mode / 1e9 * 2 * (p - 1) / p, **params),
            ]
    return out


def test_points_come_from_back_to_back_latency_of_the_group() -> None:
    ms = [
        *sweep_measurements("all_reduce", group="world", p=8),
        *sweep_measurements("all_reduce", group="node0", p=4, kind="intra_node"),
        *sweep_measurements("all_gather", group="world", p=8),
    ]
    p, points = collectives_points(ms, op="all_reduce", group="world")
    expected = synthetic("all_reduce", p=8, sizes=SIZES[::3], noise=0.0)
    assert p == 8 and len(points) == len(expected)
    for (n, t), (n_exp, t_exp) in zip(points, expected, strict=True):
        assert n == n_exp and t == pytest.approx(t_exp, rel=1e-12)  # us -> s, not blocking
    fit = collectives_fit(ms, op="all_reduce", group="world")
    assert fit.p == 8 and fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(BETA_S_PER_BYTE, rel=1e-6)
    p4, _ = collectives_points(ms, op="all_reduce", group="node0")
    assert p4 == 4
    with pytest.raises(ValueError, match="no back-to-back collectives latency of all_to_all"):
        collectives_points(ms, op="all_to_all", group="world")


# --- a real sweep ---------------------------------------------------------------------------
