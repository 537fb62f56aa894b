"""What the checks read, bundled so that tests can replace every source with a fake."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.schema import Finding, HostInfo

__all__ = ["Check", "RankSlot", "Runner", "Sources", "run_command"]

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str]], "str | None"]
"""Runs a command and returns its stdout; None when it is missing, fails or times out."""

_COMMAND_TIMEOUT_S = 5.0  # doctor must finish in < 10 s a node


def run_command(cmd: Sequence[str]) -> str | None:
    """stdout of ``cmd``, or None when the program is missing, fails or takes over 5 s."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("%s: %s", cmd[0], exc)
        return None
    return proc.stdout if proc.returncode == 0 else None


@dataclass(frozen=True, kw_only=True, slots=True)
class RankSlot:
    """One rank of the run on this node, as the rank itself saw it."""

    rank: int
    """Global rank."""
    local_rank: int
    node: int
    """The node's index in the run (node order: the order the hosts first appear in ranks)."""
    cpus: frozenset[int]
    """The CPUs the rank's process may run on (its affinity)."""
    gpu: int | None = None
    """The GPU index the rank drives (its local rank on GPU runs); None for a CPU rank."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sources:
    """Everything a check may read: the probe's inventory and the injectable boundaries."""

    host: HostInfo
    env: Mapping[str, str] = field(default_factory=dict)
    root: Path = Path("/")
    """Filesystem root for sysfs, /proc and /dev (tests pass a fake tree)."""
    nvml: Any | None = None
    """An initialised NVML module (or a stand-in); None skips the NVML checks."""
    checkpoint_dir: Path | None = None
    rank_affinity: Mapping[int, frozenset[int]] | None = None
    """Local rank -> the CPUs its process may run on (None outside a run)."""
    own_pids: frozenset[int] = frozenset()
    """Process ids of this run's workers (not 'other processes' on the GPUs)."""
    ranks: tuple[RankSlot, ...] = ()
    """This node's ranks in the run (empty outside a run), for the placement check."""
    launcher: str | None = None
    """What started the ranks: torchrun, slurm, mpi or clusterbench (None outside a run)."""
    run: Runner = run_command
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs

    @property
    def scope(self) -> str:
        return f"host:{self.host.hostname}"

    def gpu_scope(self, index: int) -> str:
        return f"{self.scope}/cuda:{index}"


Check = Callable[[Sources], list[Finding]]
