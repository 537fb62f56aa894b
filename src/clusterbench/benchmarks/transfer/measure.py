"""Host<->device and GPU<->GPU copy bandwidth, and the PCIe link as it runs under load.

(a) All ranks at once copy between GPU and host, pinned and pageable, with the host buffer on the
GPU's NUMA node and, where the host has several, on another.  (b) The PCIe link's generation and
width are read during a long pinned copy: idle GPUs train their link down to save power.  (c)
Local rank 0 times every ordered pair of the node's GPUs, one way and both ways at once.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterbench.benchmarks.transfer.settings import (
    Direction,
    MemoryKind,
    TransferConfig,
    TransferMetrics,
)
from clusterbench.hardware.probe import numa_node_cpus, read_pcie_link
from clusterbench.hardware.specs import pcie_link_gbps
from clusterbench.metrics import Metric
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, ParamValue, Reference

__all__ = ["transfer"]

log = logging.getLogger(__name__)
_Params = dict[str, ParamValue]
_Buffers = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # host, device source, device dest
_LOAD_S = 0.25  # seconds of back-to-back pinned copies in flight while the link is read
_LOAD_GBPS = 64.0  # upper bound of one PCIe Gen5 x16 direction (PCIe 5.0 spec), sizes the load
_SETTLE_S = 0.05  # lets the link train up once the copies start (link retraining takes us-ms)
_SAMPLE_STRIDE = 4099  # prime: a strided sample that is not aligned with any block size


@dataclass(frozen=True, slots=True)
class _Placement:
    """Where a host buffer lives: 'local' / 'remote' to the GPU, or 'unknown'."""

    numa: str
    node: int | None = None
    cpus: tuple[int, ...] = ()


def transfer(ctx: DistContext, cfg: TransferConfig) -> Iterator[Measurement]:
    """Host<->device (pinned, pageable, NUMA local/remote) and GPU<->GPU copy bandwidth."""
    # Steps and barriers depend on the settings only, never on this host, so every rank of every
    # node calls ctx.barrier() equally often.
    slots = 2 if cfg.numa_remote else 1
    num_gpus = torch.cuda.device_count()
    run_p2p = cfg.p2p and ctx.local_rank == 0 and num_gpus > 1
    ctx.progress.start(slots * len(cfg.memory) + (num_gpus * (num_gpus - 1) if run_p2p else 0))
    placements = _placements(ctx)
    steps = list(itertools.product(range(slots), cfg.memory))
    for done, (slot, kind) in enumerate(steps):
        if done and ctx.budget.agree_expired(ctx):  # rank 0 decides: barriers stay in step
            ctx.budget.stopped(done=done, total=len(steps), unit="host<->device cases")
            run_p2p = False
            break
        place = placements[slot] if slot < len(placements) else None
        read_link = cfg.read_link and slot == 0 and kind == "pinned"
        yield from _host_step(ctx, cfg, kind=kind, placement=place, read_link=read_link)
        ctx.progress.advance()
    wait_group = _cpu_group(ctx) if cfg.p2p else None
    ctx.barrier()  # other local ranks stay idle while local rank 0 drives every GPU
    if run_p2p:
        yield from _p2p_matrix(ctx, cfg, num_gpus=num_gpus)
    if wait_group is None:
        ctx.barrier()
        return
    # The others wait on the CPU: a rank waiting inside an NCCL barrier polls over NVLink and
    # slowed the GPU0->GPU1 copies being timed on an H200 pair in an early, unrecorded run.
    dist.barrier(group=wait_group)
    dist.destroy_process_group(wait_group)


def _cpu_group(ctx: DistContext) -> dist.ProcessGroup | None:
    """A gloo group of all ranks to wait on without a GPU kernel (None if not needed)."""
    if ctx.world_size == 1 or ctx.backend == "gloo" or not dist.is_initialized():
        return None
    return dist.new_group(backend="gloo")  # collective: every rank calls it here


def _placements(ctx: DistContext) -> list[_Placement]:
    """The GPU's own NUMA node first, then another node with CPUs; or 'unknown'."""
    node = ctx.gpu.numa_node if ctx.gpu is not None else None
    nodes = {n: tuple(cpus) for n, cpus in numa_node_cpus().items() if cpus}
    if node is None or node not in nodes:
        return [_Placement(numa="unknown")]
    out = [_Placement(numa="local", node=node, cpus=nodes[node])]
    # remote: the lowest-numbered other node; on a two-socket host, the other socket
    for other in sorted(n for n in nodes if n != node)[:1]:
        out.append(_Placement(numa="remote", node=other, cpus=nodes[other]))
    return out


