"""The optimizers and weight layouts the ``weight_update`` benchmark steps, without torch: their
names, each one's family and implementation, and the bytes one parameter's update moves (read by
its settings, its duration model and analysis)."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "LAYOUTS",
    "OPTIMIZERS",
    "OPTIMIZER_SPECS",
    "Family",
    "Impl",
    "Layout",
    "OptimizerName",
    "OptimizerSpec",
    "bytes_per_param",
]

OptimizerName = Literal[
    "adamw_fused", "adamw_foreach", "adamw_forloop", "sgd_fused", "sgd_foreach", "sgd_forloop"
]
"""torch.optim.AdamW or SGD (momentum) with ``fused=True``, ``foreach=True`` or neither."""
Layout = Literal["fp32", "bf16_master", "fp16_master"]
Family = Literal["adamw", "sgd"]
Impl = Literal["fused", "foreach", "forloop"]
OPTIMIZERS: tuple[OptimizerName, ...] = typing.get_args(OptimizerName)
LAYOUTS: tuple[Layout, ...] = typing.get_args(Layout)


@dataclass(frozen=True, slots=True)
class OptimizerSpec:
    family: Family
    impl: Impl


OPTIMIZER_SPECS: dict[OptimizerName, OptimizerSpec] = {
    "adamw_fused": OptimizerSpec(family="adamw", impl="fused"),
    "adamw_foreach": OptimizerSpec(family="adamw", impl="foreach"),
    "adamw_forloop": OptimizerSpec(family="adamw", impl="forloop"),
    "sgd_fused": OptimizerSpec(family="sgd", impl="fused"),
    "sgd_foreach": OptimizerSpec(family="sgd", impl="foreach"),
    "sgd_forloop": OptimizerSpec(family="sgd", impl="forloop"),
}

_FP32 = 4
_HALF = 2
_STATE_TENSORS = {"adamw": 2, "sgd": 1}  # exp_avg and exp_avg_sq; momentum_buffer (fp32 each)


def bytes_per_param(family: Family, layout: Layout) -> int:
    """Bytes one parameter's update must move (read + written), tensor by tensor:

    - the fp32 step reads the parameter, its gradient and the optimizer state and writes the
      parameter and the state: AdamW (state exp_avg, exp_avg_sq) 16 + 12 = 28 B; SGD with
      momentum (state momentum_buffer) 12 + 8 = 20 B;
    - the master layouts add the cast of the half gradient into the fp32 master gradient
      (read 2, write 4) and the write-back of the master weight into the half parameter
      (read 4, write 2): +12 B; fp16 also GradScaler's unscale and inf/NaN check, which reads
      and writes every master gradient in place (+8 B; under a fused step the check still
      passes over the gradients and the step unscales in its kernel).
    """
    state = _STATE_TENSORS[family] * _FP32
    step = (_FP32 + _FP32 + state) + (_FP32 + state)  # read param, grad, state; write both
    if layout == "fp32":
        return step
    cast = _HALF + _FP32  # read the half gradient, write the master gradient
    write_back = _FP32 + _HALF  # read the master weight, write the half parameter
    unscale = (_FP32 + _FP32) if layout == "fp16_master" else 0
    return cast + unscale + step + write_back
