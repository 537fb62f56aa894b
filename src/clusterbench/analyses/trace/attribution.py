"""A team's own traces attributed as the attribution benchmark attributes clusterbench's: per
rank and profiled step, compute, memory, communication (exposed; the overlapped part apart)
and coordination; the ranks' collectives matched, so that the time a collective waited for
the last rank is coordination and the rank that arrives last is named; the top kernels by
time with their class.  What :func:`measurements` gives is the attribution benchmark's
measurements (params ``source=trace``), so its findings, section and figures judge them.  The
ranks' matching and timing: :mod:`clusterbench.analyses.trace.timing`.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from clusterbench.analyses.trace.file import RankTrace
from clusterbench.analyses.trace.timing import RankTiming, rank_timing, time_ranks, timing_notes
from clusterbench.declared.attribution import AttributionMetrics
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, ParamValue, Stats
from clusterbench.traces import idle, kernels, whatif
from clusterbench.traces import trace as kineto
from clusterbench.traces.ranks import ClockFit

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
    other device work (:func:`~clusterbench.traces.idle.iteration_idle`)."""
    kernels: list[KernelTime] = field(default_factory=list)
    clock_offset_ms: float | None = None
    """What was taken from this rank's clock to put it on the common one."""
    straggler_saving_ms: float | None = None
    """Per step, what the job would save had this rank entered its collectives with the others
    (:func:`~clusterbench.traces.whatif.straggler_savings`)."""
    input_wait_ms: list[float] = field(default_factory=list)
    """Per step, the device idle while the host waits for the DataLoader."""
    launch_gaps_ms: list[float] = field(default_factory=list)
    """Per step, the rest of the device idle (launch gaps, host work between kernels)."""
    fusable_ms: list[float] = field(default_factory=list)
    """Per step, the device time of elementwise kernels a compiler could fuse into their
    neighbours (:data:`~clusterbench.traces.kernels.FUSABLE_ELEMENTWISE`)."""


@dataclass(kw_only=True)
class TraceAttribution:
    ranks: list[RankAttribution]
    spreads_ms: list[float] = field(default_factory=list)
    """Per matched collective, the spread of its start offsets across ranks."""
    matched: int = 0
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    """(finding id, message, fix) of what the traces say about themselves."""
    clock: ClockFit | None = None


def _step_event(n: int, start: float, end: float) -> dict[str, object]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": start,
            "dur": end - start}  # fmt: skip


def attribute(
    traces: list[RankTrace], *, top: int = 10, jobs: int | None = None
) -> TraceAttribution:
    """Every rank's steps split into the four classes, after the ranks' collectives are
    matched (the k-th collective of step N is the same operation on every rank) and put on
    one clock (:func:`~clusterbench.traces.ranks.on_common_clock`).  Each
    rank's steps are split in ``jobs`` processes where the traces hold many activities
    (default: the usable cores, at most one per :data:`_ACTIVITIES_PER_WORKER`)."""
    traces = sorted(traces, key=lambda t: t.rank)
    # two passes, so that one rank's activities are held at a time: the collectives of every
    # rank first (what the ranks are matched and timed on), then each rank's steps
    per_rank: list[dict[int, tuple[kineto.Collective, ...]]] = []
    for t in traces:
        collectives: dict[int, tuple[kineto.Collective, ...]] = {}
        for n, start, end in t.steps:
            mine = _collective_activities(t, start, end)
            collectives.update(kineto.step_collectives([_step_event(n, start, end)], acts=mine))
        per_rank.append(collectives)
    timing = time_ranks(traces, per_rank)
    timings = [rank_timing(timing, i) for i in range(len(traces))]
    workers = _workers(traces, jobs)
    if workers > 1:
        out = _attribute_in_pool(traces, timings, workers=workers, top=top)
    else:
        out = [_attribute_rank(t, r, top=top) for t, r in zip(traces, timings, strict=True)]
    notes = timing_notes(traces, per_rank, timing)
    rank_steps = sum(len(r.steps) for r in out)
    if rank_steps > STEP_ROWS:
        notes.append((
            "attribution.trace.steps_kept",
            f"{rank_steps:,} profiled rank-steps: each rank's mean over its steps is kept, with "
            f"their statistics, not a row per step (past {STEP_ROWS:,})",
            "",
        ))  # fmt: skip
    return TraceAttribution(ranks=out, spreads_ms=timing.spreads, matched=len(timing.spreads),
                            notes=notes, clock=timing.fit)  # fmt: skip


def _collective_activities(t: RankTrace, start: float, end: float) -> list[kineto.Activity]:
    """The whole collectives among the rank's activities that overlap [start, end)."""
    import numpy as np

    starts = np.frombuffer(t.starts, dtype=np.float64)
    ends = np.frombuffer(t.ends, dtype=np.float64)
    flags = np.frombuffer(t.collective, dtype=np.int8)
    picked = np.flatnonzero((flags > 0) & (ends > start) & (starts < end)).tolist()
    return [
        kineto.Activity(t.starts[i], t.ends[i], "comm", collective=True,
                        name=t.name_table[t.names[i]])
        for i in picked
    ]  # fmt: skip


_ACTIVITIES_PER_WORKER = 2_000_000
"""Without ``jobs``, one process per this many activities at most: a process splits some
200,000 a second, and starting the pool takes a third of a second."""


