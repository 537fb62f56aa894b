"""Collective bandwidth and latency over process groups, as nccl-tests measures them (Level 2).

For every group (world; per node, per rail and node pairs on multi-node runs), op and size the
benchmark fills the inputs with predictable values, checks the output exactly (``num_wrong``, as
nccl-tests' #wrong), warms up, then times the op in each mode:

- ``back_to_back``: ``iters`` ops launched back to back after a barrier, one timing over all,
  per-op time = total / iters (nccl-tests' default);
- ``blocking``: synchronize after every op, time each (stats and p99 over iterations);
- ``graph``: ``graph_iters`` ops captured in one CUDA graph, each replay timed (small-message
  latency without launch overhead, nccl-tests -G); CUDA only, sizes <= ``graph_max_bytes``.

Each rank's per-op times are gathered over the group and reduced: ``latency_us`` is the mean
over ranks (nccl-tests averages over ranks by default), ``latency_max_us`` the slowest rank;
algbw and busbw (formulas in :mod:`.ops`) come from the mean.  Stats are over the
samples of the mode (1 for back-to-back, ``iters`` for blocking, ``graph_replays`` for graph) of
the per-sample mean over ranks.  Only group rank 0 records, one result per group/op/size/mode.

With ``tune`` on, NCCL's algorithms, protocols and channel counts are then timed against its
defaults (:mod:`.tune`).  The settings and metrics are :mod:`.settings`'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import psutil
import torch

from clusterbench.benchmarks.collectives.groups import (
    GroupHandle,
    build_groups,
    build_pair_groups,
    destroy_groups,
    node_hosts,
)
from clusterbench.benchmarks.collectives.ops import DTYPES, CollectiveOp, make_op
from clusterbench.benchmarks.collectives.settings import (
    MODES,
    CollectivesConfig,
    CollectivesMetrics,
    DtypeAlias,
)
from clusterbench.benchmarks.collectives.stop import curve_mode, size_stop, stops_finding
from clusterbench.benchmarks.collectives.timing import group_gather, time_mode
from clusterbench.benchmarks.collectives.tune import tune_sweep
from clusterbench.benchmarks.pair_plan import (
    RETESTS,
    Round,
    resolve_strategy,
    round_robin,
    survey_rounds,
)
from clusterbench.benchmarks.pair_rounds import (
    PairValue,
    PlanRecord,
    agree_retests,
    fleet_facts,
    plan_finding,
)
from clusterbench.benchmarks.sweep_stop import SweepStop
from clusterbench.collective_facts import (
    Mode,
    OpName,
    algbw_gbps,
    bus_factor,
    size_sweep,
    usable_sizes,
)
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats
from clusterbench.schema import Finding, Measurement, ParamValue, Reference, Stats
from clusterbench.units import format_bytes

__all__ = ["MODES", "CollectivesConfig", "CollectivesMetrics", "DtypeAlias", "collectives"]

log = logging.getLogger(__name__)

_MIB = 2**20
_EMPTY_CACHE_BYTES = 64 * _MIB


@dataclass(frozen=True, slots=True)
class _Step:
    h: GroupHandle
    op: OpName
    sizes: list[int]


def collectives(ctx: DistContext, cfg: CollectivesConfig) -> Iterator[Measurement | Finding]:
    """Collective busbw / algbw (GB/s) and latency per op, size and group (nccl-tests style)."""
    strategy = resolve_strategy(cfg.node_pairs, num_nodes=ctx.num_nodes, partners=cfg.pair_partners)
    survey = (
        survey_rounds(ctx.num_nodes, cfg.pair_partners)
        if strategy == "sparse"
        else round_robin(ctx.num_nodes)
    )
    handles = build_groups(ctx, cfg.groups, pair_rounds=survey if strategy == "sparse" else None)
    steps = _plan(ctx, cfg, handles=handles)
    pair_steps = [s for s in steps if s.h.spec.kind == "node_pairs"]
    work = [len(_modes_for(ctx, cfg, s)) for st in steps for s in st.sizes]
    retest_work = RETESTS * len(cfg.ops) * len(cfg.modes)
    ctx.progress.start(sum(work) + (retest_work if pair_steps else 0) or 1)
    done = [0]  # sizes measured; the time budget is checked before each (rank 0 decides)
    stops: list[SweepStop] = []  # the op/group sweeps this rank records that hit the plateau
    for step in steps:
        go = step.h.spec.kind != "node_pairs"  # the first size always runs, then rank 0 says
        if go and not (done[0] and ctx.budget.agree_expired(ctx)):
            yield from _sweep(ctx, cfg, step, done=done, stops=stops)
    pairs = any(k == "node_pairs" for k in cfg.groups) and ctx.num_nodes > 2
    if pairs and not ctx.budget.agree_expired(ctx):
        yield from _node_pairs(ctx, cfg, steps=pair_steps, strategy=strategy, survey=survey)
    ctx.barrier()  # every rank is done with every group before any is destroyed
    destroy_groups(handles)
    if stops:
        yield stops_finding(cfg, stops, scope=f"host:{ctx.host}/{ctx.device_label}")
    if ctx.budget.agree_expired(ctx):  # the tuning sweep, if asked, counts as one point more
        total = sum(len(s.sizes) for s in steps if s.h.spec.kind != "node_pairs") + cfg.tune
        if done[0] < total:
            unit = "sizes of the sweep" + (" and its tuning sweep" if cfg.tune else "")
            ctx.budget.stopped(done=done[0], total=total, unit=unit)
        return
    if cfg.tune:  # NCCL's settings against its defaults (collectives_tune), on the world
        memory_limit = cfg.memory_fraction * _min_free_bytes(ctx)
        yield from tune_sweep(ctx, cfg, memory_limit_bytes=memory_limit)


def _node_pairs(
    ctx: DistContext,
    cfg: CollectivesConfig,
    *,
    steps: list[_Step],
    strategy: Literal["all", "sparse"],
    survey: list[Round],
) -> Iterator[Measurement | Finding]:
    """The node-pair rounds: all pairs then their slow pairs again, or the sparse plan's survey
    then the re-tests; rank 0 picks those from the busbw measured (:mod:`.pair_rounds`) and
    records the plan."""
    facts = fleet_facts(ctx)
    hosts = node_hosts(ctx)
    ctx.barrier()
    started = time.perf_counter()
    mine: list[PairValue] = []
    for step in steps:
        for item in _sweep(ctx, cfg, step):
            if isinstance(item, Measurement) and CollectivesMetrics.busbw.matches(item):
                a, b = step.h.spec.nodes
                mine.append(((item.params.get("op"), item.params.get("mode")), (a, b), item.value))
            yield item
    retests: list[Round] = []
    suspects: list[int] = []
    if not ctx.budget.agree_expired(ctx):
        retests, suspects = agree_retests(
            ctx, strategy=strategy, num_nodes=ctx.num_nodes, survey=survey, mine=mine
        )
        handles = build_pair_groups(ctx, retests)
        for step in _plan(ctx, cfg, handles=handles):
            yield from _sweep(ctx, cfg, step)
        ctx.barrier()
        destroy_groups(handles)
    ctx.barrier()
    if ctx.rank == 0:
        plan = PlanRecord(
            strategy=strategy, partners=cfg.pair_partners, hosts=hosts, survey=survey,
            retests=retests, suspects=suspects, seconds=time.perf_counter() - started,
        )  # fmt: skip
        yield plan_finding(ctx.benchmark, plan, facts)


def _plan(ctx: DistContext, cfg: CollectivesConfig, *, handles: list[GroupHandle]) -> list[_Step]:
    memory_limit = cfg.memory_fraction * _min_free_bytes(ctx)
    element_bytes = torch.empty((), dtype=DTYPES[cfg.dtype]).element_size()
    sweep = size_sweep(cfg.min_bytes, cfg.max_bytes, cfg.factor)
    steps = []
    for h in handles:
        for op in cfg.ops:
            sizes = usable_sizes(
                op, sweep, n=h.size, element_bytes=element_bytes, memory_limit_bytes=memory_limit
            )
            if h.spec.kind == "node_pairs":
                sizes = sizes[-1:]  # pairs are compared at the busbw plateau only
            if not sizes:
                log.warning("collectives: %s on %s: no size fits in memory", op, h.spec.name)
            steps.append(_Step(h, op, sizes))
    return steps


def _min_free_bytes(ctx: DistContext) -> float:
    """Free memory for one rank's buffers, the least over all ranks (every rank must agree)."""
    if ctx.is_cuda:
        free = float(torch.cuda.mem_get_info(ctx.device)[0])
    else:
        free = psutil.virtual_memory().available / max(1, ctx.local_world_size)
    return float(min(ctx.all_gather(free)))


