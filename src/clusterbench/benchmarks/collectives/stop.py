"""When the collectives size sweep stops growing: the busbw plateau.

With ``sweep_stop`` on (GPU quick and standard suites) the sizes of one op on one group stop
growing once ``plateau_patience`` successive sizes from ``plateau_min_bytes`` on each add less
than ``plateau_tolerance`` to the best busbw before them (:class:`.sweep_stop.PlateauRule`):
the link's bandwidth has been reached, and larger messages would only take longer.  The figure
is the back-to-back busbw (blocking where back-to-back is not timed) that every rank of the
group computes from the times gathered over it, so all of them stop at the same size.  Sizes
below ``plateau_min_bytes`` (latency-bound) always run: the alpha-beta fit needs them.

What the analysis reads is kept: the largest size measured is on the plateau (the busbw
verdicts and the intra/inter-node ratio use it), node pairs are measured at one size only and
never stop, and the NCCL tuning sweep has sizes of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterbench.benchmarks.collectives.settings import CollectivesConfig
from clusterbench.benchmarks.sweep_stop import SweepStop, plateau_stop, stop_finding
from clusterbench.collective_facts import Mode
from clusterbench.schema import Finding
from clusterbench.units import format_bytes

__all__ = ["curve_mode", "size_stop", "stops_finding"]


def curve_mode(cfg: CollectivesConfig) -> Mode | None:
    """The timing mode whose busbw the rule follows; None: no rule (off, or graph mode only)."""
    if not cfg.sweep_stop:
        return None
    return next((m for m in ("back_to_back", "blocking") if m in cfg.modes), None)


def size_stop(
    cfg: CollectivesConfig, *, sweep: str, sizes: Sequence[int], busbw: Sequence[float]
) -> SweepStop | None:
    """The stop after the first ``len(busbw)`` of ``sizes`` (their busbw in GB/s, in order);
    None: go on (or nothing left)."""
    done = len(busbw)
    first = next((i for i, s in enumerate(sizes[:done]) if s >= cfg.plateau_min_bytes), done)
    points = [(format_bytes(s), v) for s, v in zip(sizes, busbw, strict=False)]
    return plateau_stop(
        cfg.plateau(), sweep=sweep, points=points, rest=[format_bytes(s) for s in sizes[done:]],
        noun="sizes", unit="GB/s busbw", first=first,
    )  # fmt: skip


def stops_finding(cfg: CollectivesConfig, stops: Sequence[SweepStop], *, scope: str) -> Finding:
    """The ``collectives.sweep_stopped`` info of the groups this rank records."""
    sizes = f"sizes from {format_bytes(cfg.plateau_min_bytes)} on"
    rule = cfg.plateau().describe(points=sizes, figure="busbw")
    settings = {**cfg.plateau().params(), "min_bytes": cfg.plateau_min_bytes}
    return stop_finding("collectives", stops, scope=scope, rule=rule, settings=settings)
