"""How long the ``collectives`` sweep takes, and how it is cut to a time budget.

Per group kind the run has (the world; per node and per rail with several nodes; node pairs
with three or more, in the rounds of :func:`~.pair_plan.planned_rounds`), op and size of the
sweep: warm-up + one checked op + ``iters`` per timing mode (graph mode: ``graph_iters`` x
``graph_replays`` up to ``graph_max_bytes``), each taking alpha + S x F / busbw (F the op's
bus factor, nccl-tests).  Groups of one kind run at the same time (one per node, one per
rail), rounds of node pairs one after the other.  The NCCL tuning sweep adds, per op, one
communicator per setting and its sizes x ``tune_repeats`` x ``iters`` ops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from clusterbench.benchmarks.collectives.settings import CollectivesConfig
from clusterbench.benchmarks.pair_plan import planned_rounds
from clusterbench.collective_facts import bus_factor, size_sweep
from clusterbench.durations import (
    Cut,
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)
from clusterbench.units import format_bytes

__all__ = ["MODEL", "estimate", "group_kinds"]

NOMINAL = {
    # (latency s, busbw GB/s) of one op where nothing was measured
    "gloo": (1e-4, 1.5),  # 2 CPU ranks on one host: ~100 us, ~1-2 GB/s (the CPU table's run)
    "intra": (2e-5, 300.0),  # NVLink 4 (H100/H200): all_reduce busbw 340+ GB/s, docs/reference.md
    "inter": (4e-5, 40.0),  # one 400 Gb/s NIC per GPU: ~45 GB/s busbw at most
}
COMMUNICATOR_S = 1.0
"""Seconds to create and warm up one NCCL communicator of the tuning sweep (nominal)."""
PER_SIZE_S = {"cuda": 0.01, "cpu": 0.08}
"""Fixed seconds per op and size: building and checking its buffers, the barriers between its
timing modes, its records.  CPU: 2 gloo ranks of a 2-core VM took 0.10 s per size at 12 ops
and 0.145 s at 45 (2026-12-02)."""
FILL_GBPS = {"cuda": 500.0, "cpu": 1.0}
"""Nominal GB/s of filling and checking a size's buffers (the check pattern)."""
_TUNE_SETTINGS = 2 + 2 * 3
"""Settings per op of the tuning sweep without channels: the default twice, 2 algorithms x 3
protocols (the most an op has)."""


def group_kinds(cfg: CollectivesConfig, facts: NodeFacts) -> Iterator[tuple[str, int, int, str]]:
    """(kind, ranks of one group, groups run one after the other, link) of the run."""
    nodes, per_node = facts.num_nodes, facts.ranks_per_node
    for kind in cfg.groups:
        if kind == "world" and facts.world_size > 1:
            yield kind, facts.world_size, 1, "world"
        elif kind == "intra_node" and nodes > 1 and per_node > 1:
            yield kind, per_node, 1, "intra"
        elif kind == "inter_node" and nodes > 1:
            yield kind, nodes, 1, "inter"
        elif kind == "node_pairs" and nodes > 2:
            rounds = planned_rounds(nodes, strategy=cfg.node_pairs, partners=cfg.pair_partners)
            yield kind, 2 * per_node, rounds.total, "inter"


def _link(facts: NodeFacts, link: str) -> tuple[float, float, str]:
    """(latency s, busbw GB/s, its source) of ``link``; the world's busbw as measured here."""
    key = (
        "gloo" if not facts.cuda else "intra" if link == "world" and facts.num_nodes == 1 else link
    )
    alpha, busbw = NOMINAL["inter" if key == "world" else key]
    if link == "world":
        rate = facts.rate("collectives_busbw_world", nominal=busbw)
        return alpha, rate.value, rate.source
    return alpha, busbw, "nominal"


