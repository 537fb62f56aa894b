"""The ranks of a team's traces timed against each other, for :mod:`.attribution`: their
collectives matched (the k-th collective of step N is the same operation on every rank) and
put on one clock (:func:`~clusterbench.traces.ranks.on_common_clock`), what each rank waited
for the others and how late it started, the straggler's what-if saving, and what the traces
say about themselves (collectives not matched, the clocks' fit, ranks left out, traces read as
one window).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from clusterbench.analyses.trace.file import RankTrace
from clusterbench.traces import ranks, whatif
from clusterbench.traces import trace as kineto
from clusterbench.traces.ranks import ClockFit

__all__ = ["RankTiming", "Timing", "rank_timing", "time_ranks", "timing_notes"]


@dataclass(kw_only=True)
class Timing:
    """The ranks timed against each other: ``group`` (indices into the traces) on one clock."""

    group: list[int] = field(default_factory=list)
    waits: list[dict[int, list[float]]] = field(default_factory=list)
    start_waits: dict[int, dict[int, list[float]]] = field(default_factory=dict)
    late: dict[int, list[float]] = field(default_factory=dict)
    spreads: list[float] = field(default_factory=list)
    last: Counter[int] = field(default_factory=Counter)
    offsets: dict[int, float] = field(default_factory=dict)
    savings: dict[int, float] = field(default_factory=dict)
    fit: ClockFit | None = None
    left_out: list[int] = field(default_factory=list)
    """Ranks without collectives in the steps the others share: not timed against them."""


def _sharing(
    per_rank: list[dict[int, tuple[kineto.Collective, ...]]], group: list[int]
) -> tuple[list[int], list[int]]:
    """(the ranks of ``group`` that hold collectives in every step where the most ranks hold
    them, the others): a rank whose trace has no collectives, or whose profiled steps are other
    steps, would leave no collective matched across all the ranks."""
    counts = Counter(n for i in group for n, cs in per_rank[i].items() if cs)
    if not counts:
        return group, []
    most = max(counts.values())
    shared = {n for n, c in counts.items() if c == most}
    kept = [i for i in group if shared <= {n for n, cs in per_rank[i].items() if cs}]
    return kept, [i for i in group if i not in kept]


def time_ranks(
    traces: list[RankTrace], per_rank: list[dict[int, tuple[kineto.Collective, ...]]]
) -> Timing:
    """Waits (duration-based, clock-free) within the ranks that share their steps; lateness,
    start waits and the straggler's saving on the common clock.  Ranks with ProfilerStep spans
    are timed among themselves; traces read as one window only where every rank is one, and
    then only if their collectives' ends agree once aligned (the k-th collective of windows
    that start apart may not be one operation)."""
    num = len(traces)
    timing = Timing(waits=[{} for _ in traces])
    stepped = [i for i, t in enumerate(traces) if not t.windowed]
    group = stepped if len(stepped) > 1 else (list(range(num)) if not stepped else [])
    group, timing.left_out = _sharing(per_rank, group)
    if len(group) < 2:
        return timing
    mine = [per_rank[i] for i in group]
    for i, waits in zip(group, ranks.collective_waits(mine), strict=True):
        timing.waits[i] = waits
    if not stepped:  # a window's first collective waits for the ranks' profilers to start:
        # unmatched (its place kept, so that the k-th wait stays the k-th collective's)
        mine = [{n: tuple(dataclasses.replace(c, doubtful=k == 0) for k, c in enumerate(cs))
                 for n, cs in r.items()} for r in mine]  # fmt: skip
    aligned, fit = ranks.on_common_clock(mine)
    timing.fit = fit
    on_one_clock = fit is not None and fit.holds
    if not on_one_clock and not stepped:
        return timing  # windows that start apart, and no clock to put them on
    timing.group = group
    spreads, late = ranks.start_lateness(aligned)
    timing.spreads = spreads
    for i, waits, lateness in zip(group, ranks.start_waits(aligned), late, strict=True):
        timing.start_waits[i] = waits
        timing.late[i] = lateness
    for _, _, same in ranks.matched_collectives(aligned):
        offsets = [c.offset_ms for c in same]
        timing.last[group[offsets.index(max(offsets))]] += 1
    if fit is not None and on_one_clock:
        timing.offsets = dict(zip(group, fit.offsets_ms, strict=True))
        common = set.intersection(*(set(r) for r in mine))
        spans = [[(s, e) for n, s, e in traces[i].steps if n in common] for i in group]
        starts = [
            sp[0][0] / 1e3 - o if sp else 0.0 for sp, o in zip(spans, fit.offsets_ms, strict=True)
        ]
        if not stepped:  # from the first timed collective on: no gap before it
            first = [next((c for n in sorted(r) for c in r[n] if not c.doubtful), None)
                     for r in aligned]  # fmt: skip
            starts = [c.at_ms or 0.0 if c is not None else 0.0 for c in first]
        if all(spans):
            savings = whatif.straggler_savings(
                aligned, starts_ms=starts, num_steps=len(common),
            )  # fmt: skip
            timing.savings = dict(zip(group, savings, strict=True))
    return timing


@dataclass(frozen=True, slots=True)
class RankTiming:
    """What one rank's second pass needs of the ranks' timing."""

    waits: dict[int, list[float]]
    start_waits: dict[int, list[float]] | None
    """None: the rank is not timed against the others."""
    late: list[float]
    last: int
    offset_ms: float | None
    saving_ms: float | None


def rank_timing(timing: Timing, i: int) -> RankTiming:
    """The part of ``timing`` of the ``i``-th trace."""
    return RankTiming(
        waits=timing.waits[i],
        start_waits=timing.start_waits.get(i) if i in timing.group else None,
        late=timing.late.get(i, []),
        last=timing.last[i],
        offset_ms=timing.offsets.get(i),
        saving_ms=timing.savings.get(i),
    )


def timing_notes(
    traces: list[RankTrace],
    per_rank: list[dict[int, tuple[kineto.Collective, ...]]],
    timing: Timing,
) -> list[tuple[str, str, str]]:
    """(finding id, message, fix) of what the traces say about themselves: collectives not
    matched, the clocks' fit, ranks left out of the timing, traces read as one window."""
    notes: list[tuple[str, str, str]] = []
    mine = [per_rank[i] for i in timing.group] if timing.group else per_rank
    differ = ranks.mismatched(mine) if len(mine) > 1 else 0
    if differ:
        notes.append((
            "attribution.trace.unmatched",
            f"{differ} collective(s) run different kernels on different ranks at the same place "
            "in a step (a sampled trace, or process groups whose collectives interleave "
            "differently): not matched, so their waits and lateness are not counted",
            "profile every rank over the same steps, whole (no sampling)",
        ))  # fmt: skip
    fit = timing.fit
    if fit is not None:
        group = timing.group or list(range(len(traces)))
        far = max(range(len(fit.offsets_ms)), key=lambda i: abs(fit.offsets_ms[i]))
        aligned = fit.holds
        notes.append((
            "attribution.trace.clock",
            f"The ranks' clocks aligned on the ends of {fit.num_collectives} matched "
            f"collectives: moved by up to {fit.moved_ms:.3f} ms (rank "
            f"{traces[group[far]].rank}); the ends then agree within {fit.residual_ms:.3f} ms "
            f"(median; at most {fit.residual_max_ms:.3f} ms)"
            + ("" if aligned else f", more than the {fit.tolerance_ms:.1f} ms that shows one "
               "collective matched on every rank: lateness is measured from each rank's own "
               "step start instead"),
            "" if aligned else "profile every rank over the same steps, whole (no sampling)",
        ))  # fmt: skip
    if timing.left_out:
        named = ", ".join(str(traces[i].rank) for i in timing.left_out)
        notes.append((
            "attribution.trace.not_timed",
            f"rank(s) {named}: no collectives in the profiled steps the other ranks share (a "
            "trace without its collectives, or other steps profiled): left out of the matching, "
            "the clock and the straggler; the others are timed among themselves",
            "profile every rank over the same steps, with its device activity "
            "(ProfilerActivity.CUDA)",
        ))  # fmt: skip
    windowed = [t for t in traces if t.windowed]
    if windowed:
        timed = (
            "timed against each other on their aligned clocks"
            if (len(windowed) == len(traces) and timing.group)
            else "not timed against each other"
        )
        notes.append((
            "attribution.trace.window",
            f"{len(windowed)} trace(s) without ProfilerStep#N spans ("
            + ", ".join(t.path.name for t in windowed[:3])
            + (", ..." if len(windowed) > 3 else "")
            + f"): each is read as one window, from its first activity to its last, {timed}"
            + ("" if len(windowed) == len(traces) else
               "; the ranks with steps are timed among themselves")
            + "; a torch.profiler schedule (docs: the analyze recipe) gives steps to compare",
            "profile with a torch.profiler schedule (wait, warmup, active) and call "
            "prof.step() once per training step",
        ))  # fmt: skip
    return notes
