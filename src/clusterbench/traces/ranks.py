"""The ranks' collectives side by side: each rank's profiled steps hold the same collectives in
the same order (the k-th all-reduce of step N is the same operation everywhere), so matching
them by (N, k) tells who waited for whom.  Pure functions over what the ranks exchanged, per
rank ``{N: [Collective, ...]}`` (:func:`.attribution_trace.step_collectives`).

Offsets are from each rank's own step start until the ranks' clocks are aligned
(:func:`on_common_clock`): hosts do not share a clock, and ranks start their steps apart (by
up to the previous step's spread), so lateness measured from each rank's own step start blames
a rank that merely began its step early and then waited.  A collective ends at the same moment
on every member (none can finish before the last one's data has arrived), so the ends of the
matched collectives give each rank's clock offset; on that common clock the rank that enters
a collective last is the one the others wait for.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from clusterbench.traces.trace import Collective

__all__ = [
    "ClockFit",
    "collective_waits",
    "matched_collectives",
    "mismatched",
    "on_common_clock",
    "start_lateness",
    "start_waits",
]

PerRank = Sequence[Mapping[int, Sequence[Collective]]]


def _alike(same: Sequence[Collective]) -> bool:
    """Whether the ranks' k-th collectives are one operation: the same kernel (NCCL picks the
    same algorithm and protocol on every rank).  Not so in a sampled trace, or where ranks
    run collectives of different process groups in different orders: then not matched."""
    return len({c.name for c in same}) == 1 and not any(c.doubtful for c in same)


def matched_collectives(per_rank: PerRank) -> Iterator[tuple[int, int, list[Collective]]]:
    """(N, k, every rank's k-th collective of step N) for the steps all ranks profiled, in
    order; a step's collectives beyond the fewest any rank recorded there, and those whose
    kernels differ across ranks, are not matched."""
    steps = sorted(set.intersection(*(set(r) for r in per_rank))) if per_rank else []
    for n in steps:
        for k in range(min(len(r[n]) for r in per_rank)):
            same = [r[n][k] for r in per_rank]
            if _alike(same):
                yield n, k, same


def mismatched(per_rank: PerRank) -> int:
    """How many k-th collectives of the steps all ranks profiled differ across ranks (and so
    are not matched)."""
    steps = set.intersection(*(set(r) for r in per_rank)) if per_rank else set()
    return sum(
        not _alike([r[n][k] for r in per_rank])
        for n in steps
        for k in range(min(len(r[n]) for r in per_rank))
    )


def collective_waits(per_rank: PerRank) -> list[dict[int, list[float]]]:
    """Per rank, per step N, per k: ms the k-th collective waited for the last rank to arrive.

    Clock-free: the last rank to arrive waits for nobody, so its collective takes the pure
    transfer time, the shortest over the ranks; wait = duration - the shortest duration.
    Collectives beyond the fewest any rank recorded in that step, or whose kernels differ
    across ranks, are not matched (wait 0).
    """
    steps = set.intersection(*(set(r) for r in per_rank)) if per_rank else set()
    out: list[dict[int, list[float]]] = [{} for _ in per_rank]
    for n in steps:
        count = min(len(r[n]) for r in per_rank)
        alike = [_alike([r[n][k] for r in per_rank]) for k in range(count)]
        shortest = [min(r[n][k].duration_ms for r in per_rank) for k in range(count)]
        for waits, r in zip(out, per_rank, strict=True):
            waits[n] = [r[n][k].duration_ms - shortest[k] if alike[k] else 0.0
                        for k in range(count)]  # fmt: skip
    return out


def start_lateness(per_rank: PerRank) -> tuple[list[float], list[list[float]]]:
    """(spread of each matched collective's start offsets across ranks, and per rank its
    lateness behind the earliest rank for each), all in ms, offsets from each rank's step start.
    """
    spreads: list[float] = []
    late: list[list[float]] = [[] for _ in per_rank]
    for _, _, same in matched_collectives(per_rank):
        offsets = [c.offset_ms for c in same]
        first = min(offsets)
        spreads.append(max(offsets) - first)
        for mine, offset in zip(late, offsets, strict=True):
            mine.append(offset - first)
    return spreads, late


def start_waits(per_rank: PerRank) -> list[dict[int, list[float]]]:
    """Per rank, per step N, per k: ms from this rank's start of the k-th collective to the
    latest rank's start of it (the time it waited inside the collective for the slowest rank),
    at most the collective's own duration; 0 for the latest rank.  Collectives beyond the fewest
    any rank recorded in the step are left out; those whose kernels differ across ranks wait 0
    (not matched), so that the k-th wait stays the k-th collective's."""
    steps = sorted(set.intersection(*(set(r) for r in per_rank))) if per_rank else []
    out: list[dict[int, list[float]]] = [{} for _ in per_rank]
    for n in steps:
        for k in range(min(len(r[n]) for r in per_rank)):
            same = [r[n][k] for r in per_rank]
            latest = max(c.offset_ms for c in same)
            for waits, c in zip(out, same, strict=True):
                wait = min(latest - c.offset_ms, c.duration_ms) if _alike(same) else 0.0
                waits.setdefault(n, []).append(wait)
    return out


@dataclass(frozen=True, slots=True)
class ClockFit:
    """How the ranks' clocks were aligned on the ends of their matched collectives."""

    offsets_ms: list[float]
    """Per rank (in the order given), what was taken from its clock: its offset from the first
    rank's clock, the median over the matched collectives of the difference of their ends."""
    residual_ms: float
    """After the alignment, the median over the matched collectives of the spread of their ends
    across ranks (max - min): how well the ends agree."""
    residual_max_ms: float
    num_collectives: int
    tolerance_ms: float
    """The residual up to which the alignment stands (:func:`on_common_clock`)."""

    @property
    def moved_ms(self) -> float:
        """The largest correction applied to any rank's clock."""
        return max((abs(o) for o in self.offsets_ms), default=0.0)

    @property
    def holds(self) -> bool:
        return self.residual_ms <= self.tolerance_ms


_DOUBTFUL = 10.0
"""A matched collective whose aligned ends disagree by this many times the alignment's
tolerance is no one operation: gloo's members on shared cores end up to some 3 ms apart, a
collective matched with another by hundreds."""


def on_common_clock(
    per_rank: PerRank, *, min_tolerance_ms: float = 0.5
) -> tuple[list[dict[int, list[Collective]]], ClockFit | None]:
    """The ranks' collectives with their offsets on one clock: each rank's clock is moved by the
    median difference of its matched collectives' ends from the first rank's (a collective ends
    together on every member), and each offset becomes the collective's aligned start from the
    earliest aligned start of any rank in that step, so lateness and waits compare the moments
    the ranks entered each collective.

    The alignment stands where the ends, once aligned, agree (median spread) to within the
    most of ``min_tolerance_ms``, half the median transfer (the shortest member's duration:
    gloo's members end a share of it apart) and a quarter of the median spread of the aligned
    starts (what the alignment is for): ends that disagree by more say the k-th collectives
    are not one operation on every rank (a sampled trace), and the collectives are returned
    unchanged, offsets from each rank's own step start, with the fit that failed.  No fit
    where a rank's collectives have no start on its own clock (``at_ms``) or none is matched."""
    plain = [{n: list(cs) for n, cs in r.items()} for r in per_rank]
    matched_keys = list(matched_collectives(per_rank))
    matched = [same for _, _, same in matched_keys]
    if len(per_rank) < 2 or not matched:
        return plain, None
    if any(c.at_ms is None for same in matched for c in same):
        return plain, None
    ends = [[(c.at_ms or 0.0) + c.duration_ms for c in same] for same in matched]
    offsets = [statistics.median(e[i] - e[0] for e in ends) for i in range(len(per_rank))]

    def spread(values: list[float]) -> float:
        moved = [x - o for x, o in zip(values, offsets, strict=True)]
        return max(moved) - min(moved)

    residuals = [spread(e) for e in ends]
    starts = statistics.median(spread([c.at_ms or 0.0 for c in same]) for same in matched)
    transfer = statistics.median(min(c.duration_ms for c in same) for same in matched)
    fit = ClockFit(offsets_ms=offsets, residual_ms=statistics.median(residuals),
                   residual_max_ms=max(residuals), num_collectives=len(ends),
                   tolerance_ms=max(min_tolerance_ms, transfer / 2, starts / 4))  # fmt: skip
    if not fit.holds:
        return plain, fit
    # a matched collective whose ends still disagree by ten times the tolerance is no one
    # operation (a sampled trace, interleaved process groups): left unmatched from here on
    doubtful = {(n, k) for (n, k, _), x in zip(matched_keys, residuals, strict=True)
                if x > _DOUBTFUL * fit.tolerance_ms}  # fmt: skip
    aligned = [
        {n: [dataclasses.replace(c, at_ms=(c.at_ms or 0.0) - o, doubtful=(n, k) in doubtful)
             for k, c in enumerate(cs)] for n, cs in r.items()}
        for r, o in zip(per_rank, offsets, strict=True)
    ]  # fmt: skip
    out: list[dict[int, list[Collective]]] = [{} for _ in per_rank]
    for n in set().union(*(set(r) for r in aligned)):
        firsts = [c.at_ms or 0.0 for r in aligned for c in r.get(n, ())]
        if not firsts:
            continue
        first = min(firsts)
        for mine, r in zip(out, aligned, strict=True):
            if n in r:
                mine[n] = [dataclasses.replace(c, offset_ms=(c.at_ms or 0.0) - first) for c in r[n]]
    return out, fit
