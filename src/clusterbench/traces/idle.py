"""Coordination idle of each profiled iteration (one optimizer step of k accumulation
micro-steps, one ``ProfilerStep#N`` span), read from one rank's trace: pure functions over
its :func:`~.attribution_trace.activities`.

Two disjoint parts of the iteration, neither of them work:

- **idle**: no device activity at all, not even a collective: host-side gaps (input, Python,
  the optimizer's host work), launch gaps, synchronisation;
- **wait**: inside a collective, from this rank's start of it to the latest rank's start of the
  same collective (:func:`.attribution_ranks.start_waits`), while no other device work runs
  (waiting hidden under compute costs nothing).

Unlike ``coordination`` (:func:`~.attribution_trace.step_breakdowns`), which takes a
collective's wait from its duration against the shortest rank's, the wait here comes from the
start times, as the straggler's lateness does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterbench.traces import trace as trace

__all__ = ["IterationIdle", "Span", "iteration_idle", "span_length", "span_overlap", "span_union"]

Span = tuple[float, float]


@dataclass(frozen=True, slots=True)
class IterationIdle:
    step: int
    """N of ProfilerStep#N."""
    iteration_ms: float
    idle_ms: float
    """No device activity at all (host-side and launch gaps)."""
    wait_ms: float
    """Inside collectives, waiting for the slowest rank to start them, with nothing else running."""

    @property
    def idle_pct(self) -> float:
        return 100.0 * self.idle_ms / self.iteration_ms if self.iteration_ms > 0 else 0.0

    @property
    def wait_pct(self) -> float:
        return 100.0 * self.wait_ms / self.iteration_ms if self.iteration_ms > 0 else 0.0


def iteration_idle(
    events: Sequence[trace.Event],
    *,
    acts: Sequence[trace.Activity],
    waits_ms: Mapping[int, Sequence[float]] | None = None,
) -> list[IterationIdle]:
    """Idle and wait of every profiled iteration of one rank's trace (``events``, its
    ``acts``).  ``waits_ms[N][k]``: how long the k-th collective of step N waited for the
    latest rank to start it (:func:`.attribution_ranks.start_waits`); none: no waits."""
    out = []
    for n, start, end in trace.step_spans(events):
        in_step = [a for a in acts if a.end_us > start and a.start_us < end]
        busy = span_union((max(a.start_us, start), min(a.end_us, end)) for a in in_step)
        colls = trace.collective_spans(in_step, start=start, end=end)
        waits = (waits_ms or {}).get(n, ())
        waiting = span_union(
            (c.start_us, min(c.start_us + 1e3 * w, end)) for c, w in zip(colls, waits, strict=False)
        )
        working = span_union(
            (max(a.start_us, start), min(a.end_us, end)) for a in in_step if a.kind != "comm"
        )
        wait_us = span_length(waiting) - span_overlap(waiting, working)
        out.append(
            IterationIdle(
                step=n,
                iteration_ms=(end - start) / 1e3,
                idle_ms=max(0.0, end - start - span_length(busy)) / 1e3,
                wait_ms=wait_us / 1e3,
            )
        )
    return out


def span_union(spans: Iterable[Span]) -> list[Span]:
    """The spans merged: sorted, disjoint, empty ones dropped."""
    merged: list[Span] = []
    for lo, hi in sorted(s for s in spans if s[1] > s[0]):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def span_length(spans: Iterable[Span]) -> float:
    return sum(hi - lo for lo, hi in spans)


def span_overlap(a: Sequence[Span], b: Sequence[Span]) -> float:
    """Length of the intersection of two merged span lists (:func:`span_union`)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
