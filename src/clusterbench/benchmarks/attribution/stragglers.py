"""The ranks the attribution benchmark judges against each other: the straggler everyone waits
for (:func:`find_straggler`, :func:`straggler_findings`) and the ranks busy for longer than the
others (:func:`busy_time_outliers`); with what the verdict (:mod:`.findings`) reads the same
way: each rank's measurements over the profiled steps, the traces' what-if savings per rank,
and a saving stated against the step.

Pure functions: a :class:`~clusterbench.schema.Results` in, findings out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from clusterbench.benchmarks.attribution import AttributionMetrics
from clusterbench.judging.measurements import scope_label, shared_cpu_hosts
from clusterbench.judging.peers import robust_outliers
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, Results, Severity

__all__ = [
    "Straggler",
    "busy_time_outliers",
    "find_straggler",
    "format_gain",
    "ranks_with",
    "saving_period",
    "straggler_findings",
    "whatif_savings",
]

_MIN_SPREAD_MS = 1.0
"""A straggler also starts at least this many ms after the earliest rank."""
_NOISE_TIMES = 3.0
"""A straggler's what-if saving is at least this many times the other ranks' median saving:
ranks whose steps jitter (two ranks sharing two cores, each sleeping in its DataLoader) get
savings of 20 and 45 ms a step from the jitter alone, neither a straggler."""


def _by_rank(source: Results | Iterable[Measurement]) -> dict[int, dict[Metric, Measurement]]:
    """Per rank, its measurement of each metric over the profiled steps (rank_step=mean); not
    the accumulation sweep's (one per count) nor the top kernels (one per kernel)."""
    metrics = AttributionMetrics.all()
    out: dict[int, dict[Metric, Measurement]] = defaultdict(dict)
    ms = source.measurements if isinstance(source, Results) else source
    for m in ms:  # in recorded order: the ranks' order shows in evidence
        if "accum_steps" in m.params or "kernel" in m.params or "whatif" in m.params:
            continue
        metric = next((x for x in metrics if x.matches(m)), None)
        if metric is not None and m.params.get("rank_step", "mean") == "mean":
            out[m.rank][metric] = m
    return out


def ranks_with(
    source: Results | Iterable[Measurement], *metrics: Metric
) -> dict[int, dict[Metric, Measurement]]:
    """:func:`_by_rank`, only the ranks that have every one of ``metrics``."""
    return {r: ms for r, ms in _by_rank(source).items() if all(x in ms for x in metrics)}


def whatif_savings(source: Results | Iterable[Measurement]) -> dict[str, dict[int, float]]:
    """Per fix (``whatif`` param: straggler, input_wait, launch_gaps, exposed_communication),
    each rank's saving per step in ms, as ``clusterbench analyze`` reads it from the trace."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for m in AttributionMetrics.whatif_saving_ms.select(source):
        if m.params.get("rank_step", "mean") == "mean":
            out[str(m.params["whatif"])][m.rank] = m.value
    return dict(out)


def _floor_ms(step_ms: float, min_pct: float) -> float:
    """What a rank finding must be worth to be raised: at least 1 ms and ``min_pct`` of the
    step (a 0.2 ms difference in a 16 ms step is noise, not a straggler)."""
    return max(_MIN_SPREAD_MS, step_ms * min_pct / 100)


def format_gain(saved_ms: float, step_ms: float, *, per: str = "step") -> str:
    """A saving stated against the step: ``12.0 ms per step (8% of the 150.0 ms step)``."""
    pct = 100 * saved_ms / step_ms if step_ms > 0 else 0.0
    return f"{saved_ms:.1f} ms per {per} ({pct:.0f}% of the {step_ms:.1f} ms {per})"


def saving_period(results: Results) -> str:
    """What a saving is counted over: a step, or the one window of traces without
    ProfilerStep#N spans (``clusterbench analyze``)."""
    windowed = [m.params.get("windowed") for m in AttributionMetrics.step_time_ms.select(results)]
    return "profiled window" if windowed and all(windowed) else "step"


@dataclass(frozen=True, slots=True)
class Straggler:
    """The rank everyone waits for (:func:`find_straggler`)."""

    rank: int
    step_time: Measurement
    """Its median profiled step time (which names its host and device)."""
    lateness_ms: dict[int, float]
    """Every rank's collective start lateness, ms."""
    coordination_pct: dict[int, float]
    """Every rank's waiting share of the step, %: inside collectives for the latest rank where
    the ranks have it (``wait_pct`` of ``clusterbench analyze``), else its coordination."""
    step_ms: float
    """The ranks' median step time."""
    in_collectives: bool = False
    """Whether ``coordination_pct`` is the wait inside collectives."""
    saving_ms: float | None = None
    """Per step, what the job would save had it entered its collectives with the others (the
    trace's what-if, where the ranks were put on a common clock)."""
    last_arrivals: int | None = None
    """At how many matched collectives it entered last."""
    num_collectives: int | None = None
    """How many collectives were matched across the ranks."""