def _host_step(
    ctx: DistContext,
    cfg: TransferConfig,
    *,
    kind: MemoryKind,
    placement: _Placement | None,
    read_link: bool,
) -> Iterator[Measurement]:
    """One memory kind at one placement: both directions (and the link reading)."""
    size_bytes = cfg.pinned_size_bytes if kind == "pinned" else cfg.pageable_size_bytes
    results: list[Measurement] = []
    with contextlib.ExitStack() as stack:
        if placement is not None and not _enter_node(stack, placement):
            placement = None
        if placement is None:
            ctx.barrier()  # keep step with the ranks that do have this placement
            return
        host = stack.enter_context(_host_buffer(size_bytes, pinned=kind == "pinned"))
        dev_src = torch.randint(0, 256, (size_bytes,), dtype=torch.uint8, device=ctx.device)
        dev_dst = torch.empty_like(dev_src)
        _check_round_trip(host=host, dev_src=dev_src, dev_dst=dev_dst)
        ctx.barrier()  # every rank's copies run at the same time, sharing the host's links
        params: _Params = dict(
            memory=kind, numa=placement.numa, numa_node=placement.node, size_bytes=size_bytes
        )
        bufs = (host, dev_src, dev_dst)
        for direction in cfg.directions:
            results.append(_time_host_copy(ctx, cfg, direction=direction, bufs=bufs, params=params))
        if read_link:
            results.extend(_link_under_load(ctx, host=host, dev=dev_dst))
    yield from results  # after the affinity is restored


def _enter_node(stack: contextlib.ExitStack, placement: _Placement) -> bool:
    """Run this thread on the placement's CPUs until ``stack`` closes; False if not allowed."""
    if placement.node is None:
        return True
    before = os.sched_getaffinity(0)
    # Within this process's allowed CPUs where possible (a launcher's binding is respected).
    cpus = sorted(set(placement.cpus) & before) or list(placement.cpus)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        log.warning("transfer: cannot run on NUMA node %s (%s): skipped", placement.node, exc)
        return False
    stack.callback(os.sched_setaffinity, 0, before)
    return True


@contextlib.contextmanager
def _host_buffer(size_bytes: int, *, pinned: bool) -> Iterator[torch.Tensor]:
    """A host buffer with its pages on this thread's NUMA node; page-locked if ``pinned``.

    Pages land where first touched, so this thread alone writes them (torch's pool threads run
    elsewhere); pinning registers them rather than taking torch's cached pinned pages (any node).
    """
    buf = torch.empty(size_bytes, dtype=torch.uint8)
    num_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        buf.fill_(0x5A)
    finally:
        torch.set_num_threads(num_threads)
    if not pinned:
        yield buf
        return
    cudart = torch.cuda.cudart()
    err = cudart.cudaHostRegister(buf.data_ptr(), size_bytes, 0)
    if err != cudart.cudaError.success:
        raise RuntimeError(f"transfer: cudaHostRegister of {size_bytes} bytes failed: {err}")
    try:
        yield buf
    finally:
        cudart.cudaHostUnregister(buf.data_ptr())


def _check_round_trip(*, host: torch.Tensor, dev_src: torch.Tensor, dev_dst: torch.Tensor) -> None:
    """device -> host -> device must give back every byte (dev_dst poisoned first)."""
    dev_dst.fill_(0)
    host.copy_(dev_src)
    dev_dst.copy_(host)
    torch.cuda.synchronize(dev_src.device)
    if not torch.equal(dev_dst, dev_src):
        raise RuntimeError("transfer: data did not survive a device->host->device round trip")