def _modes_for(ctx: DistContext, cfg: CollectivesConfig, size_bytes: int) -> list[Mode]:
    return [
        m for m in cfg.modes if m != "graph" or (ctx.is_cuda and size_bytes <= cfg.graph_max_bytes)
    ]


def _sweep(
    ctx: DistContext,
    cfg: CollectivesConfig,
    step: _Step,
    *,
    done: list[int] | None = None,
    stops: list[SweepStop] | None = None,
) -> Iterator[Measurement]:
    num_wrong, emulate, graph_ok = 0, False, True
    # the busbw of each size, on every group rank: the plateau stops them all at one size
    followed = curve_mode(cfg) if stops is not None else None
    busbw: list[float] = []
    for i, size in enumerate(step.sizes):
        if done and done[0] and ctx.budget.agree_expired(ctx, group=step.h.group,
                                                         src=step.h.global_rank(0)):  # fmt: skip
            break  # the group's rank 0 says the budget is spent: every member stops here
        op, wrong, emulate = _checked_op(ctx, cfg, step=step, size_bytes=size, emulate=emulate)
        num_wrong += wrong
        where = f"in {op.name} of {format_bytes(size)} on group {step.h.spec.name}"
        with ctx.doing(where, collective=True):
            for _ in range(cfg.warmup):
                op.run()
            for mode in _modes_for(ctx, cfg, size):
                samples = None
                if mode != "graph" or graph_ok:
                    samples = time_mode(
                        ctx, mode=mode, op=op, h=step.h, iters=cfg.iters,
                        graph_iters=cfg.graph_iters, graph_replays=cfg.graph_replays,
                    )  # fmt: skip
                graph_ok = graph_ok and not (mode == "graph" and samples is None)
                if samples is not None:
                    yield from _emit(ctx, cfg, h=step.h, op=op, mode=mode, samples=samples,
                                     curve=busbw if mode == followed else None)  # fmt: skip
                ctx.progress.advance()
        del op
        if done is not None:
            done[0] += 1
        if ctx.is_cuda and size >= _EMPTY_CACHE_BYTES:
            torch.cuda.empty_cache()  # cached blocks of this size would not fit the next one
        sweep = f"{step.op} on {step.h.spec.name}"
        stop = size_stop(cfg, sweep=sweep, sizes=step.sizes, busbw=busbw) if followed else None
        if stop is not None and stops is not None:
            ctx.progress.advance(sum(len(_modes_for(ctx, cfg, s)) for s in step.sizes[i + 1 :]))
            if step.h.group_rank == 0:
                stops.append(stop)
            break
    if step.sizes:
        total = int(group_gather(ctx, step.h, [float(num_wrong)]).sum())
        if step.h.group_rank == 0:
            params = {**_group_params(step.h), "op": step.op, "dtype": cfg.dtype}
            yield ctx.measurement(CollectivesMetrics.num_wrong, value=total, params=params)


