"""Storage: file system type and free space of the checkpoint directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from clusterbench.doctor._sources import Check, Sources
from clusterbench.hardware.sysfs import mount_of, read_text
from clusterbench.schema import Finding

__all__ = ["CHECKS", "MIN_FREE_BYTES", "check_storage"]

MIN_FREE_BYTES = 50 * 10**9
"""Less free space than this holds few checkpoints of a 7B model (~100 GB with optimizer)."""


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_storage(src: Sources) -> list[Finding]:
    """Free space (< 50 GB -> warn) and file system type (info) of the checkpoint directory."""
    wanted = src.checkpoint_dir or Path(tempfile.gettempdir())
    path = _existing(Path(os.path.realpath(wanted)))
    stat = src.statvfs(str(path))
    free = stat.f_bavail * stat.f_frsize
    mount = mount_of(read_text(src.root / "proc/mounts") or "", str(path))
    fs_type = mount[1] if mount else "unknown"
    evidence = {
        "checkpoint_dir": str(wanted),
        "checked": str(path),
        "mount_point": mount[0] if mount else None,
        "fs_type": fs_type,
        "free_bytes": free,
        "total_bytes": stat.f_blocks * stat.f_frsize,
    }
    low = free < MIN_FREE_BYTES
    return [
        Finding(
            id="doctor.storage.checkpoint_dir",
            severity="warn" if low else "info",
            scope=src.scope,
            message=f"checkpoint directory {wanted} is on {fs_type}, {free / 1e9:.1f} GB free"
            + (f" (< {MIN_FREE_BYTES / 1e9:.0f} GB)" if low else ""),
            evidence=evidence,
            fix="point checkpoints at a larger volume (--checkpoint-dir, checkpoint.directory)"
            if low
            else "",
        )
    ]


CHECKS: tuple[Check, ...] = (check_storage,)
