"""How long the ``network`` benchmark takes, and how it is cut to a time budget.

One node: the loopback tests (a TCP throughput test of ``duration_s``, then the latency round
trips).  Several: every round of node pairs of the plan (:func:`~.pair_plan.planned_rounds`:
k - 1 + (k mod 2) rounds for all pairs, d + (k mod 2) + RETESTS at most for the sparse plan),
each in both directions, each with its throughput test, round trips and, where RDMA ports are
up, an ib_write_bw run.
"""

from __future__ import annotations

from clusterbench.benchmarks.network.settings import NetworkConfig
from clusterbench.benchmarks.pair_plan import planned_rounds
from clusterbench.durations import (
    DurationModel,
    Estimate,
    NodeFacts,
    Term,
    halve_cut,
    halve_seconds_cut,
)

__all__ = ["MODEL", "estimate"]

ROUND_TRIP_S = {"loopback": 3e-5, "pair": 6e-5}
"""Nominal TCP round trip of 64 B: loopback, and between two hosts of one switch."""
SETUP_S = 0.3
"""Starting the servers and connecting the streams of one test (nominal)."""
RDMA_S = 3.0
"""One ib_write_bw run (its default 5000 iterations of its largest size, nominal)."""


def estimate(cfg: NetworkConfig, facts: NodeFacts) -> Estimate:
    k = facts.num_nodes
    if k < 2:
        seconds = SETUP_S + cfg.duration_s + cfg.latency_round_trips * ROUND_TRIP_S["loopback"]
        return Estimate(
            terms=(
                Term(
                    f"loopback: {cfg.duration_s:g} s throughput + "
                    f"{cfg.latency_round_trips} round trips",
                    seconds,
                ),
            )
        )
    rounds = planned_rounds(k, strategy=cfg.node_pairs, partners=cfg.pair_partners)
    directed = 2 * rounds.total
    one = SETUP_S + cfg.duration_s + cfg.latency_round_trips * ROUND_TRIP_S["pair"]
    terms = [
        Term(
            f"{directed} rounds ({rounds.strategy}: {rounds.total} both ways) x "
            f"{cfg.duration_s:g} s throughput + {cfg.latency_round_trips} round trips",
            directed * one,
        )
    ]
    if cfg.rdma and facts.cuda:
        terms.append(Term(f"{directed} rounds x ib_write_bw (where RDMA is up)", directed * RDMA_S))
    return Estimate(terms=tuple(terms), points=directed)


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("latency_round_trips", floor=100),
        halve_seconds_cut("duration_s", floor=0.5),
    ),
)
