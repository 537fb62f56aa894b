"""What a training workload is, for every Level 3 benchmark (training, dataloader, checkpoint).

A workload bundles a model, how to make one synthetic batch, the loss, and the model FLOPs of
one sample, so that throughput, MFU, input-pipeline and checkpoint costs are all measured on
the same thing.  ``build_workload`` (in :mod:`.models`) makes one from a preset name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

__all__ = ["Batch", "Workload", "WorkloadKind"]

WorkloadKind = Literal["decoder", "vision", "encoder"]
Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(kw_only=True)
class Workload:
    name: str
    """Preset name, e.g. 'tiny', '1.3b', 'resnet50', 'vit_b_16'."""
    kind: WorkloadKind
    model: nn.Module
    """On its device, in float32 parameters (mixed precision is applied by the caller)."""
    make_batch: Callable[[int], Batch]
    """Synthetic (inputs, targets) of ``batch_size`` samples on the model's device."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """loss_fn(model(inputs), targets) -> scalar loss."""
    flops_per_sample: float
    """Model FLOPs of forward + backward for one sample (training, no recomputation)."""
    tokens_per_sample: int = 1
    """Sequence length for decoders (throughput is reported in tokens/s); 1 for images."""
    flops_formula: str = ""
    """Which formula gave flops_per_sample, e.g. '6N + 12LHQT (PaLM appendix B)'."""
    recompute_flops_per_sample: float = 0.0
    """FLOPs that full activation checkpointing adds per sample (one more forward of the
    checkpointed blocks); hardware FLOPs = flops_per_sample + this.  0: unknown."""
    block_paths: tuple[str, ...] = ()
    """Dotted paths of the containers whose children are the repeated blocks (e.g. 'layers'):
    the units that training strategies checkpoint, compile and shard one by one."""