def _workers(traces: list[RankTrace], jobs: int | None) -> int:
    from clusterbench.analyses.trace.pool import default_jobs

    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    workers = min(jobs or default_jobs(), len(traces))
    if jobs is None:
        activities = sum(len(t.starts) for t in traces)
        workers = min(workers, activities // _ACTIVITIES_PER_WORKER)
    return workers


def _attribute_in_pool(
    traces: list[RankTrace], mine: list[RankTiming], *, workers: int, top: int
) -> list[RankAttribution]:
    """:func:`_attribute_rank` of every rank in ``workers`` processes; each result keeps the
    parent's RankTrace, not the copy that came back."""
    from clusterbench.analyses.trace.pool import process_pool

    with process_pool(workers) as pool:
        futures = [pool.submit(_attribute_rank, t, r, top=top)
                   for t, r in zip(traces, mine, strict=True)]  # fmt: skip
        out = []
        for t, future in zip(traces, futures, strict=True):
            done = future.result()
            done.trace = t
            out.append(done)
    return out


def _attribute_rank(t: RankTrace, timing: RankTiming, *, top: int) -> RankAttribution:
    """One rank's steps split, its waits, idle and what-ifs, from its activities (read from
    its arrays here and dropped after)."""
    acts = {n: t.activities(start, end) for n, start, end in t.steps}
    steps = []
    wait_pct: list[float] = []
    idle_split: list[whatif.StepIdle] = []
    fusable: list[float] = []
    for n, start, end in t.steps:
        event = _step_event(n, start, end)
        steps += kineto.step_breakdowns([event], acts=acts[n], waits_ms=timing.waits)
        if timing.start_waits is not None:
            (it,) = idle.iteration_idle([event], acts=acts[n], waits_ms=timing.start_waits)
            wait_pct.append(it.wait_pct)
        busy = ((a.start_us, a.end_us) for a in acts[n])
        idle_split.append(whatif.idle_split(busy, step=(start, end), input_spans=t.input_spans))
        fusable.append(_fusable_ms(acts[n], start=start, end=end) if t.device else 0.0)
    return RankAttribution(
        trace=t,
        steps=steps,
        lateness_ms=timing.late,
        last_arrivals=timing.last,
        wait_pct=wait_pct,
        kernels=_top_kernels(t, acts, top=top),
        clock_offset_ms=timing.offset_ms,
        straggler_saving_ms=timing.saving_ms,
        input_wait_ms=[s.input_ms for s in idle_split],
        launch_gaps_ms=[s.gaps_ms for s in idle_split],
        fusable_ms=fusable,
    )


def _fusable_ms(acts: list[kineto.Activity], *, start: float, end: float) -> float:
    """The step's device time of fusable elementwise kernels (clipped to the step), in ms: an
    upper bound of what fusing them saves, since a fused kernel still reads and writes once."""
    total = 0.0
    for a in acts:
        family = kernels.classify(a.name, "kernel")
        if family is not None and family.fusable:
            total += max(0.0, min(a.end_us, end) - max(a.start_us, start))
    return total / 1e3


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
        add(a.unclassified, shares["unclassified"], mean,
            Stats.from_samples([p["unclassified"] for p in per_step]))  # fmt: skip
        add(a.communication_exposed, shares["communication"], mean)
        add(a.communication_overlapped, shares["communication_overlapped"], mean)
        step_ms = [s.step_ms for s in r.steps]
        add(a.step_time_ms, statistics.median(step_ms), mean, Stats.from_samples(step_ms))
        for s, p in zip(r.steps, per_step, strict=True) if per_step_rows(result) else ():
            step = {**base, "rank_step": str(s.step)}
            for name in (*kineto.CLASSES, "communication_overlapped"):
                add(a.get(name), p[name], step)
        if r.wait_pct:
            add(a.wait_pct, statistics.fmean(r.wait_pct), mean, Stats.from_samples(r.wait_pct))
        if r.lateness_ms:
            late = {**mean, "last_arrivals": r.last_arrivals, "num_collectives": result.matched}
            add(a.collective_start_lateness_ms, statistics.median(r.lateness_ms), late,
                Stats.from_samples(r.lateness_ms))  # fmt: skip
        if r is result.ranks[0] and result.spreads_ms:
            spread = {**mean, "num_collectives": result.matched}
            add(a.collective_start_spread_ms, statistics.median(result.spreads_ms), spread,
                Stats.from_samples(result.spreads_ms))  # fmt: skip
        for what, values in _whatifs(r).items():
            add(a.whatif_saving_ms, statistics.fmean(values), {**mean, "whatif": what},
                Stats.from_samples(values))  # fmt: skip
        for k in r.kernels:
            add(a.kernel_time_ms, k.total_ms,
                {**base, "kernel": k.name, "class": k.kind, "calls": k.calls,
                 "share_pct": round(k.share_pct, 2)})  # fmt: skip
    return out


STEP_ROWS = 10_000
"""Each rank's every profiled step gets its own measurements (rank_step=N) up to this many
rank-steps; past it (1,024 ranks of 100 steps) only the means, whose statistics carry the
steps', so that the run folder of a large job stays one that a browser opens."""


def per_step_rows(result: TraceAttribution) -> bool:
    """Whether the run keeps a measurement per rank and step (:data:`STEP_ROWS`)."""
    return sum(len(r.steps) for r in result.ranks) <= STEP_ROWS


def _whatifs(r: RankAttribution) -> dict[str, list[float]]:
    """Per fix, what it would save in each profiled step of this rank (ms)."""
    out = {
        "input_wait": r.input_wait_ms,
        "launch_gaps": r.launch_gaps_ms,
        "exposed_communication": [s.communication_ms for s in r.steps],
        "fused_elementwise": r.fusable_ms if any(r.fusable_ms) else [],
    }
    if r.straggler_saving_ms is not None:
        out["straggler"] = [r.straggler_saving_ms]
    return {k: v for k, v in out.items() if v}


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
