"""``clusterbench doctor``: configuration and health checks, one module per family.

Every check reads through :class:`Sources` (probe inventory, an env mapping, a filesystem
root, an NVML object, a command runner) and returns findings with evidence and a fix.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterbench.doctor import (
    bytecode,
    error_counters,
    gpu_health,
    nccl_net,
    numa_cpu,
    nvlink_p2p,
    pcie,
    placement,
    storage,
    xid,
)
from clusterbench.doctor._sources import Check, RankSlot, Runner, Sources, run_command
from clusterbench.doctor.consistency import check_consistency
from clusterbench.doctor.deadline import run_within
from clusterbench.hardware.probe import AUTO, nvml_session
from clusterbench.schema import Finding, HostInfo

__all__ = [
    "FAMILIES",
    "Check",
    "RankSlot",
    "Sources",
    "all_checks",
    "check_consistency",
    "run_checks",
]

log = logging.getLogger(__name__)

FAMILIES: dict[str, tuple[Check, ...]] = {
    "numa_cpu": numa_cpu.CHECKS,
    "pcie": pcie.CHECKS,
    "nvlink_p2p": nvlink_p2p.CHECKS,
    "gpu_health": gpu_health.CHECKS,
    "xid": xid.CHECKS,
    "link_errors": error_counters.CHECKS,
    "nccl_net": nccl_net.CHECKS,
    "storage": storage.CHECKS,
    "placement": placement.CHECKS,
    "python_start": bytecode.CHECKS,
}
"""The per-host checks by family (consistency runs over several hosts, see check_consistency)."""


def all_checks() -> list[Check]:
    return [check for checks in FAMILIES.values() for check in checks]


def run_guarded(check: Check, src: Sources) -> list[Finding]:
    """One check's findings; a check that raises becomes an info finding, not a crash."""
    try:
        return check(src)
    except Exception as exc:  # a broken check must not hide the others' findings
        log.debug("doctor check %s failed", check.__name__, exc_info=True)
        return [
            Finding(
                id="doctor.check_failed",
                severity="info",
                scope=src.scope,
                message=f"check {check.__name__} could not run: {type(exc).__name__}: {exc}",
                evidence={"check": check.__name__, "error": f"{type(exc).__name__}: {exc}"},
                fix="report this with the evidence (clusterbench doctor --json)",
            )
        ]


def run_checks(
    *,
    host: HostInfo,
    env: Mapping[str, str],
    root: str | Path = "/",
    nvml: Any = AUTO,
    checkpoint_dir: str | Path | None = None,
    rank_affinity: Mapping[int, Collection[int]] | None = None,
    own_pids: Collection[int] = (),
    ranks: Collection[RankSlot] = (),
    launcher: str | None = None,
    run: Runner = run_command,
    checks: Sequence[Check] | None = None,
    deadline_s: float | None = None,
) -> list[Finding]:
    """Every per-host check of this node; ``nvml=AUTO`` loads NVML (None skips its checks).
    ``ranks`` and ``launcher``: the run's ranks on this node and what started them.
    ``checks``: these instead of :func:`all_checks`.  ``deadline_s``: run them at once, each in a
    thread, and return by then; a check still running becomes a fail finding
    (``doctor.check_timeout``).  With a deadline pass an ``nvml`` you own: shutting NVML down
    here would wait for the check that hangs in it."""
    with nvml_session(nvml) as lib:
        src = Sources(
            host=host,
            env=dict(env),
            root=Path(root),
            nvml=lib,
            checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
            rank_affinity=(
                {r: frozenset(c) for r, c in rank_affinity.items()} if rank_affinity else None
            ),
            own_pids=frozenset(own_pids),
            ranks=tuple(ranks),
            launcher=launcher,
            run=run,
        )
        chosen = all_checks() if checks is None else list(checks)
        if deadline_s is not None:
            return run_within(chosen, src, deadline_s=deadline_s, guard=run_guarded)
        return [finding for check in chosen for finding in run_guarded(check, src)]
