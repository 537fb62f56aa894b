"""The weight_update benchmark on the CPU, called directly: the byte formulas against sums done
by hand, the float64 reference against torch's own optimizers, the check catching wrong
updates, and the settings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.weight_update import WeightUpdateConfig
from clusterbench.benchmarks.weight_update import measure as wu
from clusterbench.benchmarks.weight_update import step as steps
from clusterbench.benchmarks.weight_update.measure import weight_update
from clusterbench.config import ConfigError, build_run_config
from clusterbench.schema import Measurement
from tests.helpers import one_rank_ctx

TINY_PARAMS = sum(
    p.numel() for p in build_workload("tiny", device=torch.device("cpu")).model.parameters()
)


def run(cfg: WeightUpdateConfig) -> list[Measurement]:
    return list(weight_update(one_rank_ctx("weight_update"), cfg))


def pick(ms: list[Measurement], metric: str, **params: object) -> list[Measurement]:
    return [
        m for m in ms if m.metric == metric and all(m.params.get(k) == v for k, v in params.items())
    ]


# --- the bytes one parameter's update must move ------------------------------------------------


@pytest.mark.parametrize(
    ("family", "layout", "expected"),
    [
        # AdamW, fp32: read param 4 + grad 4 + exp_avg 4 + exp_avg_sq 4 = 16,
        # write param 4 + exp_avg 4 + exp_avg_sq 4 = 12
        ("adamw", "fp32", 16 + 12),
        # SGD with momentum, fp32: read param, grad, momentum_buffer = 12, write param, buffer = 8
        ("sgd", "fp32", 12 + 8),
        # bf16 with fp32 master weights: cast (read bf16 grad 2, write fp32 grad 4), the fp32
        # step, write-back (read fp32 master 4, write bf16 param 2)
        ("adamw", "bf16_master", (2 + 4) + 28 + (4 + 2)),
        ("sgd", "bf16_master", (2 + 4) + 20 + (4 + 2)),
        # fp16 adds GradScaler's in-place unscale and inf check of the fp32 grads (read 4, write 4)
        ("adamw", "fp16_master", (2 + 4) + (4 + 4) + 28 + (4 + 2)),
        ("sgd", "fp16_master", (2 + 4) + (4 + 4) + 20 + (4 + 2)),
    ],
)
def test_bytes_per_param_by_hand(family: steps.Family, layout: steps.Layout, expected: int) -> None:
    assert steps.bytes_per_param(family, layout) == expected


def test_the_numbers_behind_the_formulas() -> None:
    assert (steps.bytes_per_param("adamw", "fp32"), steps.bytes_per_param("sgd", "fp32")) == (
        28,
        20,
    )
    assert steps.bytes_per_param("adamw", "bf16_master") == 40
    assert steps.bytes_per_param("adamw", "fp16_master") == 48
    assert steps.bytes_per_param("sgd", "fp16_master") == 40


# --- the float64 reference -------------------------------------------------------------------


@pytest.mark.parametrize("family", ["adamw", "sgd"])
def test_reference_is_torchs_algorithm(family: steps.Family) -> None:
    """The hand-written reference and torch's for-loop optimizer, both in float64, agree to
    rounding: the reference is the algorithm torch documents (and runs)."""
    torch.manual_seed(0)
    theta0 = torch.randn(300, dtype=torch.float64) * 0.02
    grad = torch.randn(300, dtype=torch.float64) * 1e-3
    param = torch.nn.Parameter(theta0.clone())
    param.grad = grad.clone()
    name: steps.OptimizerName = "adamw_forloop" if family == "adamw" else "sgd_forloop"
    opt = steps.make_optimizer(name, [param])
    for _ in range(7):
        opt.step()
    want = steps.reference_update(theta0, grad, family=family, num_steps=7)
    assert torch.allclose(param.detach(), want, rtol=0, atol=1e-15)
    assert (want - theta0).abs().max() > 1e-4  # the 7 updates did move the weights


def test_check_update_scales_with_the_update() -> None:
    before = torch.full((10,), 0.5)
    reference = before.double() - 1e-3  # every weight moved by 1e-3
    error, tol = steps.check_update(
        before=before, after=(before - 1e-3), reference=reference, num_steps=4
    )
    assert error < 1e-4 and tol == pytest.approx(1e-3 + 4 * 2**-23 * 0.5 / 1e-3)
    wrong = before - 0.9e-3  # 10% short of the reference
    error, tol = steps.check_update(before=before, after=wrong, reference=reference, num_steps=4)
    assert error == pytest.approx(0.1, rel=1e-3) and error > tol


# --- the benchmark on a real model --------------------------------------------------------------


def test_every_optimizer_and_layout_is_measured_and_checked() -> None:
    cfg = WeightUpdateConfig(warmup=1, repeats=3)
    ms = run(cfg)
    for optimizer in steps.OPTIMIZERS:
        for layout in steps.LAYOUTS:
            where = {"optimizer": optimizer, "layout": layout}
            (bw,) = pick(ms, "bandwidth", **where)
            (t,) = pick(ms, "step_time_ms", **where)
            (err,) = pick(ms, "update_rel_error", **where)
            family = steps.OPTIMIZER_SPECS[optimizer].family
            per_param = steps.bytes_per_param(family, layout)
            assert bw.params == {
                "model": "tiny", "optimizer": optimizer, "layout": layout,
                "num_params": TINY_PARAMS, "bytes_per_param": per_param,
            }  # fmt: skip
            assert bw.unit == "GB/s" and bw.value > 0 and bw.stats and bw.stats.samples == 3
            # GB/s = bytes per param x params / median time / 1e9 (3 repeats: one median)
            assert bw.value == pytest.approx(per_param * TINY_PARAMS / (t.value / 1e3) / 1e9)
            tolerance = err.params["tolerance"]
            assert isinstance(tolerance, float) and 0 <= err.value < tolerance < 0.01


def wrong_lr(real: Callable[..., torch.optim.Optimizer]) -> Callable[..., torch.optim.Optimizer]:
    def make(name: steps.OptimizerName, params: list[torch.Tensor]) -> torch.optim.Optimizer:
        opt = real(name, params)
        for group in opt.param_groups:
            group["lr"] *= 1.1  # 10% off the reference's
        return opt

    return make


@pytest.mark.parametrize("optimizer", ["adamw_fused", "sgd_foreach"])
def test_a_wrong_update_fails_the_measurement(
    monkeypatch: pytest.MonkeyPatch, optimizer: steps.OptimizerName
) -> None:
    monkeypatch.setattr(steps, "make_optimizer", wrong_lr(steps.make_optimizer))
    cfg = WeightUpdateConfig(optimizers=[optimizer], layouts=["bf16_master"], warmup=1, repeats=2)
    seen: list[Measurement] = []
    with pytest.raises(RuntimeError, match=rf"{optimizer} \(bf16_master\).*off the float64"):
        seen.extend(weight_update(one_rank_ctx("weight_update"), cfg))
    assert seen == []  # nothing recorded of a wrong update


def test_an_update_skipped_by_the_loss_scaler_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """fp16 gradients that overflowed (all but the checked parameter's): GradScaler skips every
    step, which the check sees."""
    real = steps.prepare_layout

    def overflowed(layout: steps.Layout, params: list[torch.Tensor]) -> steps.LayoutTensors:
        tensors = real(layout, params)
        checked = wu._checked_index(params)
        for i, g in enumerate(tensors.half_grads):
            if i != checked:
                g[..., 0] = float("inf")
        return tensors

    monkeypatch.setattr(steps, "prepare_layout", overflowed)
    cfg = WeightUpdateConfig(optimizers=["adamw_foreach"], layouts=["fp16_master"], repeats=2)
    with pytest.raises(RuntimeError, match="off the float64 reference"):
        run(cfg)


def test_a_missing_write_back_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = steps.update_fn

    def no_write_back(tensors: steps.LayoutTensors, *args: object) -> Callable[[], None]:
        update = real(tensors, *args)  # type: ignore[arg-type]
        kept = [h.clone() for h in tensors.half_params]

        def then_undo() -> None:
            update()
            for h, old in zip(tensors.half_params, kept, strict=True):
                h.copy_(old)

        return then_undo

    monkeypatch.setattr(steps, "update_fn", no_write_back)
    cfg = WeightUpdateConfig(optimizers=["sgd_fused"], layouts=["bf16_master"], repeats=2)
    with pytest.raises(RuntimeError, match="write-back did not happen"):
        run(cfg)


def test_the_checked_parameter_is_the_largest_that_fits() -> None:
    params = [torch.empty(n) for n in (10, 2**22 + 1, 2**22, 7)]
    assert wu._checked_index(params) == 2
    assert wu._checked_index([torch.empty(2**23), torch.empty(2**24)]) == 0


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"optimizers": []},
        {"layouts": []},
        {"optimizers": ["lamb"]},
        {"layouts": ["fp8_master"]},
        {"warmup": 0},
        {"repeats": 0},
        {"model": "gpt5"},
    ],
)
def test_bad_settings_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WeightUpdateConfig(**kwargs)  # type: ignore[arg-type]


def test_presets() -> None:
    cpu = WeightUpdateConfig.preset(suite="standard", device_type="cpu")
    assert cpu.model == "tiny" and cpu.optimizers == list(steps.OPTIMIZERS)
    standard = WeightUpdateConfig.preset(suite="standard", device_type="cuda")
    assert standard.model == "1.3b" and len(standard.layouts) == 3
    assert standard.optimizers == ["adamw_fused", "adamw_foreach", "sgd_fused", "sgd_foreach"]
    full = WeightUpdateConfig.preset(suite="full", device_type="cuda")
    assert full.optimizers == list(steps.OPTIMIZERS) and full.repeats > standard.repeats


def test_the_model_is_the_training_workloads() -> None:
    cfg = build_run_config(device_type="cpu", only=["weight_update"], sets=["training.model=125m"])
    assert cfg.benchmarks["weight_update"].model == "125m"
    cfg = build_run_config(
        device_type="cpu",
        only=["training", "weight_update"],
        sets=["weight_update.model=bert_tiny", "training.model=125m"],
    )
    assert cfg.benchmarks["weight_update"].model == "bert_tiny"  # its own setting wins
    assert cfg.benchmarks["training"].model == "125m"
    with pytest.raises(ConfigError, match=r"weight_update\.layouts"):
        build_run_config(
            device_type="cpu", only=["weight_update"], sets=["weight_update.layouts=fp8"]
        )
