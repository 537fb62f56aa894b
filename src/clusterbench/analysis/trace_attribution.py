"""A team's own traces attributed as the attribution benchmark attributes clusterbench's: per
rank and profiled step, compute, memory, communication (exposed; the overlapped part apart)
and coordination; the ranks' collectives matched, so that the time a collective waited for
the last rank is coordination and the rank that arrives last is named; the top kernels by
time with their class.  What :func:`measurements` gives is the attribution benchmark's
measurements (params ``source=trace``), so its findings, section and figures judge them.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from clusterbench.analysis.trace_file import RankTrace
from clusterbench.benchmarks.attribution import AttributionMetrics, idle, ranks
from clusterbench.benchmarks.attribution import trace as kineto
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, ParamValue, Stats

__all__ = ["KernelTime", "RankAttribution", "TraceAttribution", "attribute", "measurements"]


@dataclass(frozen=True, slots=True)
class KernelTime:
    name: str
    kind: str
    """compute, memory or comm."""
    total_ms: float
    calls: int
    share_pct: float
    """Of the rank's profiled steps' time."""


@dataclass(kw_only=True)
class RankAttribution:
    trace: RankTrace
    steps: list[kineto.StepBreakdown]
    lateness_ms: list[float] = field(default_factory=list)
    """Per matched collective, how far behind the earliest rank this rank started it."""
    last_arrivals: int = 0
    """Matched collectives this rank was the last to start."""
    wait_pct: list[float] = field(default_factory=list)
    """Per step, % of it spent inside collectives until the latest rank started them, with no
    other device work (:func:`~clusterbench.benchmarks.attribution.idle.iteration_idle`)."""
    kernels: list[KernelTime] = field(default_factory=list)


@dataclass(kw_only=True)
class TraceAttribution:
    ranks: list[RankAttribution]
    spreads_ms: list[float] = field(default_factory=list)
    """Per matched collective, the spread of its start offsets across ranks."""
    matched: int = 0
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    """(finding id, message, fix) of what the traces say about themselves."""


def _step_event(n: int, start: float, end: float) -> dict[str, object]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": start,
            "dur": end - start}  # fmt: skip


def attribute(traces: list[RankTrace], *, top: int = 10) -> TraceAttribution:
    """Every rank's steps split into the four classes, after the ranks' collectives are
    matched (the k-th collective of step N is the same operation on every rank)."""
    traces = sorted(traces, key=lambda t: t.rank)
    acts: list[dict[int, list[kineto.Activity]]] = []
    per_rank: list[dict[int, tuple[kineto.Collective, ...]]] = []
    for t in traces:
        mine = {n: t.activities(start, end) for n, start, end in t.steps}
        acts.append(mine)
        collectives: dict[int, tuple[kineto.Collective, ...]] = {}
        for n, start, end in t.steps:
            collectives.update(kineto.step_collectives([_step_event(n, start, end)], acts=mine[n]))
        per_rank.append(collectives)
    waits = ranks.collective_waits(per_rank) if len(traces) > 1 else [{} for _ in traces]
    # start offsets are from each rank's step start: a window (no ProfilerStep spans) starts
    # at each rank's first activity, which the ranks do not share
    timed = len(traces) > 1 and not any(t.windowed for t in traces)
    spreads, late = ranks.start_lateness(per_rank) if timed else ([], [[]])
    start_waits = ranks.start_waits(per_rank) if timed else [{} for _ in traces]
    last = Counter[int]()
    for _, _, same in ranks.matched_collectives(per_rank) if timed else ():
        offsets = [c.offset_ms for c in same]
        last[traces[offsets.index(max(offsets))].rank] += 1
    out = []
    for i, t in enumerate(traces):
        steps = []
        wait_pct: list[float] = []
        for n, start, end in t.steps:
            steps += kineto.step_breakdowns([_step_event(n, start, end)], acts=acts[i][n],
                                           waits_ms=waits[i])  # fmt: skip
            if timed:
                (it,) = idle.iteration_idle([_step_event(n, start, end)], acts=acts[i][n],
                                            waits_ms=start_waits[i])  # fmt: skip
                wait_pct.append(it.wait_pct)
        out.append(
            RankAttribution(
                trace=t,
                steps=steps,
                lateness_ms=late[i] if i < len(late) else [],
                last_arrivals=last[t.rank],
                wait_pct=wait_pct,
                kernels=_top_kernels(t, acts[i], top=top),
            )
        )
    notes: list[tuple[str, str, str]] = []
    differ = ranks.mismatched(per_rank) if len(traces) > 1 else 0
    if differ:
        notes.append((
            "attribution.trace.unmatched",
            f"{differ} collective(s) run different kernels on different ranks at the same place "
            "in a step (a sampled trace, or process groups whose collectives interleave "
            "differently): not matched, so their waits and lateness are not counted",
            "profile every rank over the same steps, whole (no sampling)",
        ))  # fmt: skip
    windowed = [t for t in traces if t.windowed]
    if windowed:
        notes.append((
            "attribution.trace.window",
            f"{len(windowed)} trace(s) without ProfilerStep#N spans ("
            + ", ".join(t.path.name for t in windowed[:3])
            + (", ..." if len(windowed) > 3 else "")
            + "): each is read as one window, from its first activity to its last, and the "
            "ranks' collectives are matched for their waits but not timed against each other "
            "(the windows start apart); a torch.profiler schedule (docs: the analyze recipe) "
            "gives steps to compare",
            "profile with a torch.profiler schedule (wait, warmup, active) and call "
            "prof.step() once per training step",
        ))  # fmt: skip
    return TraceAttribution(ranks=out, spreads_ms=spreads, matched=len(spreads), notes=notes)


def _top_kernels(
    t: RankTrace, acts: dict[int, list[kineto.Activity]], *, top: int
) -> list[KernelTime]:
    """The names with the most time inside the profiled steps: a kernel's time on the device,
    a host op's own time (:func:`_take_children_out`); each clipped to its step."""
    total: dict[tuple[str, str], float] = defaultdict(float)
    calls: Counter[tuple[str, str]] = Counter()
    window = sum(end - start for _, start, end in t.steps)
    for n, start, end in t.steps:
        clipped = [(a, max(a.start_us, start), min(a.end_us, end)) for a in acts[n]]
        own = dict(enumerate(hi - lo for _, lo, hi in clipped))
        if not t.device:
            _take_children_out(clipped, own)
        for i, (a, _, _) in enumerate(clipped):
            key = (a.name, a.kind)
            total[key] += own[i]
            calls[key] += 1
    ranked = sorted(total, key=lambda k: -total[k])[:top]
    return [
        KernelTime(name=name, kind=kind, total_ms=total[(name, kind)] / 1e3,
                   calls=calls[(name, kind)],
                   share_pct=100.0 * total[(name, kind)] / window if window > 0 else 0.0)
        for name, kind in ranked
    ]  # fmt: skip