def find_straggler(
    measurements: Results | Iterable[Measurement], *, min_spread_pct: float
) -> Straggler | None:
    """The rank everyone waits for.  Where the ranks' traces were put on a common clock
    (``clusterbench analyze``), the rank whose lateness costs the job the most: the largest
    what-if saving, at least 1 ms, ``min_spread_pct`` of the step and three times the other
    ranks' median saving (what jitter alone gives a rank).  Else the rank that
    starts its collectives last, by a spread above ``min_spread_pct`` of the step, and has
    the least coordination while the others wait."""
    ranks = ranks_with(
        measurements,
        AttributionMetrics.collective_start_lateness_ms,
        AttributionMetrics.coordination,
        AttributionMetrics.step_time_ms,
    )
    if len(ranks) < 2:
        return None
    late = {r: ms[AttributionMetrics.collective_start_lateness_ms].value for r, ms in ranks.items()}
    step_ms = statistics.median(ms[AttributionMetrics.step_time_ms].value for ms in ranks.values())
    coordination = {r: ms[AttributionMetrics.coordination].value for r, ms in ranks.items()}
    # the time inside collectives waiting for the latest rank, where measured apart: a rank
    # late for a host-side reason (its input) is idle itself, so its coordination is no less
    waited = {r: ms[AttributionMetrics.wait_pct].value for r, ms in ranks.items()
              if AttributionMetrics.wait_pct in ms}  # fmt: skip
    in_collectives = set(waited) == set(ranks)
    waiting = waited if in_collectives else coordination
    savings = whatif_savings(measurements).get("straggler", {})
    arrivals = {r: ms[AttributionMetrics.collective_start_lateness_ms].params.get("last_arrivals")
                for r, ms in ranks.items()}  # fmt: skip
    if set(savings) >= set(ranks):
        rank = max(ranks, key=lambda r: savings[r])
        # noise alone gives every rank a saving (its gaps now and then the longest): the
        # straggler's must stand out, three times the other ranks' median
        noise = statistics.median(savings[r] for r in ranks if r != rank)
        if savings[rank] < max(_floor_ms(step_ms, min_spread_pct), _NOISE_TIMES * noise):
            return None
    else:
        rank = max(late, key=lambda r: late[r])
        waits_least = waiting[rank] < min(v for r, v in waiting.items() if r != rank)
        if late[rank] < _floor_ms(step_ms, min_spread_pct) or not waits_least:
            return None
    count = arrivals.get(rank)
    matched = ranks[rank][AttributionMetrics.collective_start_lateness_ms].params.get(
        "num_collectives"
    )
    return Straggler(rank, ranks[rank][AttributionMetrics.step_time_ms], late, waiting, step_ms,
                     in_collectives, savings.get(rank),
                     int(count) if isinstance(count, int) else None,
                     int(matched) if isinstance(matched, int) else None)  # fmt: skip


def straggler_findings(results: Results, *, min_spread_pct: float) -> list[Finding]:
    """The straggler (:func:`find_straggler`) -> fail (warn for ``clusterbench analyze`` among
    CPU ranks sharing a host's cores; info for a run of clusterbench's own there)."""
    found = find_straggler(results, min_spread_pct=min_spread_pct)
    if found is None:
        return []
    rank, m, late = found.rank, found.step_time, found.lateness_ms
    ranks_late = {x.rank: x for x in AttributionMetrics.collective_start_lateness_ms.select(results)
                  if x.params.get("rank_step", "mean") == "mean"}  # fmt: skip
    # the rank's own trace: kept in the run folder, or the file clusterbench analyze read
    trace_name = str(m.params.get("trace") or f"traces/rank-{rank:05d}.pt.trace.json.gz")
    own = found.coordination_pct[rank]
    others = [v for r, v in found.coordination_pct.items() if r != rank]
    where = " in collectives" if found.in_collectives else ""
    severity, note = _judged(results, m.host)
    if found.saving_ms is not None:
        last = (f" last at {found.last_arrivals} of the {found.num_collectives} matched,"
                if found.last_arrivals and found.num_collectives else "")  # fmt: skip
        message = (
            f"Rank {rank} ({m.host} {m.device}) is the straggler: on the ranks' common clock it "
            f"enters its collectives{last} {late[rank]:.1f} ms after the earliest rank "
            f"(median{_at_most(ranks_late.get(rank))}), and waits {own:.0f}% of the step{where} "
            "while the others wait "
            f"{statistics.fmean(others):.0f}%. Had it entered them with the others, the job "
            "would save "
            f"{format_gain(found.saving_ms, found.step_ms, per=saving_period(results))}.{note}"
        )
    else:
        message = (
            f"Rank {rank} ({m.host} {m.device}) is the straggler: it starts its collectives "
            f"{late[rank]:.1f} ms after the earliest rank (median; step {found.step_ms:.1f} "
            f"ms), and spends {own:.0f}% of the step waiting{where} while the others wait "
            f"{statistics.fmean(others):.0f}%.{note}"
        )
        if results.run.suite == "analyze":
            # traces whose clocks could not be aligned: lateness from each rank's own step
            # start, which a rank that began its step early and then waited shows too
            severity = "info"
            message += (
                " (The ranks' clocks could not be aligned on their collectives' ends, so this "
                "lateness is from each rank's own step start: stated, not judged.)"
            )
    evidence: dict[str, object] = {
        "rank": rank,
        "host": m.host,
        "device": m.device,
        "lateness_ms": late,
        "coordination_pct": found.coordination_pct,
    }
    if found.saving_ms is not None:
        evidence |= {"saving_ms": found.saving_ms, "step_ms": found.step_ms}
    return [
        Finding(
            id="attribution.straggler",
            severity=severity,
            scope=scope_label(m.host, m.device),
            message=message,
            evidence=evidence,
            fix=(
                "Look at that GPU: clocks and throttling (nvidia-smi -q -d PERFORMANCE,CLOCK), "
                f"its Level 1 results against its peers, its host's CPU load and input pipeline; "
                f"its trace ({trace_name}) shows what it does while the others wait."
                if not m.device.startswith("cpu")
                else "Look at that rank's cores: other processes on them (top, taskset -p PID) "
                f"and its input pipeline; its trace ({trace_name}) shows what it does while the "
                "others wait."
            ),
        )
    ]