def _checked_op(
    ctx: DistContext, cfg: CollectivesConfig, *, step: _Step, size_bytes: int, emulate: bool
) -> tuple[CollectiveOp, int, bool]:
    """The op with its buffers, its wrong elements on the pattern, and whether it is emulated."""

    def build(emulated: bool) -> CollectiveOp:
        return make_op(
            step.op, size_bytes=size_bytes, h=step.h, dtype=cfg.dtype, device=ctx.device,
            emulate=emulated,
        )  # fmt: skip

    op = build(emulate)
    op.prepare()
    try:
        op.run()
    except (RuntimeError, NotImplementedError) as exc:
        text = str(exc).lower()
        if ctx.backend != "gloo" or emulate or not ("support" in text or "implement" in text):
            raise
        log.info("collectives: gloo lacks %s (%s); emulating it", step.op, exc)
        op = build(True)
        op.prepare()
        op.run()
    if ctx.is_cuda:
        torch.cuda.synchronize(ctx.device)
    return op, op.count_wrong(), op.emulated


# --- results --------------------------------------------------------------------------------


def _group_params(h: GroupHandle) -> dict[str, ParamValue]:
    params: dict[str, ParamValue] = {
        "group": h.spec.name,
        "group_kind": h.spec.kind,
        "group_size": h.size,
    }
    if h.spec.hosts:
        params["hosts"] = ",".join(h.spec.hosts)
    return params


