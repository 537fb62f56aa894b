"""What one weight update does and moves: the optimizers, the parameter layouts, the bytes per
parameter each must move, and the float64 reference every result is checked against.

Layouts (docs/reference.md, "Weight update"):

- ``fp32``: fp32 parameters and gradients, as autocast trains (the ``training`` benchmark's bf16
  and fp16 precisions keep fp32 weights); the update is ``optimizer.step()``.
- ``bf16_master`` / ``fp16_master``: the model holds bf16 / fp16 parameters and gradients, the
  optimizer fp32 master weights, in the order Megatron-LM's ``Float16OptimizerWithFloat16Params``
  runs them: the half gradients are cast into the master gradients, (fp16) unscaled and checked
  for inf/NaN by ``torch.amp.GradScaler``, the master weights stepped, then written back into the
  half parameters.

The bytes are the ones the update must move, tensor by tensor (:func:`bytes_per_param`), not
the traffic a given implementation makes: foreach and for-loop steps also write and re-read
temporaries, so their GB/s is an effective rate (the necessary bytes over the time taken).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from clusterbench.benchmarks.training.blocks import LR
from clusterbench.benchmarks.weight_update.optimizers import (
    LAYOUTS,
    OPTIMIZER_SPECS,
    OPTIMIZERS,
    Family,
    Impl,
    Layout,
    OptimizerName,
    OptimizerSpec,
    bytes_per_param,
)

__all__ = [
    "LAYOUTS",
    "OPTIMIZERS",
    "OPTIMIZER_SPECS",
    "Family",
    "Impl",
    "Layout",
    "LayoutTensors",
    "OptimizerName",
    "OptimizerSpec",
    "bytes_per_param",
    "check_update",
    "check_written_back",
    "make_optimizer",
    "make_scaler",
    "prepare_layout",
    "reference_update",
    "update_fn",
]
HALF_DTYPES: dict[Layout, torch.dtype] = {
    "bf16_master": torch.bfloat16,
    "fp16_master": torch.float16,
}

# AdamW as the training benchmark steps it: its learning rate, torch's default betas, eps and
# weight decay (torch.optim.AdamW).
ADAMW_BETAS = (0.9, 0.999)
ADAMW_EPS = 1e-8
ADAMW_WEIGHT_DECAY = 1e-2
# SGD as ResNet-50 trains (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): momentum 0.9,
# weight decay 1e-4; no dampening, no Nesterov.
SGD_LR = 0.01
SGD_MOMENTUM = 0.9
SGD_WEIGHT_DECAY = 1e-4
_GRAD_STD = 1e-3
"""The gradients' scale (random normal, never zeros: an optimizer may skip zero work)."""
_LOSS_SCALE = 2.0**10
"""fp16: the loss scale the half gradients carry (GradScaler's own default, 2^16, would
overflow fp16 with gradients of ~1e-3 times a normal draw's tails)."""
_NO_GROWTH = 2**30
"""GradScaler's growth interval: longer than any run, so the scale stays constant (a run sits
between two growth steps, as almost every training step does)."""