def _time_host_copy(
    ctx: DistContext, cfg: TransferConfig, *, direction: Direction, bufs: _Buffers, params: _Params
) -> Measurement:
    host, dev_src, dev_dst = bufs
    # non_blocking only matters for page-locked memory; pageable copies are synchronous anyway
    copies = {
        "h2d": lambda: dev_dst.copy_(host, non_blocking=True),
        "d2h": lambda: host.copy_(dev_src, non_blocking=True),
    }
    samples = time_op(copies[direction], device=ctx.device, warmup=cfg.warmup, repeats=cfg.repeats)
    # GB/s = size_bytes / t / 1e9
    stats = rate_stats(samples, work=host.numel(), scale=1e9)
    p, ref = {"direction": direction, **params}, _link_reference(ctx)
    return ctx.measurement(
        TransferMetrics.bandwidth, value=stats.median, params=p, stats=stats, reference=ref
    )


def _link_reference(ctx: DistContext) -> Reference | None:
    gpu = ctx.gpu
    if gpu is None:
        return None
    spec = gpu.spec
    gen = gpu.pcie.max_gen or (spec.pcie_gen if spec else None)
    width = gpu.pcie.max_width or (spec.pcie_width if spec else None)
    if not gen or not width:
        return None
    rate = pcie_link_gbps(gen, width)
    return Reference(value=rate, kind="link_rate", source="PCI Express Base Specification rate")


def _link_under_load(
    ctx: DistContext, *, host: torch.Tensor, dev: torch.Tensor
) -> list[Measurement]:
    """The PCIe link's generation and width read while pinned host->device copies run."""
    if ctx.gpu is None:
        log.info("transfer: no GPU inventory (NVML index unknown): PCIe link not read")
        return []
    # copies = ceil(load seconds * fastest link rate / bytes per copy)
    num_copies = math.ceil(_LOAD_S * _LOAD_GBPS * 1e9 / host.numel())
    for _ in range(num_copies):
        dev.copy_(host, non_blocking=True)
    time.sleep(_SETTLE_S)
    link = read_pcie_link(ctx.gpu.index)
    torch.cuda.synchronize(ctx.device)
    if link is None:
        log.info("transfer: PCIe link of GPU %d not readable", ctx.gpu.index)
        return []
    pcie = ctx.gpu.pcie
    max_gen, max_width = link.max_gen or pcie.max_gen, link.max_width or pcie.max_width
    readings: list[tuple[Metric, int | None, _Params]] = [
        (TransferMetrics.pcie_link_gen, link.gen, {"max_gen": max_gen}),
        (TransferMetrics.pcie_link_width, link.width, {"max_width": max_width}),
    ]
    return [
        ctx.measurement(metric, value=value, params=params)
        for metric, value, params in readings
        if value is not None
    ]


def _p2p_matrix(ctx: DistContext, cfg: TransferConfig, *, num_gpus: int) -> Iterator[Measurement]:
    """Every ordered pair (i, j), i != j: one-way i->j, then i->j and j->i at once."""
    shape, u8 = (cfg.p2p_size_bytes,), torch.uint8
    srcs = [torch.randint(0, 256, shape, dtype=u8, device=f"cuda:{d}") for d in range(num_gpus)]
    dsts = [torch.empty(shape, dtype=u8, device=f"cuda:{d}") for d in range(num_gpus)]
    for i, j in itertools.permutations(range(num_gpus), 2):
        for bidir in (False, True):
            copy = _P2PCopy(i=i, j=j, srcs=srcs, dsts=dsts, bidir=bidir)
            copy.check()
            yield _time_p2p(ctx, cfg, copy=copy)
        ctx.progress.advance()
    del srcs, dsts, copy
    torch.cuda.empty_cache()  # returns this process's cached blocks on every GPU