def _emit(
    ctx: DistContext,
    cfg: CollectivesConfig,
    *,
    h: GroupHandle,
    op: CollectiveOp,
    mode: Mode,
    samples: list[float],
    curve: list[float] | None = None,
) -> Iterator[Measurement]:
    times = group_gather(ctx, h, samples)  # seconds per op, (ranks x samples)
    if curve is not None:  # every group rank: the same gathered times give the same busbw
        t = float(times.mean(dim=1).mean())
        curve.append(algbw_gbps(op.size_bytes, t) * bus_factor(op.name, h.size))
    if h.group_rank != 0:
        return
    per_rank = times.mean(dim=1)
    t_mean, t_max = float(per_rank.mean()), float(per_rank.max())
    series = times.mean(dim=0).tolist()  # per sample, the mean over ranks
    params: dict[str, ParamValue] = {
        "op": op.name,
        "size_bytes": op.size_bytes,
        **_group_params(h),
        "mode": mode,
        "dtype": cfg.dtype,
    }
    if op.emulated:
        params["emulated"] = True
    yield from _latencies(ctx, params=params, t_mean=t_mean, t_max=t_max, series=series)
    factor = bus_factor(op.name, h.size)
    algbw = algbw_gbps(op.size_bytes, t_mean)  # algbw = S / t / 1e9, t = mean over ranks
    alg_stats = rate_stats(series, work=op.size_bytes, scale=1e9)
    yield ctx.measurement(CollectivesMetrics.algbw, value=algbw, params=params, stats=alg_stats)
    # busbw = algbw * F (nccl-tests; F per op in collectives_ops.bus_factor)
    yield ctx.measurement(
        CollectivesMetrics.busbw,
        value=algbw * factor,
        params=params,
        stats=rate_stats(series, work=op.size_bytes * factor, scale=1e9),
        reference=_nvlink_reference(ctx, h),
    )


def _latencies(
    ctx: DistContext,
    *,
    params: dict[str, ParamValue],
    t_mean: float,
    t_max: float,
    series: list[float],
) -> Iterator[Measurement]:
    us = [t * 1e6 for t in series]
    yield ctx.measurement(
        CollectivesMetrics.latency_us, value=t_mean * 1e6, params=params,
        stats=Stats.from_samples(us),
    )  # fmt: skip
    yield ctx.measurement(CollectivesMetrics.latency_max_us, value=t_max * 1e6, params=params)
    if params["mode"] == "blocking":
        p99 = float(torch.tensor(us, dtype=torch.float64).quantile(0.99))
        yield ctx.measurement(CollectivesMetrics.latency_p99_us, value=p99, params=params)


def _nvlink_reference(ctx: DistContext, h: GroupHandle) -> Reference | None:
    """The NVLink per-direction spec for groups within one node (busbw is compared with the
    unidirectional link peak, docs/reference.md)."""
    one_node = h.spec.kind == "intra_node" or (h.spec.kind == "world" and ctx.num_nodes == 1)
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    if not one_node or spec is None or not spec.nvlink_gbps_per_dir:
        return None
    return Reference(value=spec.nvlink_gbps_per_dir, kind="spec_peak", source=spec.source)