def _at_most(m: Measurement | None) -> str:
    """'; at most 40.2 ms' where the lateness's spread says more than its median."""
    if m is None or m.stats is None or m.stats.max <= 2 * max(m.value, 0.1):
        return ""
    return f"; at most {m.stats.max:.1f} ms"


def _judged(results: Results, host: str) -> tuple[Severity, str]:
    """A rank finding's severity, and what its message adds: fail, or where ``host``'s CPU
    ranks share its cores, info (they are not judged against each other) — warn for a team's
    own traces, whose user asked exactly which rank holds the others back."""
    n = shared_cpu_hosts(results.measurements).get(host)
    if n and results.run.suite == "analyze":
        return "warn", f" ({n} CPU ranks share the cores of {host}: they slow each other too.)"
    if n:
        return "info", f" ({n} CPU ranks share the cores of {host}: reported, not judged.)"
    return "fail", ""


def busy_time_outliers(
    results: Results, *, mads: float, min_rel: float, min_spread_pct: float = 0.0
) -> list[Finding]:
    """Per-rank step-time outliers. Synchronous training gives every rank the same wall step
    (they wait for each other), so the busy part of the step (step x (100 - coordination)%)
    is what differs: a rank whose busy time is ``mads`` scaled MADs and ``min_rel`` above the
    others' median, by at least 1 ms and ``min_spread_pct`` of the step, is slow in itself
    (needs 3 or more ranks).  Where the traces' what-if says what the job would save were that
    rank on time (``clusterbench analyze``), that saving must pass the same floor: a rank busy
    for longer that nobody waits for costs nothing."""
    ranks = ranks_with(results, AttributionMetrics.coordination, AttributionMetrics.step_time_ms)
    busy = {
        r: ms[AttributionMetrics.step_time_ms].value
        * (100.0 - ms[AttributionMetrics.coordination].value)
        / 100.0
        for r, ms in ranks.items()
    }
    if not busy:
        return []
    step_ms = statistics.median(ms[AttributionMetrics.step_time_ms].value for ms in ranks.values())
    floor = _floor_ms(step_ms, min_spread_pct)
    savings = whatif_savings(results).get("straggler", {})
    out = []
    for r in robust_outliers(busy, mads=mads, min_rel=min_rel, better="lower"):
        value, median = busy[r], statistics.median(busy.values())
        if value - median < floor or (r in savings and savings[r] < floor):
            continue
        m = ranks[r][AttributionMetrics.step_time_ms]
        severity, note = _judged(results, m.host)
        per = saving_period(results)
        cost = (
            f"had it been on time, the job would save {format_gain(savings[r], step_ms, per=per)}"
            if r in savings
            else "in synchronous training the others wait for it"
        )
        out.append(
            Finding(
                id="attribution.slow_rank",
                severity=severity,
                scope=scope_label(m.host, m.device),
                message=(
                    f"Rank {r} ({m.host} {m.device}) is busy {value:.1f} ms per step against "
                    f"the other ranks' median {median:.1f} ms ({value / median - 1:.0%} more): "
                    f"{cost}.{note}"
                ),
                evidence={"rank": r, "busy_ms": busy, "median_ms": median}
                | ({"saving_ms": savings[r]} if r in savings else {}),
                fix=(
                    "Compare that GPU's Level 1 results (gemm, memory) with its peers, check its "
                    "clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE,CLOCK) and its "
                    "host's CPU load; its trace shows which kernels take longer."
                ),
            )
        )
    return out
