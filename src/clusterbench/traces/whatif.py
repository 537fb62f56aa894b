"""What a fix would save, read from the trace's own timeline: pure functions over the ranks'
matched collectives on their common clock (:func:`.attribution_ranks.on_common_clock`) and
each rank's device timeline.

**The straggler.**  Synchronous training is a chain: every matched collective ends when its
last member has entered it and the data has crossed (collectives that run at once on some
rank, as DDP's buckets queued on gloo, are one link: a rank has entered it when it has
entered the last of them), and each rank's work between two
collectives (its *gap*) starts when the one before ends.  From the trace, per rank r and
collective j on the common clock::

    gap[r][0] = entry[r][0] - step_start[r];   gap[r][j] = entry[r][j] - end[r][j - 1]
    transfer[j] = median_r end[r][j] - max_r entry[r][j]        (the last arrival's own time)
    E[j] = max_r (E[j - 1] + gap[r][j]) + transfer[j]             (E[-1] + gap[r][0] = entry[r][0])
    T = max_r (E[last] + tail[r]) - min_r step_start[r],   tail[r] = step_end[r] - end[r][last]

Replaying the chain with the trace's own gaps gives back its timeline; replaying it with one
rank's gaps replaced by the median of the other ranks' (the other rank's, of two) gives the
step time had that rank entered every collective with the others.  The difference, per step,
is the saving of fixing that rank.  Unrolled, T is the sum over the links of the latest
entry (the first link's on the clock, the others' gaps), plus the transfers and the longest
tail, which no rank's fix changes: a fix changes only each link's latest entry, so the
saving is the sum of those maxima less the same sum with the rank's row replaced.

**The device timeline.**  Per rank and step: the device idle (no activity on any stream) that
overlaps the host's ``DataLoader`` ``next()`` is the input wait; the rest of the idle is launch
gaps and host work between kernels, which CUDA graphs close (an upper bound: a graph replays
the kernels back to back); the exposed communication is what overlapping it with compute would
hide (an upper bound as well: there must be compute to hide it under).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.traces import ranks
from clusterbench.traces.idle import Span, span_length, span_overlap, span_union
from clusterbench.traces.trace import Collective

__all__ = ["StepIdle", "idle_split", "straggler_savings"]


def _links(per_rank: ranks.PerRank) -> Any | None:
    """The chain's links, a ranks x links array: in the first column each rank's entry into
    the first link (on the common clock), in the others its gap, from the previous link's end
    to its entry into this one; None where nothing is matched."""
    import numpy as np

    matched: list[list[Collective]] = [same for _, _, same in ranks.matched_collectives(per_rank)]
    if not matched:
        return None
    starts = np.array([[c.at_ms or 0.0 for c in same] for same in matched]).T
    ends = starts + np.array([[c.duration_ms for c in same] for same in matched]).T
    # collectives that run at once on some rank (DDP's buckets queued on gloo, FSDP's streams)
    # are one link of the chain: a rank has entered it once it entered the last of them
    links = [[0]]
    for j in range(1, len(matched)):
        overlaps = bool((starts[:, j] < ends[:, links[-1]].max(axis=1)).any())
        links[-1].append(j) if overlaps else links.append([j])
    entry = np.stack([starts[:, link].max(axis=1) for link in links], axis=1)
    end = np.stack([ends[:, link].max(axis=1) for link in links], axis=1)
    out = np.empty_like(entry)
    out[:, 0] = entry[:, 0]
    out[:, 1:] = entry[:, 1:] - end[:, :-1]
    return out


def _median_of_others(values: Any) -> Any:
    """Per row r and column j, the median of column j without row r (a ranks x collectives
    array): from each column sorted once, the middle of what is left when r is taken out."""
    import numpy as np

    num = values.shape[0]
    order = np.argsort(values, axis=0, kind="stable")
    ordered = np.take_along_axis(values, order, axis=0)
    place = np.empty_like(order)
    np.put_along_axis(place, order, np.arange(num)[:, None].repeat(values.shape[1], 1), axis=0)

    def kth(k: int) -> Any:  # the k-th smallest of the column without row r
        return np.where(k < place, ordered[k][None, :], ordered[min(k + 1, num - 1)][None, :])

    left = num - 1
    if left % 2:
        return kth(left // 2)
    return (kth(left // 2 - 1) + kth(left // 2)) / 2


def straggler_savings(
    per_rank: ranks.PerRank, *, starts_ms: Sequence[float], num_steps: int
) -> list[float]:
    """Per rank, the ms per step the job would save had that rank entered every matched
    collective with the other ranks (its gaps replaced by the median of the others'), from the
    chain of the module docstring.  ``per_rank``: the collectives on the common clock
    (``at_ms`` aligned); ``starts_ms``: each rank's first profiled step's start on the same
    clock.  Zeros where nothing is matched."""
    import numpy as np

    num = len(per_rank)
    entries = _links(per_rank) if num > 1 else None
    if entries is None or num_steps <= 0:
        return [0.0] * num
    starts = np.asarray(starts_ms, dtype=float)
    gaps = entries.copy()
    gaps[:, 0] -= starts
    # the chain's total is the sum over collectives of the latest entry (the first column an
    # absolute time, the rest gaps after the previous end) plus the transfers and the tail,
    # which no rank's fix changes: a fix changes only the column maxima
    typical = _median_of_others(gaps)
    typical[:, 0] += starts
    top = np.sort(entries, axis=0)
    first, second = top[-1], top[-2]
    is_top = entries == first[None, :]
    # the column's latest without row r (a tie keeps the maximum), then with r's fixed value
    others = np.where(is_top & (np.sum(entries == first[None, :], axis=0) == 1)[None, :],
                      second[None, :], first[None, :])  # fmt: skip
    fixed = np.maximum(others, typical)
    saved = first.sum() - fixed.sum(axis=1)
    return [max(0.0, float(x)) / num_steps for x in saved]


@dataclass(frozen=True, slots=True)
class StepIdle:
    """One rank's step, the parts a fix could take away (ms)."""

    input_ms: float
    """Device idle while the host waits in the DataLoader's next()."""
    gaps_ms: float
    """The rest of the device idle: launch gaps, host work between kernels."""


def idle_split(busy: Iterable[Span], *, step: Span, input_spans: Iterable[Span]) -> StepIdle:
    """The device idle of ``step`` (µs spans; no activity in ``busy``), split into the part
    under the host's input spans and the rest, in ms."""
    lo, hi = step
    busy_u = span_union((max(a, lo), min(b, hi)) for a, b in busy)
    idle = _complement(busy_u, lo, hi)
    waiting = span_union((max(a, lo), min(b, hi)) for a, b in input_spans)
    input_us = span_overlap(idle, waiting)
    return StepIdle(input_ms=input_us / 1e3, gaps_ms=(span_length(idle) - input_us) / 1e3)


def _complement(merged: Sequence[Span], lo: float, hi: float) -> list[Span]:
    out, at = [], lo
    for a, b in merged:
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if hi > at:
        out.append((at, hi))
    return out
