"""The dataloader benchmark's choices, without torch: image formats, the small CNN's name, the
step precisions and the workloads it may train (read by its settings, its duration model and the
CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from clusterbench.model_shapes import Model

ImageFormat = Literal["jpeg", "png"]


SmallCnn = Literal["small_cnn"]
WorkloadName = Literal[Model, SmallCnn]
"""What :func:`load_workload` builds: a ``training`` preset, or the CPU-sized classifier."""
StepPrecision = Literal["fp32", "bf16"]
"""The training step's precisions here (no GradScaler for fp16)."""

SERIAL_MARGIN = 20.0
"""Without workers the training process loads each batch between steps: the device waits
t_load / (t_load + t_step), so a loader 20x the step's demand leaves it waiting under 5%
(busy >= 95%, clear of the 90% input-bound threshold)."""


def worker_counts(configured: Sequence[int], *, cores: int) -> list[int]:
    """The worker counts to sweep, ascending: ``configured`` capped at ``cores``, or (empty)
    0, 1, 2, 4, ... up to ``cores``, ``cores`` itself last."""
    if configured:
        return sorted({min(n, cores) for n in configured})
    counts, n = [0], 1
    while n < cores:
        counts.append(n)
        n *= 2
    return [*counts, max(1, cores)]


SMALL_CNN: SmallCnn = "small_cnn"


def small_cnn_flops(*, image_size: int = 56, num_classes: int = 10) -> float:
    """Training FLOPs of one image through :func:`small_cnn_workload`: 3 x forward."""
    s = image_size
    # multiply-accumulates of one forward: conv1, conv2 (stride 2 each), the linear head
    macs = (s // 2) ** 2 * 16 * 27 + (s // 4) ** 2 * 32 * 16 * 9 + 32 * num_classes
    return 3.0 * 2 * macs
