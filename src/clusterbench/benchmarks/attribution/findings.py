"""Verdicts on the attribution benchmark: what the run is bound by and what to change, joined
with the Level 1-3 evidence present in the same results; the straggler everyone waits for; and
whether coordination idle rises past four accumulation steps (:mod:`.attribution_accum`).

Pure functions: a :class:`~clusterbench.schema.Results` in, findings out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from clusterbench.benchmarks.attribution import AttributionMetrics
from clusterbench.benchmarks.attribution.accum import accum_idle_findings
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
from clusterbench.benchmarks.collectives.findings import low_busbw_findings
from clusterbench.benchmarks.collectives.thresholds import CollectivesThresholds
from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.training.settings import TrainingMetrics
from clusterbench.judging.measurements import gpu_severity, scope_label, shared_cpu_hosts
from clusterbench.judging.peers import robust_outliers
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, Results, Severity
from clusterbench.thresholds import Thresholds

__all__ = [
    "CLASSES",
    "Straggler",
    "busy_time_outliers",
    "find_straggler",
    "findings",
    "straggler_findings",
    "verdict_findings",
]

CLASSES: tuple[Metric, ...] = (
    AttributionMetrics.compute,
    AttributionMetrics.memory,
    AttributionMetrics.communication,
    AttributionMetrics.coordination,
)
"""The four classes a step is split into (summing to 100%)."""
_MIN_SPREAD_MS = 1.0
"""A straggler also starts at least this many ms after the earliest rank."""
_NOISE_TIMES = 3.0
"""A straggler's what-if saving is at least this many times the other ranks' median saving:
ranks whose steps jitter (two ranks sharing two cores, each sleeping in its DataLoader) get
savings of 20 and 45 ms a step from the jitter alone, neither a straggler."""
_FIXES = {
    "compute": (
        "The GPUs are doing the model's math: raise the per-GPU batch, torch.compile "
        "(--set training.compile=true), bf16, and faster kernels (FlashAttention, cuBLASLt); "
        "beyond that only more or faster GPUs help."
    ),
    "memory": (
        "Memory-bound kernels dominate: fuse elementwise work (torch.compile), use a fused "
        "optimizer (AdamW fused=True) and fused norms, and a larger batch to raise intensity."
    ),
    "communication": (
        "Overlap communication with backward (DDP bucket_cap_mb, FSDP2 prefetch), pick the "
        "sharding by the network (DDP / zero1 move less than fsdp2 per step), raise the batch or "
        "gradient accumulation, and check NCCL's transport (NCCL_DEBUG=INFO: NVLink/RDMA, not "
        "sockets) and the collectives benchmark's busbw against the link."
    ),
    "coordination": (
        "The GPUs wait: feed the input pipeline (DataLoader workers, pinned memory), find the "
        "straggler (below) and its cause, and cut host launch overhead with CUDA graphs "
        "(--set training.compile=true --set training.cuda_graphs=true; in your own code "
        "torch.compile(mode='reduce-overhead'))."
    ),
}


_CPU_FIXES = {
    "compute": (
        "The CPU ranks are doing the model's math: a larger batch, torch.compile "
        "(--set training.compile=true) and more cores per rank (fewer ranks per node); on GPUs "
        "the same workload shows the cluster's own balance."
    ),
    "memory": (
        "Memory-bound work dominates: fuse elementwise work (torch.compile), a fused optimizer "
        "and a larger batch; on CPU ranks sharing a node, fewer ranks leave each more memory "
        "bandwidth."
    ),
    "communication": (
        "Overlap communication with backward (DDP bucket_cap_mb), pick the sharding by the "
        "network (DDP / zero1 move less than fsdp2 per step) and raise the batch or gradient "
        "accumulation; gloo between CPU ranks is far slower than NCCL between GPUs, so measure "
        "on the GPUs before acting."
    ),
    "coordination": (
        "The ranks wait: feed the input pipeline (DataLoader workers), find the straggler "
        "(below) and its cause (another process on its cores: top, taskset -p PID), and cut "
        "Python overhead between steps (--set training.compile=true)."
    ),
}
"""The fixes for CPU workers: no GPU, CUDA graph or NCCL to point at."""

_JOB_FIXES = {
    "compute": (
        "The devices are doing the model's math: raise the per-device batch, torch.compile the "
        "model, train in bf16, use fused attention (F.scaled_dot_product_attention); past that "
        "only more or faster GPUs help."
    ),
    "memory": (
        "Memory-bound kernels dominate: fuse elementwise work (torch.compile), use a fused "
        "optimizer (torch.optim.AdamW(fused=True)) and fused norms, and a larger batch to raise "
        "the arithmetic intensity; the top kernels below say which."
    ),
    "communication": (
        "Overlap communication with backward (DDP bucket_cap_mb, FSDP prefetch), shard by the "
        "network (DDP and ZeRO-1 move less per step than full sharding), raise the batch or "
        "gradient accumulation, and check NCCL's transport (NCCL_DEBUG=INFO: NVLink/RDMA, not "
        "sockets); 'clusterbench run --only collectives' measures the links."
    ),
    "coordination": (
        "The devices wait: feed the input pipeline (DataLoader num_workers, pin_memory, "
        "prefetch_factor), find the rank the others wait for (named below) and its cause, and "
        "cut host launch overhead with CUDA graphs (torch.compile(mode='reduce-overhead'))."
    ),
}
"""The fixes for a team's own job (``clusterbench analyze``): in the job's own terms, not
clusterbench's settings."""


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every attribution verdict: the dominant class, the straggler, ranks busy for longer,
    the accumulation sweep's statement."""
    limits = thresholds.of(AttributionThresholds)
    collectives = thresholds.of(CollectivesThresholds)
    stragglers = straggler_findings(results, min_spread_pct=limits.straggler_min_spread_pct)
    slow = busy_time_outliers(
        results, mads=thresholds.outlier_mads, min_rel=thresholds.outlier_min_rel,
        min_spread_pct=limits.straggler_min_spread_pct,
    )  # fmt: skip
    verdict = verdict_findings(
        results,
        stragglers=stragglers,
        min_busbw_efficiency=collectives.busbw_min_efficiency,
    )
    return [*verdict, *stragglers, *slow, *accum_idle_findings(results)]


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


