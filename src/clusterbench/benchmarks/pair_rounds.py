"""The node-pair tests' plan at run time, shared by the collectives and network benchmarks:
which plan runs, the re-tests every rank agrees on, and the info finding that records it.

The survey's figures are gathered on rank 0, which picks the re-tests
(:func:`~clusterbench.benchmarks.pair_plan.retest_rounds`; all pairs: the slow pairs measured
again, :func:`~clusterbench.benchmarks.pair_plan.remeasure_rounds`) and broadcasts them: every
rank then creates and runs the same groups in the same order.  The finding
(``<benchmark>.node_pair_plan``) carries what the drain list needs from the run: the plan's
rounds and time, the re-test pairs, the launcher and each node's name under it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from clusterbench.benchmarks.pair_plan import (
    RETESTS,
    Round,
    all_pairs_round_count,
    met_pairs,
    remeasure_rounds,
    retest_rounds,
    slow_pairs,
    suspects,
)
from clusterbench.doctor.placement import launcher_kind
from clusterbench.schema import Finding

if TYPE_CHECKING:  # a type only: the network benchmark itself needs no torch
    from clusterbench.runtime.dist import DistContext

__all__ = [
    "FleetFacts",
    "PairValue",
    "PlanRecord",
    "agree_retests",
    "fleet_facts",
    "plan_finding",
]

PairValue = tuple[Hashable, tuple[int, int], float]
"""(series, (node, node), value): one pair's higher-is-better value of one series (a number,
not a plot)."""


def _launcher(env: Mapping[str, str], *, run_id: str, given: str | None = None) -> str:
    """kubernetes (a pod: torchrun inside it), ray, slurm, mpi, torchrun, clusterbench or none."""
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    return launcher_kind(env, run_id=run_id, given=given) or "none"


def _service_name(env: Mapping[str, str], *, host: str, launcher: str) -> tuple[str, bool]:
    """The node's name under its launcher and whether it is known: Slurm's node name
    (SLURMD_NODENAME), the Kubernetes node (NODE_NAME from the downward API's spec.nodeName;
    else the pod's host name, not known), the host name elsewhere."""
    if launcher == "slurm":
        return env.get("SLURMD_NODENAME") or host, True
    if launcher == "kubernetes":
        node = env.get("NODE_NAME") or env.get("KUBERNETES_NODE_NAME")
        return (node, True) if node else (host, False)
    return host, True


@dataclass(frozen=True, slots=True)
class FleetFacts:
    """What every node's leader tells rank 0 for the drain list."""

    launcher: str
    names: dict[str, str]
    """host -> its name under the launcher (Slurm node, Kubernetes node, host)."""
    pods: list[str]
    """Hosts that are Kubernetes pods whose node name is not known (no NODE_NAME)."""
    slots: dict[str, int]
    """host -> ranks on it (a hostfile's slots)."""


def fleet_facts(ctx: DistContext) -> FleetFacts:
    """Every rank's host, name and launcher, gathered (every rank calls it)."""
    run_id = ctx.run_dir.name if ctx.run_dir is not None else ""
    launcher = _launcher(os.environ, run_id=run_id, given=ctx.launcher)
    name, known = _service_name(os.environ, host=ctx.host, launcher=launcher)
    everyone = ctx.all_gather((ctx.host, name, known, launcher))
    slots: dict[str, int] = defaultdict(int)
    for host, *_ in everyone:
        slots[host] += 1
    return FleetFacts(
        launcher=everyone[0][3],
        names={host: n for host, n, _, _ in everyone},
        pods=sorted({host for host, _, ok, _ in everyone if not ok}),
        slots=dict(slots),
    )


def agree_retests(
    ctx: DistContext,
    *,
    strategy: Literal["all", "sparse"],
    num_nodes: int,
    survey: Sequence[Round],
    mine: Sequence[PairValue],
) -> tuple[list[Round], list[int]]:
    """The re-test rounds and the suspects, decided on rank 0 from every rank's survey
    values (``mine``: the values this rank recorded) and broadcast (every rank calls it).
    All pairs: the slow pairs measured again, and no suspect."""
    gathered = ctx.gather_to_root(list(mine))
    decided: tuple[list[Round], list[int]] | None = None
    if ctx.rank == 0:
        assert gathered is not None
        series: dict[Hashable, dict[tuple[int, int], float]] = defaultdict(dict)
        for values in gathered:
            for key, pair, value in values:
                series[key][pair] = max(value, series[key].get(pair, value))
        if strategy == "all":
            decided = (remeasure_rounds(series.values()), [])
        else:
            score = suspects(series.values())
            rounds = retest_rounds(
                num_nodes=num_nodes, met=met_pairs(survey), suspect_score=score,
                slow=slow_pairs(series.values()),
            )  # fmt: skip
            decided = (rounds, sorted(score))
    rounds, chosen = ctx.broadcast_from_root(decided)
    return [list(map(tuple, r)) for r in rounds], list(chosen)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanRecord:
    """One benchmark's node-pair plan as it ran."""

    strategy: Literal["all", "sparse"]
    partners: int
    hosts: list[str]
    """Every node's host, in node order."""
    survey: list[Round]
    """All pairs: every round; sparse: the survey's."""
    retests: list[Round]
    suspects: list[int]
    seconds: float
    """Wall time of the pair rounds on rank 0."""
    directed: bool = False
    """Each round runs both ways (the network test): twice the rounds."""


def plan_finding(benchmark: str, plan: PlanRecord, facts: FleetFacts) -> Finding:
    """An info finding naming the plan's rounds, their time and the suspects re-tested."""
    k = len(plan.hosts)
    ways = 2 if plan.directed else 1
    survey, retest = ways * len(plan.survey), ways * len(plan.retests)
    rounds, every = survey + retest, ways * all_pairs_round_count(k)
    per_round = plan.seconds / rounds if rounds else 0.0
    names = [plan.hosts[n] for n in plan.suspects]
    if plan.strategy == "all":
        again = f", {retest} of them measuring slow pairs again" if retest else ""
        what = f"all pairs of {k} nodes: {rounds} rounds{again}"
    else:
        tests = f"{retest} re-test rounds of {len(names)} suspects" if names else "no suspect"
        what = (
            f"sparse plan over {k} nodes: {survey} survey rounds ({plan.partners} partners "
            f"each), {tests}: {rounds} rounds, where all pairs take {every}"
        )
    evidence: dict[str, Any] = {
        "strategy": plan.strategy,
        "num_nodes": k,
        "partners": plan.partners,
        "rounds": rounds,
        "survey_rounds": survey,
        "retest_rounds": retest,
        "max_retest_rounds": ways * RETESTS,
        "all_pairs_rounds": every,
        "seconds": plan.seconds,
        "round_seconds": per_round,
        "suspects": names,
        "retest_pairs": [[plan.hosts[a], plan.hosts[b]] for r in plan.retests for a, b in r],
        "launcher": facts.launcher,
        "names": facts.names,
        "pods": facts.pods,
        "slots": facts.slots,
    }
    if plan.strategy == "sparse":
        evidence["survey_pairs"] = [
            [plan.hosts[a], plan.hosts[b]] for r in plan.survey for a, b in r
        ]
    return Finding(
        id=f"{benchmark}.node_pair_plan",
        severity="info",
        scope="run",
        message=f"Node pairs: {what}; {plan.seconds:.1f} s ({per_round:.2f} s a round).",
        evidence=evidence,
    )
