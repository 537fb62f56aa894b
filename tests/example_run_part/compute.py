"""The ``device coverage`` run part's analysis: computed once per run, read by its findings
and its section through ``run.part(NAME)``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from clusterbench.analyses.view import RunView
from clusterbench.schema import Results

__all__ = ["NAME", "HostCoverage", "coverage"]

NAME = "device coverage"


@dataclass(frozen=True, kw_only=True, slots=True)
class HostCoverage:
    host: str
    num_gpus: int
    """GPUs the host inventory lists."""
    num_measured: int
    """Of them, devices that recorded at least one measurement."""


def coverage(results: Results, run: RunView) -> list[HostCoverage]:
    """Each host that lists GPUs, in inventory order: its GPUs and how many were measured."""
    measured: dict[str, set[str]] = defaultdict(set)
    for m in results.measurements:
        measured[m.host].add(m.device)
    return [
        HostCoverage(
            host=h.hostname,
            num_gpus=len(h.gpus),
            num_measured=min(len(measured[h.hostname]), len(h.gpus)),
        )
        for h in results.hosts
        if h.gpus
    ]
