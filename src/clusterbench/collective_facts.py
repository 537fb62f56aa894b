"""The collectives' facts, without torch: each op's name, its bus factor (nccl-tests' busbw =
algbw x factor), the bytes its buffers hold, the size sweep, the group kinds and the timing
modes; read by the measurement, the settings, the duration model, the tuning sweep and analysis,
so it sits below the benchmarks and the analyses (standard library only)."""

from __future__ import annotations

import typing
from typing import Literal

__all__ = [
    "CHUNKED_OPS",
    "GROUP_KINDS",
    "OPS",
    "Dtype",
    "GroupKind",
    "Mode",
    "OpName",
    "algbw_gbps",
    "buffer_factor",
    "bus_factor",
    "round_size",
    "size_sweep",
    "usable_sizes",
]

OpName = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"
]
OPS: tuple[OpName, ...] = typing.get_args(OpName)
CHUNKED_OPS = frozenset({"all_gather", "reduce_scatter", "all_to_all"})
"""Ops whose buffer splits into n equal chunks: sizes are multiples of n x element size."""
Dtype = Literal["fp32", "bf16", "fp16"]


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw factor F for ``op`` over ``n`` ranks (table above)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n  # busbw = algbw * 2(n-1)/n (nccl-tests all_reduce.cu)
    if op in CHUNKED_OPS:
        return (
            n - 1
        ) / n  # busbw = algbw * (n-1)/n (all_gather.cu, reduce_scatter.cu, alltoall.cu)
    if op in ("broadcast", "send_recv"):
        return 1.0  # busbw = algbw (broadcast.cu, sendrecv.cu)
    raise ValueError(f"unknown collective {op!r}")


def algbw_gbps(size_bytes: float, time_s: float) -> float:
    """algbw = S / t / 1e9 (GB/s, base 10; nccl-tests)."""
    return size_bytes / time_s / 1e9


def buffer_factor(op: str, n: int) -> float:
    """Device bytes the op's buffers take per byte of ``size_bytes``."""
    if op in ("all_reduce", "broadcast"):
        return 1.0  # in place
    if op in ("all_gather", "reduce_scatter"):
        return 1.0 + 1.0 / n  # total buffer plus one chunk
    return 2.0  # all_to_all, send_recv: separate input and output


def size_sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min_bytes, min_bytes x factor, ... up to max_bytes (nccl-tests -b -e -f)."""
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def round_size(op: str, size_bytes: int, *, n: int, element_bytes: int) -> int:
    """``size_bytes`` rounded down to whole elements (whole chunks of n for chunked ops), at least
    one unit, as nccl-tests rounds its counts."""
    unit = element_bytes * (n if op in CHUNKED_OPS else 1)
    return max(unit, size_bytes // unit * unit)


def usable_sizes(
    op: str, sizes: list[int], *, n: int, element_bytes: int, memory_limit_bytes: float
) -> list[int]:
    """The sweep for one op and group: rounded, deduplicated, and only sizes whose buffers fit."""
    out: list[int] = []
    for size in sizes:
        rounded = round_size(op, size, n=n, element_bytes=element_bytes)
        if rounded not in out and rounded * buffer_factor(op, n) <= memory_limit_bytes:
            out.append(rounded)
    return out


GroupKind = Literal["world", "intra_node", "inter_node", "node_pairs"]
GROUP_KINDS: tuple[GroupKind, ...] = typing.get_args(GroupKind)


Mode = Literal["back_to_back", "blocking", "graph"]
"""How ops are timed (see :mod:`.collectives`): launched back to back, one at a time, or
replayed from a CUDA graph."""