def _op_seconds(
    cfg: CollectivesConfig, facts: NodeFacts, *, op: str, n: int, size: int, link: str
) -> float:
    alpha, busbw, _ = _link(facts, link)
    one = alpha + size * bus_factor(op, n) / (busbw * 1e9)
    ops = cfg.warmup + 1 + cfg.iters * sum(m != "graph" for m in cfg.modes)
    if "graph" in cfg.modes and facts.cuda and size <= cfg.graph_max_bytes:
        ops += cfg.graph_iters * cfg.graph_replays
    fill = 3 * size / (FILL_GBPS[facts.device_type] * 1e9)
    return ops * one + fill + PER_SIZE_S[facts.device_type]


def estimate(cfg: CollectivesConfig, facts: NodeFacts) -> Estimate:
    sweep = size_sweep(cfg.min_bytes, cfg.max_bytes, cfg.factor)
    terms, points = [], 0
    for kind, n, rounds, link in group_kinds(cfg, facts):
        sizes = sweep[-1:] if kind == "node_pairs" else sweep
        seconds = rounds * sum(
            _op_seconds(cfg, facts, op=op, n=n, size=s, link=link) for op in cfg.ops for s in sizes
        )
        _, busbw, source = _link(facts, link)
        what = (
            f"{kind}: {rounds} round(s) x {len(cfg.ops)} ops x {len(sizes)} sizes to "
            f"{format_bytes(sizes[-1])} at {busbw:.3g} GB/s ({source})"
        )
        terms.append(Term(what, seconds))
        points += rounds * len(cfg.ops) * len(sizes)
    if cfg.tune and facts.cuda and facts.world_size > 1:
        tune = sorted(size for size in cfg.tune_sizes)
        settings = _TUNE_SETTINGS + len(cfg.tune_channels)
        alpha, busbw, _ = _link(facts, "world")
        per_op = sum(cfg.tune_repeats * cfg.iters * (alpha + s * 2 / (busbw * 1e9)) for s in tune)
        seconds = len(cfg.tune_ops) * settings * (COMMUNICATOR_S + per_op)
        terms.append(
            Term(
                f"tuning: {len(cfg.tune_ops)} ops x {settings} NCCL settings x "
                f"{len(tune)} sizes x {cfg.tune_repeats} repeats",
                seconds,
            )
        )
        points += len(cfg.tune_ops) * settings
    if not terms:
        terms.append(Term("one rank: no group to measure", 0.0))
    return Estimate(terms=tuple(terms), points=max(1, points))


_MAX_FACTOR = 16


def _wider_steps(cfg: CollectivesConfig, facts: NodeFacts) -> Cut | None:
    """Every other size of the sweep (the factor doubled): both ends kept."""
    if (
        cfg.factor * 2 > _MAX_FACTOR
        or len(size_sweep(cfg.min_bytes, cfg.max_bytes, cfg.factor)) < 4
    ):
        return None
    new = dataclasses.replace(cfg, factor=cfg.factor * 2)
    return Cut(settings=new, key="factor", before=str(cfg.factor), after=str(new.factor))


def _no_tune(cfg: CollectivesConfig, facts: NodeFacts) -> Cut | None:
    if not cfg.tune:
        return None
    return Cut(
        settings=dataclasses.replace(cfg, tune=False), key="tune", before="true", after="false"
    )


_MIN_MAX_BYTES = {"cuda": 64 << 20, "cpu": 1 << 20}
"""Largest size a cut leaves: where busbw has reached its plateau on NVLink (tens of MiB) and
on gloo."""

MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("iters", floor=5),
        halve_cut("warmup", floor=1),
        halve_cut("graph_replays", floor=3),
        halve_cut("tune_repeats", floor=4),
        drop_cut("tune_channels", keep=0),
        _no_tune,
        _wider_steps,
        drop_cut("modes", order=["graph", "blocking"]),
        drop_cut("ops", order=["send_recv", "broadcast", "all_to_all", "reduce_scatter"]),
        halve_cut("max_bytes", floor=lambda f: _MIN_MAX_BYTES[f.device_type], label=format_bytes),
    ),
    facts=(
        FactQuery(
            name="collectives_busbw_world",
            benchmark="collectives",
            metric="busbw",
            params={"op": "all_reduce", "group": "world", "mode": "back_to_back"},
            pick="max",
        ),
    ),
)
