"""The checkpoint benchmark's pure parts: sizes, the stopping rule, the α–β fit and its held-out
error, the predicted seconds, and bounding a state to a size."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from clusterbench.benchmarks.checkpoint import fit as fit
from clusterbench.benchmarks.checkpoint import io as io


def test_halving_sizes() -> None:
    assert fit.halving_sizes(8 << 30, 3) == [2 << 30, 4 << 30, 8 << 30]
    assert fit.halving_sizes(1000, 1) == [1000]
    assert fit.halving_sizes(3, 4) == [1, 1, 1, 3]  # never below one byte
    with pytest.raises(ValueError):
        fit.halving_sizes(0, 2)


def test_is_stable_stops_on_a_small_spread_not_before_the_minimum() -> None:
    rule = {"min_repeats": 2, "max_repeats": 5, "target_cv": 0.05}
    assert not fit.is_stable([[1.0], [2.0]], **rule)  # one round: below the minimum
    assert fit.is_stable([[1.0, 1.02], [2.0, 2.01]], **rule)  # both series within 5%
    # one series spread (CV of 1.0, 1.5 is 28%): go on, until the maximum
    assert not fit.is_stable([[1.0, 1.02], [1.0, 1.5]], **rule)
    assert not fit.is_stable([[1.0] * 4, [1.0, 1.5, 1.0, 1.5]], **rule)
    assert fit.is_stable([[1.0] * 5, [1.0, 1.5, 1.0, 1.5, 1.0]], **rule)
    # a maximum below the minimum wins; target 0 means always the maximum
    assert fit.is_stable([[1.0]], min_repeats=3, max_repeats=1, target_cv=0.05)
    assert not fit.is_stable([[1.0, 1.01, 1.0]], min_repeats=2, max_repeats=4, target_cv=0.0)
    assert fit.is_stable([[1.0, 1.01, 1.0, 1.0]], min_repeats=2, max_repeats=4, target_cv=0.0)


def test_fit_line_recovers_alpha_and_beta() -> None:
    alpha, gbps = 0.25, 1.6
    sizes = [1e9, 2e9, 4e9]
    seconds = [alpha + s / (gbps * 1e9) for s in sizes]
    line = fit.fit_line(sizes, seconds)
    assert line.alpha_s == pytest.approx(alpha)
    assert line.gbps == pytest.approx(gbps)
    # t = α + N·B/β: 70e9 parameters at 12 B/param
    want = alpha + 70e9 * 12 / (gbps * 1e9)
    got = fit.predicted_seconds(line, num_params=70_000_000_000, bytes_per_param=12.0)
    assert got == pytest.approx(want)


def test_fit_line_falls_back_to_the_origin() -> None:
    # a negative intercept (the larger size relatively faster): α = 0, the slope kept
    # (Theil-Sen: the median of the slopes 1.0, 0.9 s/GB between the two sizes)
    line = fit.fit_line([1e9, 2e9, 2e9], [0.5, 1.5, 1.4])
    assert line.alpha_s == 0.0 and line.gbps == pytest.approx(1 / 0.95)
    # a slope that is not positive: the median rate of the largest size, 2/1.8 GB/s
    flat = fit.fit_line([1e9, 2e9, 2e9, 2e9], [2.0, 1.9, 1.8, 1.7])
    assert flat.alpha_s == 0.0 and flat.gbps == pytest.approx(2 / 1.8)
    one = fit.fit_line([3e9, 3e9, 3e9], [2.0, 2.2, 1.9])  # one size: its median rate
    assert one.alpha_s == 0.0 and one.gbps == pytest.approx(1.5)
    with pytest.raises(ValueError):
        fit.fit_line([1e9, 2e9], [1.0, 0.0])


def test_fit_line_shrugs_off_one_slow_round() -> None:
    """Three rounds at each of three sizes, one of them 3x slow: the line stays on the others
    (a least-squares line through them would be 40% off at 8 GB)."""
    sizes = [s for s in (1e9, 2e9, 4e9) for _ in range(3)]
    seconds = [0.1 + s / 2e9 for s in sizes]
    seconds[7] *= 3  # the middle round of the largest size
    line = fit.fit_line(sizes, seconds)
    assert line.seconds(8e9) == pytest.approx(0.1 + 8e9 / 2e9, rel=0.02)
    slope, alpha = np.polyfit(sizes, seconds, 1)
    assert abs(alpha + slope * 8e9 - 4.1) / 4.1 > 0.3


def test_held_out_error_is_the_error_at_the_largest_size() -> None:
    sizes = [1e9, 2e9, 4e9]
    linear = [0.1 + s / 2e9 for s in sizes]
    assert fit.held_out_error_pct(sizes, linear) == pytest.approx(0.0, abs=1e-9)
    # the largest took 3.0 s (median of its rounds) where the line through the other two
    # says 2.1 s: -30%
    bent = [*linear[:2], 2.9, 3.0, 3.3]
    assert fit.held_out_error_pct([*sizes[:2], 4e9, 4e9, 4e9], bent) == pytest.approx(
        100 * (2.1 - 3.0) / 3.0
    )
    assert fit.held_out_error_pct(sizes[:2], linear[:2]) is None  # nothing to hold out


def test_model_sizes_label_and_dedupe() -> None:
    sizes = fit.model_sizes(workload="1.3b", workload_params=1_420_396_544, billions=[7, 70, 7])
    assert [(m.label, m.num_params) for m in sizes] == [
        ("1.3b", 1_420_396_544), ("7B", 7_000_000_000), ("70B", 70_000_000_000),
    ]  # fmt: skip
    assert fit.model_sizes(workload="x", workload_params=5, billions=[0.5])[1].label == "0.5B"
    with pytest.raises(ValueError):
        fit.model_sizes(workload="x", workload_params=5, billions=[0])


def test_pick_within_is_greedy_in_order() -> None:
    sizes = [("emb", 6), ("a", 2), ("b", 3), ("c", 2)]
    assert io.pick_within(sizes, 7) == ["emb"]  # emb fits; a, b and c would pass 7 after it
    assert io.pick_within(sizes, 5) == ["a", "b"]  # emb passed over, c does not fit after b
    assert io.pick_within(sizes, 1) == ["a"]  # none fits: the smallest alone
    assert io.pick_within([], 10) == []


def _state() -> dict[str, object]:
    model = {f"w{i}": torch.full((100 * (i + 1),), float(i)) for i in range(4)}
    per_param = {k: {"step": torch.tensor(1.0), "exp_avg": torch.zeros_like(t),
                     "exp_avg_sq": torch.zeros_like(t)} for k, t in model.items()}  # fmt: skip
    groups = [{"lr": 0.1, "params": list(model)}]
    return {"model": model, "optim": {"state": per_param, "param_groups": groups}}


def test_bounded_state_keeps_each_parameter_with_its_optimizer_state() -> None:
    state = _state()
    whole = io.nbytes(state)
    assert whole == 3 * 4 * (100 + 200 + 300 + 400) + 4 * 4  # fp32 weight, m, v; 4 steps
    assert io.bounded_state(state, whole) is state
    half = io.bounded_state(state, whole // 2)
    kept = list(half["model"])
    assert 0 < io.nbytes(half) <= whole // 2 and kept
    assert list(half["optim"]["state"]) == kept
    assert half["optim"]["param_groups"] == [{"lr": 0.1, "params": kept}]
    # 3 x 4 x (100 + 200 + 300) + 12 = 7212 bytes fit in 7500: w0, w1, w2
    assert list(io.bounded_state(state, 7500)["model"]) == ["w0", "w1", "w2"]
    weights = io.bounded_weights(state["model"], 2000)  # type: ignore[arg-type]
    assert list(weights) == ["w0", "w1"] and io.nbytes(weights) == 1200


def test_nbytes_counts_a_shared_tensor_once() -> None:
    w = torch.zeros(10)
    assert io.nbytes({"emb": w, "head": w}) == 40
    assert io.nbytes({"a": w[:5], "b": w[5:]}) == 40  # two halves of one storage
    assert math.isclose(io.nbytes({"x": torch.zeros(3, dtype=torch.bfloat16)}), 6)
