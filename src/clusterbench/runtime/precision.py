"""Float32 matmul precision for a block of work, restored afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["matmul_precision"]


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """fp32 strictly (TF32 off in matmuls and cuDNN), TF32 for 'tf32'; restored afterwards.
    Mixed-precision runs keep TF32 off for the float32 parts autocast leaves.

    torch.set_float32_matmul_precision works unchanged from torch 1.12 to 2.13 (no deprecation
    warning, unlike allow_tf32 on >= 2.9): "high" lets cuBLAS use TF32, "highest" forbids it."""
    before = torch.get_float32_matmul_precision()
    cudnn_before = torch.backends.cudnn.allow_tf32
    allow = precision == "tf32"
    torch.set_float32_matmul_precision("high" if allow else "highest")
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
        torch.backends.cudnn.allow_tf32 = cudnn_before
