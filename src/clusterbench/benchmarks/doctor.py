"""Doctor inside a run: every rank's CPU affinity, the host checks on local rank 0 of each
node, and the versions of every node compared on rank 0."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, HostInfo, Measurement

__all__ = ["DoctorConfig", "DoctorMetrics", "doctor"]


class DoctorMetrics(MetricSet, benchmark="doctor"):
    checks_run = Metric("count", "none", "host checks the node ran (local rank 0)")


@dataclass(kw_only=True, slots=True)
class DoctorConfig:
    checkpoint_dir: str = ""
    """Folder whose file system and free space are checked ('' = the node's temp dir)."""


def _affinity() -> list[int]:
    sched_getaffinity = getattr(os, "sched_getaffinity", None)  # absent on macOS
    if sched_getaffinity is None:
        return list(range(os.cpu_count() or 1))
    return sorted(sched_getaffinity(0))


def _host_checks(
    ctx: DistContext, cfg: DoctorConfig, everyone: list[dict[str, Any]]
) -> tuple[HostInfo, list[Finding]]:
    from clusterbench.doctor import run_checks
    from clusterbench.hardware.probe import probe_host

    mine = [e for e in everyone if e["host"] == ctx.host]
    host = ctx.host_info or probe_host()  # the rank probed its node when it started
    findings = run_checks(
        host=host,
        env=os.environ,
        checkpoint_dir=cfg.checkpoint_dir or None,
        rank_affinity={e["local_rank"]: set(e["cpus"]) for e in mine} if ctx.is_cuda else None,
        own_pids=[e["pid"] for e in mine],
    )
    return host, findings


def doctor(ctx: DistContext, cfg: DoctorConfig) -> Iterator[Measurement | Finding]:
    """Configuration and health checks: NUMA, PCIe, NVLink, GPU health, NCCL, storage."""
    from clusterbench.doctor import all_checks, check_consistency

    ctx.progress.start(3)
    me = {"host": ctx.host, "local_rank": ctx.local_rank, "pid": os.getpid(), "cpus": _affinity()}
    everyone = ctx.all_gather(me)
    ctx.progress.advance()
    host: HostInfo | None = None
    if ctx.local_rank == 0:
        host, findings = _host_checks(ctx, cfg, everyone)
        yield from findings
        yield ctx.measurement(DoctorMetrics.checks_run, value=len(all_checks()))
    ctx.progress.advance()
    gathered = ctx.gather_to_root(host.model_dump(mode="json") if host is not None else None)
    if gathered is not None:
        hosts = [HostInfo.model_validate(h) for h in gathered if h is not None]
        yield from check_consistency(hosts)
    ctx.progress.advance()