def _ranks_with(
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


def _gain(saved_ms: float, step_ms: float, *, per: str = "step") -> str:
    pct = 100 * saved_ms / step_ms if step_ms > 0 else 0.0
    return f"{saved_ms:.1f} ms per {per} ({pct:.0f}% of the {step_ms:.1f} ms {per})"


def _per(results: Results) -> str:
    """What a saving is counted over: a step, or the one window of traces without
    ProfilerStep#N spans (``clusterbench analyze``)."""
    windowed = [m.params.get("windowed") for m in AttributionMetrics.step_time_ms.select(results)]
    return "profiled window" if windowed and all(windowed) else "step"


def _mean(ranks: dict[int, dict[Metric, Measurement]], metric: Metric) -> float:
    values = [r[metric].value for r in ranks.values() if metric in r]
    return statistics.fmean(values) if values else 0.0


def verdict_findings(
    results: Results, *, stragglers: list[Finding], min_busbw_efficiency: float
) -> list[Finding]:
    """The run's dominant class (mean over ranks) with its evidence and fix; the collectives'
    busbw is quoted where it is below ``min_busbw_efficiency`` of the link."""
    ranks = _ranks_with(results, *CLASSES)
    if not ranks:
        return []
    shares = {c.name: _mean(ranks, c) for c in CLASSES}
    bound = max(shares, key=lambda c: shares[c])
    overlapped = _mean(ranks, AttributionMetrics.communication_overlapped)
    units = "GPUs" if results.run.backend == "nccl" else "CPU ranks"
    split = ", ".join(f"{c} {v:.0f}%" for c, v in shares.items())
    label = "exposed communication" if bound == "communication" else bound
    evidence = _evidence(
        results, bound, stragglers=stragglers, min_busbw_efficiency=min_busbw_efficiency
    )
    gains = _gains(results, bound, stragglers=stragglers)
    gain_text = (
        " What the trace says each fix would save: "
        + "; ".join(f"{what}: {_gain(ms, step, per=_per(results))}" for what, ms, step in gains)
        + "."
        if gains
        else ""
    )
    message = (
        f"This run is {bound}-bound: {shares[bound]:.0f}% {label} at {len(ranks)} {units} "
        f"({split}; {overlapped:.0f}% communication overlapped)."
        + "".join(f" {e}" for e in evidence)
        + gain_text
    )
    return [
        Finding(
            id="attribution.verdict",
            # on CPU workers the verdict describes the test machine: stated, not judged
            severity=gpu_severity(results, "info" if bound == "compute" else "warn"),
            scope="run",
            message=message,
            evidence={
                "bound": bound,
                "shares_pct": shares,
                "overlapped_pct": overlapped,
                "num_ranks": len(ranks),
                "joined": evidence,
                "gains_ms": {what: ms for what, ms, _ in gains},
            },
            fix=_fix(results, bound, stragglers=stragglers),
        )
    ]


def _fix(results: Results, bound: str, *, stragglers: list[Finding]) -> str:
    if results.run.suite == "analyze":
        fix = _JOB_FIXES[bound]
        named = stragglers[0].evidence.get("rank") if stragglers else None
        who = f"rank {named}" if named is not None else "none stands out in these traces"
        return fix.replace("the rank the others wait for (named below)",
                           f"the rank the others wait for ({who})")  # fmt: skip
    return _FIXES[bound] if results.run.backend == "nccl" else _CPU_FIXES[bound]


_WHATIFS = {
    "straggler": "the straggler on time",
    "input_wait": "no wait for input",
    "launch_gaps": "the launch gaps closed (CUDA graphs), up to",
    "exposed_communication": "the exposed communication hidden under compute, up to",
    "fused_elementwise": "the elementwise kernels fused (torch.compile), up to",
}
_GAINS_OF = {
    "coordination": ("straggler", "input_wait", "launch_gaps"),
    "communication": ("exposed_communication",),
    "memory": ("fused_elementwise",),
    "compute": (),
}


def _gains(
    results: Results, bound: str, *, stragglers: list[Finding]
) -> list[tuple[str, float, float]]:
    """(what, ms saved per step, the step's ms) of each fix that bears on ``bound``, largest
    first, as the traces' what-ifs say (``clusterbench analyze``); a rank-wide fix counts the
    median rank's saving, without the straggler's own (its idle is the others' wait)."""
    savings = whatif_savings(results)
    if not savings:
        return []
    ranks = _ranks_with(results, AttributionMetrics.step_time_ms)
    steps = [ms[AttributionMetrics.step_time_ms].value for ms in ranks.values()]
    step_ms = statistics.median(steps) if steps else 0.0
    straggler = stragglers[0].evidence.get("rank") if stragglers else None
    out = []
    for what in _GAINS_OF[bound]:
        if what == "straggler":
            if stragglers and "saving_ms" in stragglers[0].evidence:
                out.append((_WHATIFS[what], float(stragglers[0].evidence["saving_ms"]), step_ms))
            continue
        values = [v for r, v in savings.get(what, {}).items() if r != straggler]
        if values and statistics.median(values) > 0:
            out.append((_WHATIFS[what], statistics.median(values), step_ms))
    return sorted(out, key=lambda g: -g[1])


def _evidence(
    results: Results, bound: str, *, stragglers: list[Finding], min_busbw_efficiency: float
) -> list[str]:
    """One sentence per piece of Level 1-3 evidence that bears on ``bound``."""
    if bound == "communication":
        low = low_busbw_findings(results, min_efficiency=min_busbw_efficiency)
        out = [f"Level 2: {f.message}" for f in low[:2]]
        out += [f"NCCL on {i.host} rank {i.rank} uses {sorted(i.transports)}." for i in
                results.nccl[:1] if i.transports]  # fmt: skip
        return out
    if bound == "compute":
        mfu = TrainingMetrics.mfu.select(results)
        gemm = [m for m in GemmMetrics.tflops_best.select(results) if m.reference]
        out = [f"Level 3: MFU {max(m.value for m in mfu):.0f}%."] if mfu else []
        if gemm:
            eff = min(100 * m.value / m.reference.value for m in gemm if m.reference)
            out.append(f"Level 1: the slowest GEMM reaches {eff:.0f}% of its spec peak.")
        return out
    if bound == "memory":
        hbm = [m for m in MemoryMetrics.bandwidth.select(results) if m.reference]
        return [
            f"Level 1: HBM bandwidth {m.value:.0f} of {m.reference.value:.0f} {m.unit}."
            for m in hbm[:1]
            if m.reference
        ]
    busy = DataloaderMetrics.gpu_busy.select(results)
    out = [f"Level 3: the device is {min(m.value for m in busy):.0f}% busy with the real "
           "DataLoader."] if busy else []  # fmt: skip
    return out + [s.message for s in stragglers[:1]]


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
    ranks = _ranks_with(
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
            f"would save {_gain(found.saving_ms, found.step_ms, per=_per(results))}.{note}"
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
    ranks = _ranks_with(results, AttributionMetrics.coordination, AttributionMetrics.step_time_ms)
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
        per = _per(results)
        cost = (
            f"had it been on time, the job would save {_gain(savings[r], step_ms, per=per)}"
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
