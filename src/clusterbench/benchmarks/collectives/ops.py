"""The six collectives: byte counts and bus factors (nccl-tests), buffers, and exact checks.

nccl-tests definitions (src/*.cu ``*GetBw``, doc/PERFORMANCE.md; docs/reference.md): for one
operation of ``t`` seconds over ``n`` ranks, ``algbw = S / t / 1e9`` GB/s and
``busbw = algbw * F`` with

=============== ======================================== ============
op              S (``size_bytes`` here)                  F
=============== ======================================== ============
all_reduce      buffer bytes                             2(n-1)/n
all_gather      total output = per-rank chunk x n        (n-1)/n
reduce_scatter  total input = per-rank chunk x n         (n-1)/n
all_to_all      per-rank buffer (n chunks)               (n-1)/n
broadcast       buffer bytes                             1
send_recv       buffer bytes                             1
=============== ======================================== ============

Inputs hold small integers that depend on the group rank and the element's position (period
7), so every output element has one exact expected value, as nccl-tests checks (#wrong).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterbench.benchmarks.collectives.groups import GroupHandle
from clusterbench.collective_facts import (
    CHUNKED_OPS,
    OPS,
    Dtype,
    OpName,
    algbw_gbps,
    buffer_factor,
    bus_factor,
    round_size,
    size_sweep,
    usable_sizes,
)

__all__ = [
    "CHUNKED_OPS",
    "DTYPES",
    "OPS",
    "CollectiveOp",
    "Dtype",
    "OpName",
    "algbw_gbps",
    "buffer_factor",
    "bus_factor",
    "make_op",
    "round_size",
    "size_sweep",
    "usable_sizes",
]
DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
# Largest integer below which every integer is exact: 2^(mantissa bits + 1).
_EXACT_LIMIT = {"fp32": 2**24, "bf16": 2**8, "fp16": 2**11}
_PERIOD = 7
_BLOCK = _PERIOD * 2**21
"""Elements filled or checked per step (a multiple of the period): bounds temporary memory."""
_CPU_CHECK_BYTES = 64 * 2**20
"""On CPU, buffers above this are checked on a strided sample of blocks."""


# --- buffers and checks --------------------------------------------------------------------


def _value_range(dtype: str, n: int) -> int:
    """Values 1..m with m x n (the largest sum) exact in ``dtype``."""
    return max(1, min(8, _EXACT_LIMIT[dtype] // n))


def _table(group_rank: int, *, dtype: str, n: int) -> torch.Tensor:
    """Rank r's input at position k is table_r[k % 7] = ((k % 7) + 3r) % m + 1."""
    m = _value_range(dtype, n)
    return torch.tensor([(u + 3 * group_rank) % m + 1 for u in range(_PERIOD)], dtype=torch.float64)


def _sum_table(*, dtype: str, n: int) -> torch.Tensor:
    return torch.stack([_table(r, dtype=dtype, n=n) for r in range(n)]).sum(dim=0)


@dataclass(slots=True)
class _Pattern:
    """A period-7 table repeated once over a block, to fill or compare a buffer by slices."""

    tile: torch.Tensor

    @classmethod
    def of(cls, table: torch.Tensor, *, like: torch.Tensor, numel: int) -> _Pattern:
        reps = math.ceil((min(numel, _BLOCK) + _PERIOD) / _PERIOD)
        return cls(table.to(like.dtype).repeat(reps).to(like.device))

    def fill(self, seg: torch.Tensor, *, first_index: int) -> None:
        for start in range(0, seg.numel(), _BLOCK):
            count, phase = min(_BLOCK, seg.numel() - start), (first_index + start) % _PERIOD
            seg[start : start + count].copy_(self.tile[phase : phase + count])

    def count_wrong(self, seg: torch.Tensor, *, first_index: int) -> torch.Tensor:
        """Elements that differ (NaN always differs); on CPU a strided sample of big buffers."""
        stride = 1
        if seg.device.type == "cpu":
            stride = max(1, math.ceil(seg.numel() * seg.element_size() / _CPU_CHECK_BYTES))
        wrong = torch.zeros((), dtype=torch.int64, device=seg.device)
        for i, start in enumerate(range(0, seg.numel(), _BLOCK)):
            if i % stride == 0:
                count, phase = min(_BLOCK, seg.numel() - start), (first_index + start) % _PERIOD
                wrong += (seg[start : start + count] != self.tile[phase : phase + count]).sum()
        return wrong


