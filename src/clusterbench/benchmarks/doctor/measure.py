"""Doctor inside a run: every rank's CPU affinity, the host checks on local rank 0 of each
node (with the placement of the node's ranks), and the versions of every node compared on
rank 0."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from clusterbench.benchmarks.doctor.settings import (
    DoctorConfig,
    DoctorMetrics,
)
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, HostInfo, Measurement

__all__ = ["doctor"]

log = logging.getLogger(__name__)


def _affinity() -> list[int]:
    sched_getaffinity = getattr(os, "sched_getaffinity", None)  # absent on macOS
    if sched_getaffinity is None:
        return list(range(os.cpu_count() or 1))
    return sorted(sched_getaffinity(0))


def _host_checks(
    ctx: DistContext, cfg: DoctorConfig, everyone: list[dict[str, Any]]
) -> tuple[HostInfo, list[Finding]]:
    from clusterbench.doctor import RankSlot, run_checks
    from clusterbench.doctor.placement import launcher_kind
    from clusterbench.hardware.probe import probe_host

    mine = [e for e in everyone if e["host"] == ctx.host]
    host = ctx.host_info or probe_host()  # the rank probed its node when it started
    slots = [
        RankSlot(
            rank=rank,
            local_rank=e["local_rank"],
            node=ctx.node_rank,
            cpus=frozenset(e["cpus"]),
            gpu=e["gpu"],
        )
        for rank, e in enumerate(everyone)
        if e["host"] == ctx.host
    ]
    run_id = ctx.run_dir.name if ctx.run_dir is not None else ""
    findings = run_checks(
        host=host,
        env=os.environ,
        checkpoint_dir=cfg.checkpoint_dir or None,
        rank_affinity={e["local_rank"]: set(e["cpus"]) for e in mine} if ctx.is_cuda else None,
        own_pids=[e["pid"] for e in mine],
        ranks=slots,
        launcher=launcher_kind(os.environ, run_id=run_id, given=ctx.launcher),
    )
    return host, findings


def _numa_copy(ctx: DistContext) -> list[Finding]:
    """What a rank off its NUMA node pays, timed on this host (two or more NUMA nodes): an
    info finding with the figures (a property of the host, the evidence placement quotes)."""
    from clusterbench.benchmarks.doctor.numa import remote_copy_finding
    from clusterbench.hardware.sysfs import numa_node_cpus

    try:
        found = remote_copy_finding(numa_node_cpus(), scope=f"host:{ctx.host}")
    except OSError as exc:  # CPUs of a node this process may not use (a cgroup cpuset)
        log.warning("doctor: NUMA copy not measured: %s", exc)
        return []
    return [found] if found is not None else []


def doctor(ctx: DistContext, cfg: DoctorConfig) -> Iterator[Measurement | Finding]:
    """Configuration and health checks: NUMA, PCIe, NVLink, GPU health, NCCL, storage, the
    placement of the ranks (and, with two or more NUMA nodes, what running off one costs)."""
    from clusterbench.doctor import all_checks, check_consistency

    ctx.progress.start(3)
    me = {
        "host": ctx.host,
        "local_rank": ctx.local_rank,
        "pid": os.getpid(),
        "cpus": _affinity(),
        "gpu": ctx.device.index if ctx.is_cuda else None,
    }
    everyone = ctx.all_gather(me)
    ctx.progress.advance()
    host: HostInfo | None = None
    if ctx.local_rank == 0:
        host, findings = _host_checks(ctx, cfg, everyone)
        yield from findings
        yield ctx.measurement(DoctorMetrics.checks_run, value=len(all_checks()))
        yield from _numa_copy(ctx)
    ctx.progress.advance()
    gathered = ctx.gather_to_root(host.model_dump(mode="json") if host is not None else None)
    if gathered is not None:
        hosts = [HostInfo.model_validate(h) for h in gathered if h is not None]
        yield from check_consistency(hosts)
    ctx.progress.advance()
