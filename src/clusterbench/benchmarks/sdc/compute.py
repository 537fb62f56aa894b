"""What the ``sdc`` check computes on each device: fixed inputs, the GEMM chain, the hash of a
result, the difference between two results, and the group of devices that must agree.

Inputs are drawn as integers from a ``torch.Generator`` seeded alike on every rank and scaled
by powers of two, so they are exact in fp32, bf16 and fp16 (a float draw could differ between
CPUs with and without AVX2 in its last bits; an integer draw cannot). A GPU draws its own: the
Philox generator's bits for one seed depend on the launch layout, which the GPU model and SM
count, torch and CUDA fix, and those are what a peer group already shares
(:func:`peer_group`), so the devices that are compared draw the same bits. A CPU generator
(Mersenne Twister) is sequential: 45-90 M elements/s a case on a 2-core VM; on one H200's host
drawing the standard preset's 667 M elements on the GPU instead took the check from 11.2 s to
7.8 s (docs/results/H200-suite-times.md).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import platform

import torch

from clusterbench.benchmarks.sdc.settings import Case
from clusterbench.runtime.dist import DistContext

__all__ = [
    "INT_VIEW",
    "TORCH_DTYPES",
    "Case",
    "chain",
    "diff",
    "flip_bit",
    "make_inputs",
    "peer_group",
    "result_hash",
]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
"""The integer type of each float's width: results are compared, and a bit flipped, through it."""
_DRAW = 128
"""Inputs are integers in [-128, 128] times a power of two: exact with bf16's 8-bit significand."""


def _draw(rows: int, cols: int, *, gen: torch.Generator, scale_exp: int) -> torch.Tensor:
    ints = torch.randint(
        -_DRAW, _DRAW + 1, (rows, cols), generator=gen, dtype=torch.int32, device=gen.device
    )
    return ints.to(torch.float32) * 2.0**scale_exp


def _scale_exp(inner: int) -> int:
    """The power of two that keeps a product's entries near the size of its inputs': entries
    of [-1, 1] have variance 1/3, and a sum of ``inner`` products with entries of variance
    1/inner keeps it, so B's entries are [-1, 1] times the power of two nearest sqrt(3/inner)."""
    return round(math.log2(math.sqrt(3 / inner))) - round(math.log2(_DRAW))


def make_inputs(
    case: Case, *, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A (M x K), B1 (K x N) and B2 (N x K) from ``seed``, drawn on ``device``: the same bits
    on every device of one peer group."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = TORCH_DTYPES[case.dtype]
    a = _draw(case.m, case.k, gen=gen, scale_exp=-round(math.log2(_DRAW)))
    b1 = _draw(case.k, case.n, gen=gen, scale_exp=_scale_exp(case.k))
    b2 = _draw(case.n, case.k, gen=gen, scale_exp=_scale_exp(case.n))
    return tuple(t.to(dtype) for t in (a, b1, b2))  # type: ignore[return-value]


def chain(a: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor, *, depth: int) -> torch.Tensor:
    """``depth`` dependent products: A @ B1, then that @ B2, then @ B1 ... (each rounded to
    the dtype), so a unit that errs once spoils every product after it."""
    x = a
    for i in range(depth):
        x = torch.mm(x, b1 if i % 2 == 0 else b2)
    return x


def result_hash(x: torch.Tensor) -> str:
    """sha256 of the result's bytes (copied to the host), as hex."""
    raw = x.contiguous().view(torch.uint8).cpu().numpy()
    return hashlib.sha256(raw.data).hexdigest()


def flip_bit(x: torch.Tensor) -> None:
    """Flip the lowest significand bit of the middle element, in place (the planted fault:
    one ulp off, the kind of error only a bitwise comparison sees)."""
    flat = x.view(INT_VIEW[x.dtype]).view(-1)
    mid = flat.numel() // 2
    flat[mid : mid + 1].bitwise_xor_(1)


def diff(x: torch.Tensor, ref: torch.Tensor) -> tuple[int, float]:
    """(elements whose bits differ, largest |x - ref| among them; inf where one is not finite)."""
    view = INT_VIEW[x.dtype]
    mask = x.view(view) != ref.view(view)
    count = int(mask.sum())
    if count == 0:
        return 0, 0.0
    gap = (x[mask].double() - ref[mask].double()).abs()
    worst = float(torch.nan_to_num(gap, nan=math.inf).max())
    return count, worst


def _cublas_version() -> str | None:
    """The cuBLAS wheel torch loads (nvidia-cublas-cu12, nvidia-cublas ...), where pip has one."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("nvidia-cublas"):
            return dist.version
    return None


def peer_group(ctx: DistContext) -> str:
    """What must match for two devices' results to be bitwise equal: cuBLAS gives the same
    bits on GPUs of the same architecture and SM count from the same toolkit version (cuBLAS
    docs, "Results reproducibility"), so the GPU model and SM count, driver, torch, CUDA or
    HIP and cuBLAS; on CPUs the CPU model, torch and the threads a GEMM is split over."""
    versions = ctx.host_info.versions if ctx.host_info is not None else {}
    parts = []
    if ctx.is_cuda:
        props = torch.cuda.get_device_properties(ctx.device)
        parts.append(f"{props.name} ({props.multi_processor_count} SMs)")
        parts.append(f"driver {versions.get('driver', '?')}")
        parts.append(f"torch {torch.__version__}")
        hip = getattr(torch.version, "hip", None)
        parts.append(f"HIP {hip}" if hip else f"CUDA {torch.version.cuda}")
        parts.append(f"cuBLAS {_cublas_version() or 'of the toolkit'}")
    else:
        cpu = ctx.host_info.cpu.model if ctx.host_info is not None else None
        parts.append(cpu or platform.machine() or "CPU")
        parts.append(f"torch {torch.__version__}")
        threads = torch.get_num_threads()
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    return " · ".join(parts)
