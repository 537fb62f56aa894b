"""What every strategy does to a workload's model, pipeline stages included: activation
checkpointing and torch.compile block by block, and the optimizer."""

from __future__ import annotations

import torch
from torch import nn

from clusterbench.benchmarks.training.settings import Case

__all__ = ["LR", "iter_blocks", "make_optimizer", "prepare_blocks"]

LR = 1e-4  # small enough that the synthetic loss stays finite for every preset


def prepare_blocks(model: nn.Module, *, case: Case, block_paths: tuple[str, ...]) -> None:
    """Activation checkpointing (non-reentrant) and torch.compile, block by block."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    if case.compile:
        # Blocks share one forward whose input shapes differ along the model (ResNet's stages):
        # each shape gets its own static graph, never a slower dynamic-shape one after a recompile
        torch._dynamo.config.automatic_dynamic_shapes = False
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    for _, block, parent in iter_blocks(model, block_paths):
        wrapped = checkpoint_wrapper(block) if case.activation_checkpointing else block
        if case.compile:
            # in place: parameter names stay as they are
            wrapped.compile(mode="reduce-overhead" if case.cuda_graphs else None)
        if wrapped is not block:
            parent.register_module(_name_in(parent, block), wrapped)


def iter_blocks(
    model: nn.Module, block_paths: tuple[str, ...]
) -> list[tuple[str, nn.Module, nn.Module]]:
    """(path, block, its container) for every child of the containers at ``block_paths``."""
    out = []
    for path in block_paths:
        container = model.get_submodule(path)
        for name, child in container.named_children():
            out.append((f"{path}.{name}", child, container))
    return out


def _name_in(parent: nn.Module, child: nn.Module) -> str:
    return next(name for name, c in parent.named_children() if c is child)


def make_optimizer(params: list[nn.Parameter], *, device: torch.device) -> torch.optim.Optimizer:
    """AdamW, fused on CUDA; DTensor and plain parameters in separate groups (a fused or
    foreach kernel takes one kind per call)."""
    from torch.distributed.tensor import DTensor

    dtensors = [p for p in params if isinstance(p, DTensor)]
    plain = [p for p in params if not isinstance(p, DTensor)]
    groups = [{"params": g} for g in (dtensors, plain) if g]
    return torch.optim.AdamW(groups, lr=LR, fused=device.type == "cuda" or None)
