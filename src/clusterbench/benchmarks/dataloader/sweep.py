"""The dataloader benchmark's sweep of loader settings, and the rule that ends it early.

Worker counts go 0, 1, 2, 4, ... doubling up to the CPU cores of one rank (the cores its
process may run on, shared equally by the ranks of its node: the cores per GPU), the last count
being those cores; a configured ``num_workers`` list replaces the ladder (capped the same way).
Without ``sweep_stop`` (the ``full`` suite) every ``pin_memory`` x ``prefetch_factor``
setting is timed at each count and the best of them is the count's figure.  With it (every
other suite) each count is timed at one setting, its *lead* (:func:`lead_setting`: pinned on
CUDA, the smallest prefetch factor: what a training loop on a GPU usually sets), the other
``pin_memory`` x ``prefetch_factor`` settings only at the best count, and the ladder ends after
the count where either

1. the loader is **sufficient**: at some count so far it delivers ``sufficient_margin`` x the
   samples/s the training step consumes (timed first, on a batch already on the device), or
   :data:`SERIAL_MARGIN` x at 0 workers, where loading and the step take turns; more workers
   cannot make the device wait less; or
2. the curve with workers has **flattened**: ``plateau_patience`` successive counts each add
   less than ``plateau_tolerance`` to the best before them (:class:`.sweep_stop.PlateauRule`,
   counted from 1 worker on: 0 workers loads in the training process, another regime).

The counts left out are named in the ``dataloader.sweep_stopped`` info finding; the best
setting and PyTorch's defaults are then trained from as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from clusterbench.benchmarks.dataloader.kinds import SERIAL_MARGIN, worker_counts
from clusterbench.benchmarks.sweep_stop import PlateauRule, SweepStop, ratio_text
from clusterbench.schema import ParamValue

__all__ = [
    "DEFAULT_SETTING",
    "SERIAL_MARGIN",
    "LoaderSetting",
    "by_workers",
    "describe_rule",
    "grid",
    "lead_setting",
    "loader_stop",
    "worker_counts",
]


@dataclass(frozen=True, slots=True)
class LoaderSetting:
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    """None without workers (the DataLoader rejects it then)."""

    def params(self) -> dict[str, ParamValue]:
        return {
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
            "prefetch_factor": self.prefetch_factor,
        }


DEFAULT_SETTING = LoaderSetting(num_workers=0, pin_memory=False, prefetch_factor=None)
"""torch.utils.data.DataLoader's defaults."""


def grid(
    workers: Sequence[int],
    *,
    pin_memory: Sequence[bool],
    prefetch_factor: Sequence[int],
    device: torch.device,
) -> list[LoaderSetting]:
    """Every setting at each worker count, in sweep order; pinning only on CUDA, prefetching
    only with workers."""
    pins = sorted({p and device.type == "cuda" for p in pin_memory})
    out = []
    for n in workers:
        for pin in pins:
            for pf in sorted(set(prefetch_factor)) if n > 0 else [None]:
                out.append(LoaderSetting(num_workers=n, pin_memory=pin, prefetch_factor=pf))
    return out


def lead_setting(group: Sequence[LoaderSetting]) -> LoaderSetting:
    """The one setting of a worker count's ``group`` the ladder times with ``sweep_stop``:
    pinned where pinning is swept (CUDA), the smallest prefetch factor."""
    return min(group, key=lambda s: (not s.pin_memory, s.prefetch_factor or 0))


def by_workers(settings: Sequence[LoaderSetting]) -> list[list[LoaderSetting]]:
    """``settings`` grouped by worker count, ascending."""
    groups: dict[int, list[LoaderSetting]] = {}
    for s in settings:
        groups.setdefault(s.num_workers, []).append(s)
    return [groups[n] for n in sorted(groups)]


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def describe_rule(*, margin: float, plateau: PlateauRule) -> str:
    """The stopping rule in words, as the finding and the README state it."""
    return (
        f"the loader delivers {margin:g}x the samples/s the step consumes ({SERIAL_MARGIN:g}x "
        "without workers, where loading and the step take turns), or "
        + plateau.describe(points="worker counts", figure="samples/s")
        + " (each count timed at one setting, pinned on CUDA with the smallest prefetch "
        "factor; the other pin_memory x prefetch_factor settings at the best count only)"
    )


def loader_stop(
    best_by_count: Sequence[tuple[int, float]],
    *,
    remaining: Sequence[int],
    demand: float,
    margin: float,
    plateau: PlateauRule,
    dataset: str,
) -> SweepStop | None:
    """Whether the sweep stops after the counts measured (``best_by_count``: each count and
    its best samples/s, in order), before the ``remaining`` counts; None: go on."""
    if not remaining or not best_by_count:
        return None
    best = max(rate for _, rate in best_by_count)
    last = _workers(best_by_count[-1][0])
    skipped = tuple(_workers(n) for n in remaining)
    enough = [
        rate
        for n, rate in best_by_count
        if demand > 0 and rate >= (SERIAL_MARGIN if n == 0 else margin) * demand
    ]
    if enough:
        detail = (
            f"the loader gives {ratio_text(enough[0] / demand)} the step's demand "
            f"({enough[0]:,.0f} samples/s against the {demand:,.0f} it consumes)"
        )
        return SweepStop(sweep=dataset, reason="sufficient", last=last, skipped=skipped,
                         detail=detail, best=best)  # fmt: skip
    with_workers = [rate for n, rate in best_by_count if n > 0]
    if plateau.reached(with_workers):
        detail = (
            f"the last {plateau.patience} worker counts added less than "
            f"{plateau.tolerance:.0%} to the best, {best:,.0f} samples/s (the step consumes "
            f"{demand:,.0f})"
        )
        return SweepStop(sweep=dataset, reason="plateau", last=last, skipped=skipped,
                         detail=detail, best=best)  # fmt: skip
    return None
