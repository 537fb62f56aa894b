"""The workloads of the ``dataloader`` and ``checkpoint`` benchmarks, and their training step:
a training preset by name, or 'small_cnn', a CPU-sized vision workload built here."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from clusterbench.benchmarks.dataloader.kinds import (
    SMALL_CNN,
    SmallCnn,
    StepPrecision,
    WorkloadName,
    small_cnn_flops,
)
from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.training.strategies import AMP_DTYPES, StepTrainer, Trainer
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.runtime.timing import synchronize

__all__ = [
    "SMALL_CNN",
    "PaddedStep",
    "SmallCnn",
    "StepPrecision",
    "WorkloadName",
    "load_workload",
    "make_train_step",
    "padded_step",
    "small_cnn_flops",
    "small_cnn_workload",
]


def load_workload(
    name: WorkloadName, *, device: torch.device, seq_len: int | None = None
) -> Workload:
    """The workload of preset ``name``; 'small_cnn' is built here, the rest by training.models."""
    if name == SMALL_CNN:
        return small_cnn_workload(device=device)
    return build_workload(name, device=device, seq_len=seq_len)


def small_cnn_workload(
    *, device: torch.device, image_size: int = 56, num_classes: int = 10
) -> Workload:
    """A two-convolution classifier: the vision workload of CPU runs."""
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    ).to(device)
    s = image_size

    def make_batch(n: int) -> Batch:
        x = torch.randn(n, 3, s, s, device=device)
        return x, torch.randint(0, num_classes, (n,), device=device)

    return Workload(
        name=SMALL_CNN,
        kind="vision",
        model=model,
        make_batch=make_batch,
        loss_fn=F.cross_entropy,
        flops_per_sample=small_cnn_flops(image_size=s, num_classes=num_classes),
        flops_formula="3 x forward (2 FLOPs per MAC)",
    )


def make_train_step(workload: Workload, *, precision: StepPrecision = "fp32") -> Trainer:
    """The training step of ``workload`` on one rank, with a fresh AdamW optimizer (mixed
    precision by autocast when ``precision`` is 'bf16')."""
    workload.model.train()
    device = next(workload.model.parameters()).device
    return Trainer(
        model=workload.model,
        optimizer=torch.optim.AdamW(workload.model.parameters(), lr=1e-5),
        loss_fn=workload.loss_fn,
        device_type=device.type,
        autocast_dtype=AMP_DTYPES.get(precision),
    )


@dataclass(frozen=True, slots=True)
class PaddedStep:
    """A training step made to take at least ``seconds``: the step runs, the device finishes,
    then the rank sleeps out the rest (loader workers keep loading meanwhile, as they do while
    a real step of that length runs)."""

    inner: StepTrainer
    seconds: float
    device: torch.device

    def step(self, batches: list[Batch], *, sync: bool = True) -> None:
        t0 = time.perf_counter()
        self.inner.step(batches, sync=sync)
        synchronize(self.device)
        rest = self.seconds - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)

    def last_loss(self) -> float:
        return self.inner.last_loss()


def padded_step(step: StepTrainer, *, seconds: float, device: torch.device) -> StepTrainer:
    """``step`` itself when ``seconds`` is 0, else padded to ``seconds`` (:class:`PaddedStep`)."""
    return PaddedStep(step, seconds, device) if seconds > 0 else step
