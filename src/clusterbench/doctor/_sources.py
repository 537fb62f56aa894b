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

__all__ = ["Check", "Runner", "Sources", "run_command"]

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
    run: Runner = run_command
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs

    @property
    def scope(self) -> str:
        return f"host:{self.host.hostname}"

    def gpu_scope(self, index: int) -> str:
        return f"{self.scope}/cuda:{index}"


Check = Callable[[Sources], list[Finding]]
