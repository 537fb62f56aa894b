"""Level-1 benchmarks on cuda:0 with small settings: correctness and sanity bounds only.

Speed targets belong to scripts/gpu_validate.sh, not here; these bounds only catch a broken
measurement (wrong units, bytes counted wrong, a silently skipped case).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from clusterbench.benchmarks.gemm import TOLERANCE, GemmConfig
from clusterbench.benchmarks.gemm.measure import gemm
from clusterbench.benchmarks.memory import MemoryConfig
from clusterbench.benchmarks.memory.measure import memory
from clusterbench.benchmarks.transfer import TransferConfig
from clusterbench.benchmarks.transfer.measure import transfer
from clusterbench.schema import Measurement
from tests.helpers import gpu_ctx

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

MIB = 2**20


def pick(ms: list[Measurement], metric: str, **params: object) -> list[Measurement]:
    return [
        m for m in ms if m.metric == metric and all(m.params.get(k) == v for k, v in params.items())
    ]


def test_gemm_gpu() -> None:
    torch.cuda.set_device(0)
    fp8 = torch.cuda.get_device_capability(0) >= (8, 9)
    cfg = GemmConfig(
        dtypes=["fp32", "tf32", "bf16", "fp8"],
        shapes=["4096x4096x4096", "2048x8192x4096"],
        warmup=3,
        repeats=10,
    )
    before = torch.get_float32_matmul_precision()
    ms = list(gemm(gpu_ctx("gemm"), cfg))
    assert torch.get_float32_matmul_precision() == before  # TF32 setting restored
    for dtype in ["fp32", "tf32", "bf16", *(["fp8"] if fp8 else [])]:
        (err,) = pick(ms, "rel_error", dtype=dtype)
        assert 0 < err.value < TOLERANCE[dtype], dtype
        assert len(pick(ms, "tflops", dtype=dtype)) == 2
        (best,) = pick(ms, "tflops_best", dtype=dtype)
        assert best.stats is not None and best.stats.cv < 0.5
    if not fp8:
        assert not pick(ms, "tflops", dtype="fp8")
    # TF32 off for fp32: its error is far below tf32's (10-bit mantissa inputs)
    fp32_err = pick(ms, "rel_error", dtype="fp32")[0].value
    assert fp32_err < pick(ms, "rel_error", dtype="tf32")[0].value / 10
    best = {d: pick(ms, "tflops_best", dtype=d)[0].value for d in ("fp32", "tf32", "bf16")}
    assert best["bf16"] > best["tf32"] > best["fp32"]
    if fp8:
        assert pick(ms, "tflops_best", dtype="fp8")[0].value > best["bf16"]


def test_memory_gpu() -> None:
    cfg = MemoryConfig(size_bytes=1024 * MIB, warmup=3, repeats=10)
    ms = {m.params["op"]: m for m in memory(gpu_ctx("memory"), cfg)}
    assert set(ms) == {"copy", "read", "write"}
    assert ms["copy"].value > 1000  # GB/s: any HBM GPU; a CPU-side path would be far below
    for m in ms.values():
        assert m.unit == "GB/s" and m.stats is not None and m.stats.samples == 10


def test_transfer_gpu() -> None:
    cfg = TransferConfig(
        pinned_size_bytes=256 * MIB,
        pageable_size_bytes=64 * MIB,
        p2p_size_bytes=256 * MIB,
        warmup=2,
        repeats=5,
    )
    ms = list(transfer(gpu_ctx("transfer"), cfg))
    bw = pick(ms, "bandwidth")
    assert bw and all(m.unit == "GB/s" and m.value > 0 for m in bw)
    first = bw[0].params["numa"]
    assert first in ("local", "unknown")
    for direction in ("h2d", "d2h"):
        (pinned,) = pick(bw, "bandwidth", direction=direction, memory="pinned", numa=first)
        (pageable,) = pick(bw, "bandwidth", direction=direction, memory="pageable", numa=first)
        assert pinned.params["size_bytes"] == 256 * MIB
        if direction == "h2d":
            assert pinned.value > pageable.value
    num_gpus = torch.cuda.device_count()
    p2p = pick(ms, "p2p_bandwidth")
    pairs = {(m.params["src"], m.params["dst"], m.params["mode"]) for m in p2p}
    expected = {
        (i, j, mode)
        for i, j in itertools.permutations(range(num_gpus), 2)
        for mode in ("oneway", "bidir")
    }
    assert pairs == expected and len(p2p) == len(expected)
    for m in p2p:
        assert m.value > 1 and isinstance(m.params["p2p_access"], bool)