@dataclass(slots=True)
class CollectiveOp:
    name: str
    size_bytes: int
    run: Callable[[], None]
    prepare: Callable[[], None]
    """Fill the inputs with the pattern and poison the outputs (NaN)."""
    count_wrong: Callable[[], int]
    """Wrong output elements after ``prepare(); run()``."""
    emulated: bool = False


@dataclass(frozen=True, slots=True)
class _Setup:
    h: GroupHandle
    dtype: str
    device: torch.device
    emulate: bool

    def empty(self, size_bytes: int) -> torch.Tensor:
        dtype = DTYPES[self.dtype]
        numel = size_bytes // torch.empty((), dtype=dtype).element_size()
        return torch.empty(numel, dtype=dtype, device=self.device)

    def pattern(self, group_rank: int | None, *, like: torch.Tensor, numel: int) -> _Pattern:
        n = self.h.size
        table = (
            _sum_table(dtype=self.dtype, n=n)
            if group_rank is None
            else _table(group_rank, dtype=self.dtype, n=n)
        )
        return _Pattern.of(table, like=like, numel=numel)


def make_op(
    name: str, *, size_bytes: int, h: GroupHandle, dtype: str, device: torch.device, emulate: bool
) -> CollectiveOp:
    """Buffers, the call, and the check of one collective of ``size_bytes`` (S, table above).

    ``emulate`` replaces an op gloo lacks by its nearest equivalent (see :func:`_emulations`).
    """
    s = _Setup(h=h, dtype=dtype, device=device, emulate=emulate)
    builder = _BUILDERS[name]
    op = builder(s, size_bytes)
    op.emulated = emulate and name in _EMULATED
    return op


def _all_reduce(s: _Setup, size_bytes: int) -> CollectiveOp:
    buf = s.empty(size_bytes)
    mine = s.pattern(s.h.group_rank, like=buf, numel=buf.numel())
    expect = s.pattern(None, like=buf, numel=buf.numel())
    return CollectiveOp(
        "all_reduce",
        size_bytes,
        run=lambda: _wait(dist.all_reduce(buf, group=s.h.group)),
        prepare=lambda: mine.fill(buf, first_index=0),
        count_wrong=lambda: int(expect.count_wrong(buf, first_index=0)),
    )


def _broadcast(s: _Setup, size_bytes: int) -> CollectiveOp:
    buf = s.empty(size_bytes)
    mine = s.pattern(s.h.group_rank, like=buf, numel=buf.numel())
    expect = s.pattern(0, like=buf, numel=buf.numel())
    root = s.h.global_rank(0)
    return CollectiveOp(
        "broadcast",
        size_bytes,
        run=lambda: _wait(dist.broadcast(buf, src=root, group=s.h.group)),
        prepare=lambda: mine.fill(buf, first_index=0),
        count_wrong=lambda: int(expect.count_wrong(buf, first_index=0)),
    )


