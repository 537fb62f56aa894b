"""Timing of one collective on one rank, and gathering over its group.

A barrier over the group comes before every timed loop (nccl-tests); on CUDA the ops are
bracketed by events on the current stream (the NCCL stream joins it when an op completes), on
CPU by the host clock (gloo ops return when done).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from clusterbench.benchmarks.collectives.groups import GroupHandle
from clusterbench.benchmarks.collectives.ops import CollectiveOp
from clusterbench.collective_facts import Mode
from clusterbench.runtime.dist import DistContext

__all__ = ["Mode", "group_barrier", "group_gather", "time_mode"]

log = logging.getLogger(__name__)

_GRAPH_WARMUP = 3  # ops on a side stream before capture, as torch.cuda.graph's docs ask


def group_barrier(ctx: DistContext, h: GroupHandle) -> None:
    with ctx.waiting_for_peers():
        if ctx.backend == "nccl":
            dist.barrier(group=h.group, device_ids=[ctx.device.index or 0])
        else:
            dist.barrier(group=h.group)


def group_gather(ctx: DistContext, h: GroupHandle, values: list[float]) -> torch.Tensor:
    """Every group rank's ``values`` as a (group size x len) CPU tensor, on every group rank."""
    mine = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    out = [torch.empty_like(mine) for _ in range(h.size)]
    with ctx.waiting_for_peers():
        dist.all_gather(out, mine, group=h.group)
    return torch.stack(out).cpu()


def time_mode(
    ctx: DistContext,
    *,
    mode: Mode,
    op: CollectiveOp,
    h: GroupHandle,
    iters: int,
    graph_iters: int = 1,
    graph_replays: int = 1,
) -> list[float] | None:
    """Per-op seconds on this rank: one sample over ``iters`` ops (back_to_back), one per op
    (blocking) or one per graph replay (graph; None when capture failed on any group rank)."""
    if mode == "graph":
        return _time_graph(ctx, op=op, h=h, graph_iters=graph_iters, replays=graph_replays)
    group_barrier(ctx, h)
    if mode == "back_to_back":
        return [_elapsed_s(ctx, op.run, repeat=iters) / iters]
    assert mode == "blocking", mode
    return [_elapsed_s(ctx, op.run, repeat=1) for _ in range(iters)]


def _elapsed_s(ctx: DistContext, fn: Callable[[], object], *, repeat: int) -> float:
    """Seconds for ``repeat`` calls of ``fn``, the device finished before the clock is read."""
    if not ctx.is_cuda:
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds


def _time_graph(
    ctx: DistContext, *, op: CollectiveOp, h: GroupHandle, graph_iters: int, replays: int
) -> list[float] | None:
    graph = _capture(ctx, op=op, iters=graph_iters)
    # Every rank of the group must agree: a rank replaying alone would wait forever.
    if float(group_gather(ctx, h, [1.0 if graph is not None else 0.0]).min()) < 1:
        return None
    assert graph is not None
    graph.replay()  # the first replay uploads the graph
    group_barrier(ctx, h)
    return [_elapsed_s(ctx, graph.replay, repeat=1) / graph_iters for _ in range(replays)]


def _capture(ctx: DistContext, *, op: CollectiveOp, iters: int) -> torch.cuda.CUDAGraph | None:
    """``iters`` ops in one CUDA graph, warmed up on a side stream first; None if capture fails."""
    try:
        torch.cuda.synchronize(ctx.device)
        side = torch.cuda.Stream(ctx.device)
        side.wait_stream(torch.cuda.current_stream(ctx.device))
        with torch.cuda.stream(side):
            for _ in range(_GRAPH_WARMUP):
                op.run()
        torch.cuda.current_stream(ctx.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                op.run()
        torch.cuda.synchronize(ctx.device)
        return graph
    except RuntimeError as exc:
        log.warning("collectives: graph capture of %s failed, graph mode skipped: %s", op.name, exc)
        return None