def _take_children_out(
    clipped: list[tuple[kineto.Activity, float, float]], own: dict[int, float]
) -> None:
    """Host ops nest (aten::linear holds aten::addmm): each op's own time, without the ops
    it holds, so that the top list names the ops that did the work and adds up to at most
    the step.  Collectives (gloo's spans, on their own threads) are counted whole."""
    order = sorted((i for i, (a, _, _) in enumerate(clipped) if not a.collective),
                   key=lambda i: (clipped[i][1], -clipped[i][2]))  # fmt: skip
    stack: list[int] = []
    for i in order:
        _, lo, hi = clipped[i]
        while stack and clipped[stack[-1]][2] <= lo:
            stack.pop()
        if stack and hi <= clipped[stack[-1]][2]:
            own[stack[-1]] -= hi - lo
        stack.append(i)


def _device(t: RankTrace) -> str:
    """The rank's device: its GPU, or on a host-only trace a CPU worker of its own (as
    clusterbench names its CPU ranks), so that ranks sharing a host's cores are told apart."""
    return f"cuda:{t.device_index}" if t.device else f"cpu:{t.rank}"


def measurements(result: TraceAttribution) -> list[Measurement]:
    """The attribution benchmark's measurements of the traces: per rank the four classes and
    the overlapped communication (their mean over the steps, and each step, ``rank_step``),
    the step time, the straggler's figures, and the top kernels (``kernel_time_ms``)."""
    a = AttributionMetrics
    world = len(result.ranks)
    out: list[Measurement] = []
    for r in result.ranks:
        t = r.trace
        if not r.steps:
            continue
        base: dict[str, ParamValue] = {
            "source": "trace", "trace": t.path.name, "world_size": world,
            "num_steps": len(r.steps), "windowed": t.windowed,
        }  # fmt: skip

        def add(metric: Metric, value: float, params: dict[str, ParamValue],
                stats: Stats | None = None, r: RankAttribution = r) -> None:  # fmt: skip
            out.append(
                Measurement(
                    benchmark=metric.benchmark,
                    metric=metric.name,
                    value=value,
                    unit=metric.unit,
                    params=params,
                    rank=r.trace.rank,
                    host=r.trace.host,
                    device=_device(r.trace),
                    stats=stats,
                )
            )

        shares = kineto.mean_percentages(r.steps)
        per_step = [s.percentages() for s in r.steps]
        mean = {**base, "rank_step": "mean"}
        for name in kineto.CLASSES:
            samples = [p[name] for p in per_step]
            add(a.get(name), shares[name], mean, Stats.from_samples(samples))
        add(a.communication_exposed, shares["communication"], mean)
        add(a.communication_overlapped, shares["communication_overlapped"], mean)
        step_ms = [s.step_ms for s in r.steps]
        add(a.step_time_ms, statistics.median(step_ms), mean, Stats.from_samples(step_ms))
        for s, p in zip(r.steps, per_step, strict=True):
            step = {**base, "rank_step": str(s.step)}
            for name in (*kineto.CLASSES, "communication_overlapped"):
                add(a.get(name), p[name], step)
        if r.wait_pct:
            add(a.wait_pct, statistics.fmean(r.wait_pct), mean, Stats.from_samples(r.wait_pct))
        if r.lateness_ms:
            late = {**mean, "last_arrivals": r.last_arrivals}
            add(a.collective_start_lateness_ms, statistics.median(r.lateness_ms), late,
                Stats.from_samples(r.lateness_ms))  # fmt: skip
        if r is result.ranks[0] and result.spreads_ms:
            spread = {**mean, "num_collectives": result.matched}
            add(a.collective_start_spread_ms, statistics.median(result.spreads_ms), spread,
                Stats.from_samples(result.spreads_ms))  # fmt: skip
        for k in r.kernels:
            add(a.kernel_time_ms, k.total_ms,
                {**base, "kernel": k.name, "class": k.kind, "calls": k.calls,
                 "share_pct": round(k.share_pct, 2)})  # fmt: skip
    return out


def trace_findings(result: TraceAttribution) -> list[Finding]:
    """What the traces themselves say beside the attribution's verdicts: the notes (a trace
    read as one window), and who arrived last at the matched collectives."""
    out = [
        Finding(id=kind, severity="info", scope="run", message=message, fix=fix)
        for kind, message, fix in result.notes
    ]
    if result.matched:
        # the rank the others waited for longest, summed over the matched collectives
        last = max(result.ranks, key=lambda r: sum(r.lateness_ms))
        out.append(
            Finding(
                id="attribution.trace.last_arrivals",
                severity="info",
                scope=f"host:{last.trace.host}",
                message=f"Of {result.matched} collectives matched across {len(result.ranks)} "
                f"ranks, rank {last.trace.rank} ({last.trace.host}) arrived last at "
                f"{last.last_arrivals}, {sum(last.lateness_ms):.1f} ms after the earliest rank "
                "in all (the most of any rank)",
                evidence={
                    "last_arrivals": {str(r.trace.rank): r.last_arrivals for r in result.ranks},
                    "lateness_ms_total": {
                        str(r.trace.rank): round(sum(r.lateness_ms), 3) for r in result.ranks
                    },
                    "matched": result.matched,
                },
            )
        )
    return out