def _send_recv(s: _Setup, size_bytes: int) -> CollectiveOp:
    """Ring: each rank sends to group rank + 1 and receives from group rank - 1."""
    send, recv = s.empty(size_bytes), s.empty(size_bytes)
    gr = s.h.group_rank
    mine = s.pattern(gr, like=send, numel=send.numel())
    expect = s.pattern((gr - 1) % s.h.size, like=recv, numel=recv.numel())
    dst, src = s.h.global_rank(gr + 1), s.h.global_rank(gr - 1)

    def run() -> None:
        ops = [
            dist.P2POp(dist.isend, send, dst, group=s.h.group),
            dist.P2POp(dist.irecv, recv, src, group=s.h.group),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    prepare = _refill(mine, send, recv)

    return CollectiveOp(
        "send_recv",
        size_bytes,
        run=run,
        prepare=prepare,
        count_wrong=lambda: int(expect.count_wrong(recv, first_index=0)),
    )


def _all_gather(s: _Setup, size_bytes: int) -> CollectiveOp:
    n, gr = s.h.size, s.h.group_rank
    out = s.empty(size_bytes)
    inp = s.empty(size_bytes // n)
    mine = s.pattern(gr, like=inp, numel=inp.numel())
    chunks = out.chunk(n)
    native = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def run() -> None:
        if s.emulate:  # gloo without all_gather_into_tensor: the list form into views of out
            _wait(dist.all_gather(list(chunks), inp, group=s.h.group))
        else:
            _wait(native(out, inp, group=s.h.group))

    prepare = _refill(mine, inp, out)

    def count_wrong() -> int:
        # One rank's pattern at a time: n tiles at once could take GBs on a big group.
        return int(
            sum(
                s.pattern(r, like=c, numel=c.numel()).count_wrong(c, first_index=0)
                for r, c in enumerate(chunks)
            )
        )

    return CollectiveOp("all_gather", size_bytes, run=run, prepare=prepare, count_wrong=count_wrong)


def _reduce_scatter(s: _Setup, size_bytes: int) -> CollectiveOp:
    n, gr = s.h.size, s.h.group_rank
    inp = s.empty(size_bytes)
    out = s.empty(size_bytes // n)
    mine = s.pattern(gr, like=inp, numel=inp.numel())
    expect = s.pattern(None, like=out, numel=out.numel())
    native = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def run() -> None:
        if s.emulate:  # gloo without reduce_scatter_tensor: all_reduce, keep this rank's chunk
            _wait(dist.all_reduce(inp, group=s.h.group))
            out.copy_(inp.chunk(n)[gr])
        else:
            _wait(native(out, inp, group=s.h.group))

    prepare = _refill(mine, inp, out)

    return CollectiveOp(
        "reduce_scatter",
        size_bytes,
        run=run,
        prepare=prepare,
        count_wrong=lambda: int(expect.count_wrong(out, first_index=gr * out.numel())),
    )


def _all_to_all(s: _Setup, size_bytes: int) -> CollectiveOp:
    """Rank q's output chunk r is rank r's input chunk q."""
    n, gr = s.h.size, s.h.group_rank
    inp, out = s.empty(size_bytes), s.empty(size_bytes)
    chunk = inp.numel() // n
    mine = s.pattern(gr, like=inp, numel=inp.numel())

    prepare = _refill(mine, inp, out)

    def count_wrong() -> int:
        return int(
            sum(
                s.pattern(r, like=c, numel=chunk).count_wrong(c, first_index=gr * chunk)
                for r, c in enumerate(out.chunk(n))
            )
        )

    return CollectiveOp(
        "all_to_all",
        size_bytes,
        run=lambda: _wait(dist.all_to_all_single(out, inp, group=s.h.group)),
        prepare=prepare,
        count_wrong=count_wrong,
    )


def _wait(work: object) -> None:
    """Synchronous collectives return None; some torch versions return a finished work."""
    if work is not None and hasattr(work, "wait"):
        work.wait()


_BUILDERS: dict[str, Callable[[_Setup, int], CollectiveOp]] = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "broadcast": _broadcast,
    "send_recv": _send_recv,
}
_EMULATED = frozenset({"all_gather", "reduce_scatter"})
"""Ops with an emulated form for gloo builds that lack the tensor form (torch < 2.6 or so)."""


def _refill(pattern: _Pattern, inp: torch.Tensor, out: torch.Tensor) -> Callable[[], None]:
    """Before each run: this rank's pattern into ``inp``, NaN into ``out`` (never written
    stays wrong)."""

    def prepare() -> None:
        pattern.fill(inp, first_index=0)
        out.fill_(math.nan)

    return prepare