def make_optimizer(name: OptimizerName, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (fp32 leaves with their ``.grad``)."""
    spec = OPTIMIZER_SPECS[name]
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}
    kwargs = impl[spec.impl]
    if spec.family == "adamw":
        return torch.optim.AdamW(
            params, lr=LR, betas=ADAMW_BETAS, eps=ADAMW_EPS, weight_decay=ADAMW_WEIGHT_DECAY,
            **kwargs,
        )  # fmt: skip
    return torch.optim.SGD(
        params, lr=SGD_LR, momentum=SGD_MOMENTUM, weight_decay=SGD_WEIGHT_DECAY, **kwargs
    )


def make_scaler(layout: Layout, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16: a GradScaler at the half gradients' loss scale, already initialised (as the
    scaled loss of a training step initialises it); None for the other layouts."""
    if layout != "fp16_master":
        return None
    scaler = torch.amp.GradScaler(device.type, init_scale=_LOSS_SCALE, growth_interval=_NO_GROWTH)
    scaler.scale(torch.ones((), device=device))  # creates the scale on the device
    return scaler


@dataclass(slots=True)
class LayoutTensors:
    """One layout's tensors: the fp32 leaves the optimizer steps (each with its ``.grad``)
    and, in a master layout, the model's half parameters and gradients."""

    layout: Layout
    params: list[torch.Tensor]
    """The model's fp32 parameters: the optimizer's weights (master weights in a master
    layout)."""
    half_params: list[torch.Tensor] = field(default_factory=list)
    half_grads: list[torch.Tensor] = field(default_factory=list)
    """The gradients as the backward leaves them (fp16: times the loss scale)."""
    loss_scale: float = 1.0

    def gradient(self, index: int) -> torch.Tensor:
        """Parameter ``index``'s true (unscaled) gradient in float64."""
        if not self.half_grads:
            grad = self.params[index].grad
            assert grad is not None
            return grad.to(torch.float64)
        return self.half_grads[index].to(torch.float64) / self.loss_scale

    def release(self) -> None:
        """Drop the layout's gradients and half tensors (the weights stay the caller's)."""
        for p in self.params:
            p.grad = None
        self.params = []
        self.half_params = []
        self.half_grads = []


def prepare_layout(layout: Layout, params: list[torch.Tensor]) -> LayoutTensors:
    """The gradients of ``layout``, filled once with random values, and its half parameters."""
    if layout == "fp32":
        for p in params:
            p.grad = torch.randn_like(p).mul_(_GRAD_STD)
        return LayoutTensors(layout=layout, params=params)
    dtype = HALF_DTYPES[layout]
    scale = _LOSS_SCALE if layout == "fp16_master" else 1.0
    for p in params:
        p.grad = torch.empty_like(p)  # the master gradient, written by the cast every step
    with torch.no_grad():
        half_params = [p.detach().to(dtype) for p in params]
        half_grads = [torch.randn_like(p).mul_(_GRAD_STD * scale).to(dtype) for p in params]
    return LayoutTensors(
        layout=layout, params=params, half_params=half_params, half_grads=half_grads,
        loss_scale=scale,
    )  # fmt: skip


def update_fn(
    tensors: LayoutTensors,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
) -> Callable[[], None]:
    """One weight update of the layout, as a function to time."""
    if tensors.layout == "fp32":

        def step() -> None:
            optimizer.step()

        return step
    master_grads = [g for p in tensors.params if (g := p.grad) is not None]
    assert len(master_grads) == len(tensors.params), "prepare_layout gives every weight a grad"
    masters = [p.detach() for p in tensors.params]

    @torch.no_grad()
    def update() -> None:
        torch._foreach_copy_(master_grads, tensors.half_grads)  # cast: read 2 B, write 4 B
        if scaler is None:
            optimizer.step()
        else:  # unscale and check for inf/NaN, step unless found, then the scale's update
            scaler.step(optimizer)
            scaler.update()
        torch._foreach_copy_(tensors.half_params, masters)  # write back: read 4 B, write 2 B

    return update


def reference_update(
    before: torch.Tensor, grad: torch.Tensor, *, family: Family, num_steps: int
) -> torch.Tensor:
    """The weights after ``num_steps`` updates from ``before`` with the constant ``grad``
    and a fresh optimizer state, in float64: the algorithms as torch.optim.AdamW's and SGD's
    documentation writes them, independently of torch's implementations."""
    theta = before.to(torch.float64, copy=True)
    g = grad.to(torch.float64)
    if family == "adamw":
        beta1, beta2 = ADAMW_BETAS
        m = torch.zeros_like(theta)
        v = torch.zeros_like(theta)
        for t in range(1, num_steps + 1):
            theta.mul_(1 - LR * ADAMW_WEIGHT_DECAY)  # decoupled weight decay
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            m_hat = m / (1 - beta1**t)
            v_hat = v / (1 - beta2**t)
            theta.sub_(LR * m_hat / (v_hat.sqrt() + ADAMW_EPS))
        return theta
    buf: torch.Tensor | None = None
    for _ in range(num_steps):
        d = g + SGD_WEIGHT_DECAY * theta
        buf = d if buf is None else buf.mul_(SGD_MOMENTUM).add_(d)  # first step: buf = d
        theta.sub_(SGD_LR * buf)
    return theta


_RTOL = 1e-3
"""Of the largest reference update: fp32 arithmetic over the steps is far closer than that;
a step not taken, a wrong learning rate or a lost state is far further off."""
_FP32_EPS = 2.0**-23


def check_update(
    *, before: torch.Tensor, after: torch.Tensor, reference: torch.Tensor, num_steps: int
) -> tuple[float, float]:
    """(error, tolerance) of an update against its reference, both relative to the largest
    reference update: ``max |(after - before) - (reference - before)| / max |reference -
    before|``.  The tolerance is :data:`_RTOL` plus one fp32 rounding step of the largest
    weight per update (the decay and the step each round to half a unit in the last place)."""
    before64 = before.to(torch.float64)
    want = reference - before64
    scale = float(want.abs().max())
    if not scale > 0:
        raise ValueError("the reference update moves no weight: nothing to check against")
    err = float(((after.to(torch.float64) - before64) - want).abs().max())
    ulps = num_steps * _FP32_EPS * float(before64.abs().max())
    return err / scale, _RTOL + ulps / scale


def check_written_back(tensors: LayoutTensors, index: int) -> None:
    """A master layout's half parameter ``index`` must be its master weight, rounded."""
    if not tensors.half_params:
        return
    half = tensors.half_params[index]
    if not torch.equal(half, tensors.params[index].detach().to(half.dtype)):
        raise RuntimeError(
            f"weight_update: {tensors.layout}: the {half.dtype} parameters differ from their "
            "fp32 master weights after the update (the write-back did not happen)"
        )
