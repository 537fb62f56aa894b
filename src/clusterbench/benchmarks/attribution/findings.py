"""Verdicts on the attribution benchmark (:func:`findings`): what the run is bound by and what
to change, joined with the Level 1-3 evidence present in the same results; the straggler
everyone waits for and the ranks busy for longer (:mod:`.stragglers`); and whether coordination
idle rises past four accumulation steps (:mod:`.accum`).

Pure functions: a :class:`~clusterbench.schema.Results` in, findings out.
"""

from __future__ import annotations

import statistics

from clusterbench.benchmarks.attribution import AttributionMetrics
from clusterbench.benchmarks.attribution.accum import accum_idle_findings
from clusterbench.benchmarks.attribution.stragglers import (
    busy_time_outliers,
    format_gain,
    ranks_with,
    saving_period,
    straggler_findings,
    whatif_savings,
)
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
from clusterbench.benchmarks.collectives.findings import low_busbw_findings
from clusterbench.benchmarks.collectives.thresholds import CollectivesThresholds
from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.training.settings import TrainingMetrics
from clusterbench.judging.measurements import gpu_severity
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = ["CLASSES", "findings", "verdict_findings"]

CLASSES: tuple[Metric, ...] = (
    AttributionMetrics.compute,
    AttributionMetrics.memory,
    AttributionMetrics.communication,
    AttributionMetrics.coordination,
)
"""The four classes a step is split into (summing to 100%)."""

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


def _mean(ranks: dict[int, dict[Metric, Measurement]], metric: Metric) -> float:
    values = [r[metric].value for r in ranks.values() if metric in r]
    return statistics.fmean(values) if values else 0.0


def verdict_findings(
    results: Results, *, stragglers: list[Finding], min_busbw_efficiency: float
) -> list[Finding]:
    """The run's dominant class (mean over ranks) with its evidence and fix; the collectives'
    busbw is quoted where it is below ``min_busbw_efficiency`` of the link."""
    ranks = ranks_with(results, *CLASSES)
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
        + "; ".join(
            f"{what}: {format_gain(ms, step, per=saving_period(results))}"
            for what, ms, step in gains
        )
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
    ranks = ranks_with(results, AttributionMetrics.step_time_ms)
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