class _P2PCopy:
    """i -> j on stream s_i of GPU i; with ``bidir``, j -> i at the same time on s_j of GPU j.

    torch runs a cross-device copy on the *source* device's current stream and fences it with the
    destination device's current stream before and after.  Each copy therefore sees a spare
    stream as the other device's current one, so the two copies never wait on each other.
    """

    def __init__(
        self, *, i: int, j: int, srcs: list[torch.Tensor], dsts: list[torch.Tensor], bidir: bool
    ) -> None:
        self.i, self.j, self.bidir = i, j, bidir
        self.src_i, self.dst_j, self.src_j, self.dst_i = srcs[i], dsts[j], srcs[j], dsts[i]
        self.s_i, self.s_j = torch.cuda.Stream(i), torch.cuda.Stream(j)
        self.spare_i, self.spare_j = torch.cuda.Stream(i), torch.cuda.Stream(j)

    def __call__(self) -> None:
        # Called with s_i current on GPU i, where the timing events are recorded.
        if self.bidir:
            self.s_j.wait_stream(self.s_i)  # fork: j -> i starts after the start event
        with torch.cuda.stream(self.spare_j), torch.cuda.stream(self.s_i):
            self.dst_j.copy_(self.src_i)
        if self.bidir:
            with torch.cuda.stream(self.spare_i), torch.cuda.stream(self.s_j):
                self.dst_i.copy_(self.src_j)
            self.s_i.wait_stream(self.s_j)  # join: the end event waits for both copies

    def check(self) -> None:
        """Poison the destinations, copy once, compare (int64 sums and a strided sample)."""
        self.dst_j.fill_(0)
        self.dst_i.fill_(0)
        self.sync()
        with torch.cuda.stream(self.s_i):
            self()
        self.sync()
        pairs = [(self.src_i, self.dst_j)] + ([(self.src_j, self.dst_i)] if self.bidir else [])
        for src, dst in pairs:
            same_sum = int(src.sum(dtype=torch.int64)) == int(dst.sum(dtype=torch.int64))
            sample = slice(None, None, _SAMPLE_STRIDE)
            if not (same_sum and torch.equal(src[sample].cpu(), dst[sample].cpu())):
                raise RuntimeError(f"transfer: {src.device} -> {dst.device} copy is wrong")

    def sync(self) -> None:
        torch.cuda.synchronize(self.i)
        torch.cuda.synchronize(self.j)


def _time_p2p(ctx: DistContext, cfg: TransferConfig, *, copy: _P2PCopy) -> Measurement:
    # Events go on s_i of GPU i: the start before the fork, the end after the join.
    with torch.cuda.stream(copy.s_i):
        samples = time_op(
            copy, device=torch.device("cuda", copy.i), warmup=cfg.warmup, repeats=cfg.repeats
        )
    copy.sync()
    # GB/s = bytes / t / 1e9, bytes = size (oneway) or 2 * size (bidir: both directions count)
    size_bytes = copy.src_i.numel()
    stats = rate_stats(samples, work=size_bytes * (2 if copy.bidir else 1), scale=1e9)
    access = torch.cuda.can_device_access_peer(copy.i, copy.j) and (
        not copy.bidir or torch.cuda.can_device_access_peer(copy.j, copy.i)
    )
    mode = "bidir" if copy.bidir else "oneway"
    p: _Params = dict(src=copy.i, dst=copy.j, mode=mode, p2p_access=access, size_bytes=size_bytes)
    ref = _nvlink_reference(ctx, bidir=copy.bidir)
    return ctx.measurement(
        TransferMetrics.p2p_bandwidth, value=stats.median, params=p, stats=stats, reference=ref
    )


def _nvlink_reference(ctx: DistContext, *, bidir: bool) -> Reference | None:
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    if spec is None or spec.nvlink_gbps_per_dir is None:
        return None
    # bidir moves data both ways at once: twice the per-direction peak
    value = spec.nvlink_gbps_per_dir * (2 if bidir else 1)
    return Reference(value=value, kind="spec_peak", source=spec.source)
