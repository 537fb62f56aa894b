"""Soak rounds: the selected benchmarks again and again, every rank agreeing when to stop.

A soak (``--soak DURATION`` or ``--repeat N``) runs the benchmarks round after round.  Before
each round rank 0 decides whether it starts (:meth:`RoundPolicy.start_next`) and broadcasts
the decision, so that no rank runs a round the others do not: ranks whose clocks or round
times differ would otherwise wait for each other in a collective that never comes.

Each rank's ``start`` and ``end`` records carry their round; :func:`soak_info` reads the
rounds back from them for results.json (``run.soak``).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterbench.runtime.records import End, FindingRecord, Record, Start
from clusterbench.schema import ErrorRecord, Finding, SoakInfo

if TYPE_CHECKING:
    from clusterbench.runtime.dist import DistContext

__all__ = [
    "OVERRUN_FRACTION",
    "RoundPolicy",
    "last_round",
    "round_findings",
    "rounds",
    "soak_info",
    "with_round",
]

OVERRUN_FRACTION = 0.5
"""A timed soak starts another round only when at least this fraction of a round (the
previous one's time) is left: it ends at most half a round past the duration asked."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RoundPolicy:
    """How many rounds a soak runs: until ``duration_s`` has passed, or ``repeat`` rounds."""

    duration_s: float | None = None
    repeat: int | None = None

    def __post_init__(self) -> None:
        if (self.duration_s is None) == (self.repeat is None):
            raise ValueError("a soak has either a duration or a number of rounds")
        if self.repeat is not None and self.repeat < 1:
            raise ValueError(f"--repeat must be at least 1, got {self.repeat}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"--soak must be more than 0 s, got {self.duration_s}")

    def start_next(self, *, done: int, elapsed_s: float, last_round_s: float | None) -> bool:
        """Whether round ``done`` (0-based: ``done`` rounds have finished) starts, ``elapsed_s``
        into the soak, the previous round having taken ``last_round_s``.  The first round
        always starts."""
        if done == 0:
            return True
        if self.repeat is not None:
            return done < self.repeat
        assert self.duration_s is not None
        left_s = self.duration_s - elapsed_s
        return left_s >= OVERRUN_FRACTION * (last_round_s or 0.0) and left_s > 0


def rounds(
    ctx: DistContext,
    policy: RoundPolicy | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    on_round_end: Callable[[int, float], None] | None = None,
) -> Iterator[int | None]:
    """The rounds to run: ``None`` once outside a soak; else 0, 1, ... for as long as rank 0's
    :meth:`RoundPolicy.start_next` says, each decision broadcast to every rank before the
    round.  ``on_round_end(round, seconds)`` after each round (rank 0's clock)."""
    if policy is None:
        yield None
        return
    started = clock()
    done, last_s = 0, None
    while True:
        go = policy.start_next(done=done, elapsed_s=clock() - started, last_round_s=last_s)
        if not ctx.broadcast_from_root(go if ctx.rank == 0 else None):
            return
        round_started = clock()
        yield done
        last_s = clock() - round_started
        if on_round_end is not None:
            on_round_end(done, last_s)
        done += 1


# ----------------------------------------------------------------------------- the records


def _started_round(records: Sequence[Record]) -> int | None:
    return max((r.round for r in records if isinstance(r, Start) and r.round is not None),
               default=None)  # fmt: skip


def last_round(records: Sequence[Record]) -> list[Record]:
    """The records without the ``start`` and ``end`` records of earlier soak rounds: what did
    not finish, and where a rank stopped, are judged in the round the run ended in (every
    record outside a soak)."""
    last = _started_round(records)
    if last is None:
        return list(records)
    return [r for r in records if not isinstance(r, Start | End) or r.round == last]


def round_findings(records: Sequence[Record], *, keep: int | None) -> list[Finding]:
    """The findings benchmarks recorded themselves (doctor's checks); in a soak (``keep``: the
    summary's round) those of that round only, not one copy a round.  ``records`` in each
    rank's order, as :func:`~clusterbench.pipeline.assemble.dedupe` gives them."""
    current: dict[int, int | None] = {}
    out = []
    for r in records:
        if isinstance(r, Start):
            current[r.rank] = r.round
        elif isinstance(r, FindingRecord) and current.get(r.rank) in (None, keep):
            out.append(r.data)
    return out


def soak_info(
    records: Sequence[Record],
    *,
    asked: Any,
    benchmarks: Sequence[str],
    world_size: int,
    stopped: bool,
) -> SoakInfo | None:
    """How a soak's rounds went, from every rank's records; None outside a soak (``asked``:
    the run's ``config["soak"]``).  ``benchmarks``: those every round runs; ``stopped``: the
    run was interrupted or failed (in the last round started)."""
    if not isinstance(asked, dict):
        return None
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    finished: dict[tuple[int, str], set[int]] = defaultdict(set)
    start_at: dict[int, float | None] = {}
    for r in records:
        if isinstance(r, Start) and r.round is not None:
            start_at[r.rank] = r.at
            if r.at is not None:
                started[r.round] = min(started.get(r.round, r.at), r.at)
        elif isinstance(r, End) and r.round is not None:
            finished[(r.round, r.benchmark)].add(r.rank)
            at = start_at.get(r.rank)
            if at is not None and r.seconds is not None:
                ended[r.round] = max(ended.get(r.round, 0.0), at + r.seconds)
    last = _started_round(records)
    num_rounds = 0 if last is None else last + 1
    complete = [
        all(len(finished.get((k, b), ())) >= world_size for b in benchmarks)
        for k in range(num_rounds)
    ]
    completed = next((k for k, done in enumerate(complete) if not done), num_rounds)
    seconds = [
        round(ended[k] - started[k], 3) if done and k in started and k in ended else None
        for k, done in enumerate(complete)
    ]
    return SoakInfo(
        duration_s=asked.get("duration_s"),
        repeat=asked.get("repeat"),
        rounds=num_rounds,
        completed=completed,
        round_started=[started[k] for k in range(num_rounds) if k in started],
        round_seconds=seconds,
        stopped_in=num_rounds - 1 if stopped and num_rounds else None,
    )


def with_round(errors: list[ErrorRecord], records: Sequence[Record]) -> list[ErrorRecord]:
    """In a soak, each error's benchmark named with the round it failed in: ``failed in
    selftest (round 3)`` (every rank is in the same round: rank 0 starts each one for all)."""
    last = _started_round(records)
    if last is None:
        return errors
    out = []
    for err in errors:
        if err.benchmark:
            pattern = rf"\b((?:in|during) {re.escape(err.benchmark)})\b"
            message = re.sub(pattern, rf"\1 (round {last})", err.message, count=1)
            err = err.model_copy(update={"message": message})
        out.append(err)
    return out
