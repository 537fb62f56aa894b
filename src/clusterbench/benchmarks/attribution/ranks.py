"""The ranks' collectives side by side: each rank's profiled steps hold the same collectives in
the same order (the k-th all-reduce of step N is the same operation everywhere), so matching
them by (N, k) tells who waited for whom.  Pure functions over what the ranks exchanged, per
rank ``{N: [Collective, ...]}`` (:func:`.attribution_trace.step_collectives`).

Offsets are from each rank's own step start, so no clock is shared between hosts: the steps
of synchronous training start together to within the spread of the previous step's end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from clusterbench.benchmarks.attribution.trace import Collective

__all__ = [
    "collective_waits",
    "matched_collectives",
    "mismatched",
    "start_lateness",
    "start_waits",
]

PerRank = Sequence[Mapping[int, Sequence[Collective]]]


def _alike(same: Sequence[Collective]) -> bool:
    """Whether the ranks' k-th collectives are one operation: the same kernel (NCCL picks the
    same algorithm and protocol on every rank).  Not so in a sampled trace, or where ranks
    run collectives of different process groups in different orders: then not matched."""
    return len({c.name for c in same}) == 1


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
