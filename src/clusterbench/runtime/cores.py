"""How many cores a rank may use, without torch (the duration models read it, not only the
ranks)."""

from __future__ import annotations

import os

__all__ = ["cores_per_rank"]


def cores_per_rank(local_world_size: int) -> int:
    """An equal share, for one of ``local_world_size`` ranks, of the cores this process may
    run on (its CPU affinity where the system has one)."""
    affinity = getattr(os, "sched_getaffinity", None)  # absent on macOS
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    return max(1, cores // max(1, local_world_size))
