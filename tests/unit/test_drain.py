"""The drain list over synthetic fleets run through the planner: a planted slow node is drained
alone, a slow link is named as a link, a healthy fleet gives an empty list (200 seeds of 10%
noise), and the commands follow the launcher."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from io import StringIO

import pytest
from rich.console import Console

from clusterbench.analyses.drain.drain_list import drain_list
from clusterbench.benchmarks.pair_plan import (
    met_pairs,
    resolve_strategy,
    retest_rounds,
    round_robin,
    slow_pairs,
    survey_rounds,
    suspects,
)
from clusterbench.benchmarks.pair_rounds import FleetFacts, PlanRecord, plan_finding
from clusterbench.report.console import render_summary
from clusterbench.report.drain import drain_json, drain_lines, drain_markdown
from clusterbench.schema import HostInfo, Measurement, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds
from tests.pages import analysis

FAST = 10.0


@dataclass
class Fleet:
    """A synthetic fleet: k nodes, pairs lognormal around FAST, some node or link slowed."""

    num_nodes: int
    seed: int = 0
    noise: float = 0.1
    bad_node: int | None = None
    bad_link: tuple[int, int] | None = None
    transient: tuple[int, int] | None = None
    """A pair slow on its first test only (a burst of noise)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.hosts = [f"node{i}" for i in range(self.num_nodes)]
        self.tested: set[frozenset[int]] = set()

    def figure(self, a: int, b: int) -> float:
        value = FAST * self.rng.lognormvariate(0, self.noise)
        if self.bad_node in (a, b) or {a, b} == set(self.bad_link or ()):
            value *= 0.01
        if {a, b} == set(self.transient or ()) and frozenset((a, b)) not in self.tested:
            value *= 0.3
        self.tested.add(frozenset((a, b)))
        return value


def _busbw(hosts: tuple[str, str], value: float) -> Measurement:
    return Measurement(
        benchmark="collectives", metric="busbw", value=value, unit="GB/s",
        params={"op": "all_reduce", "size_bytes": 1 << 20, "group": "-".join(hosts),
                "group_kind": "node_pairs", "group_size": 2, "hosts": ",".join(hosts),
                "mode": "back_to_back", "dtype": "fp32"},
        rank=0, host=hosts[0], device="cpu:0",
    )  # fmt: skip


def _tcp(src: str, dst: str, value: float) -> Measurement:
    return Measurement(
        benchmark="network", metric="tcp_throughput", value=value, unit="Gb/s",
        params={"src_host": src, "dst_host": dst, "loopback": False, "streams": 2,
                "tool": "socket"},
        rank=0, host=src, device="cpu:0",
    )  # fmt: skip


def _run(fleet: Fleet, *, strategy: str = "sparse", launcher: str = "torchrun",
         directed: bool = False, names: dict[str, str] | None = None,
         pods: list[str] | None = None) -> tuple[Results, PlanRecord]:  # fmt: skip
    """The planner's rounds measured on ``fleet`` (survey, suspects, re-tests), as results."""
    k = fleet.num_nodes
    kind = resolve_strategy(strategy, num_nodes=k)  # type: ignore[arg-type]
    survey = survey_rounds(k) if kind == "sparse" else round_robin(k)

    def measure(rounds: list[list[tuple[int, int]]]) -> list[tuple[tuple[int, int], float]]:
        ways = [(min(a, b), max(a, b)) for r in rounds for a, b in r]  # as the groups name them
        ways += [(b, a) for a, b in ways] if directed else []
        return [((a, b), fleet.figure(a, b)) for a, b in ways]

    measured = measure(survey)
    retests: list[list[tuple[int, int]]] = []
    score: dict[int, float] = {}
    if kind == "sparse":  # as pair_rounds.agree_retests decides them
        score = suspects([dict(measured)])
        retests = retest_rounds(num_nodes=k, met=met_pairs(survey), suspect_score=score,
                                slow=slow_pairs([dict(measured)]))  # fmt: skip
        measured += measure(retests)
    h = fleet.hosts
    ms = [_tcp(h[a], h[b], v) if directed else _busbw((h[a], h[b]), v) for (a, b), v in measured]
    plan = PlanRecord(strategy=kind, partners=3, hosts=h, survey=survey, retests=retests,
                      suspects=sorted(score), seconds=1.0, directed=directed)  # fmt: skip
    facts = FleetFacts(launcher=launcher, names=names or {x: x for x in h}, pods=pods or [],
                       slots=dict.fromkeys(h, 8))  # fmt: skip
    benchmark = "network" if directed else "collectives"
    run = RunInfo(id="r", started="2026-11-01T00:00:00Z", suite="quick", world_size=k,
                  num_nodes=k, backend="gloo", command="clusterbench run")  # fmt: skip
    results = Results(
        tool=ToolInfo(version="0.1.0"), run=run, measurements=ms,
        hosts=[HostInfo(hostname=x) for x in h], findings=[plan_finding(benchmark, plan, facts)],
    )  # fmt: skip
    return results, plan


@pytest.mark.parametrize("num_nodes", [8, 12, 64])
@pytest.mark.parametrize("directed", [False, True])
def test_a_slow_node_is_drained_alone_with_its_retests(num_nodes: int, directed: bool) -> None:
    fleet = Fleet(num_nodes, seed=3, bad_node=5)
    results, plan = _run(fleet, directed=directed)
    dl = drain_list(results, Thresholds())
    assert [(e.kind, e.nodes) for e in dl.entries] == [("node", ("node5",))]
    [evidence] = dl.entries[0].evidence
    # slow with every partner it met: 3 in the survey and 2 re-tests against nodes known good
    assert evidence.slow_partners == evidence.partners == 5
    assert len(evidence.retests) == (4 if directed else 2)
    assert all("node5" in p for p in evidence.retests)
    assert evidence.healthy_median == pytest.approx(FAST, rel=0.15)
    assert "node5" not in dl.hostfile and len(dl.hostfile) == num_nodes - 1
    assert len(plan.survey) + len(plan.retests) == 3 + num_nodes % 2 + 2 < num_nodes - 1


def test_a_slow_link_is_a_link_not_a_drain() -> None:
    fleet = Fleet(64, seed=4)
    link = survey_rounds(64)[1][7]
    fleet.bad_link = link
    results, _ = _run(fleet)
    dl = drain_list(results, Thresholds())
    assert [(e.kind, e.nodes) for e in dl.entries] == [
        ("link", tuple(sorted(fleet.hosts[n] for n in link)))
    ]
    entry = dl.entries[0]
    assert entry.commands == [] and "cable" in entry.check
    # both ends measured fine with their other partners: 2 survey partners and 2 re-tests
    assert entry.evidence[0].fine == dict.fromkeys(entry.nodes, 4)
    assert dl.hostfile == fleet.hosts  # nothing drained


@pytest.mark.parametrize("directed", [False, True])
def test_a_pair_slow_once_is_measured_again_and_forgiven(directed: bool) -> None:
    fleet = Fleet(64, seed=8)
    fleet.transient = survey_rounds(64)[2][5]
    results, plan = _run(fleet, directed=directed)
    assert tuple(sorted(fleet.transient)) in [p for r in plan.retests[:1] for p in r]
    assert drain_list(results, Thresholds()).entries == []
    # the same burst with no second test would have been named a link
    ends = {fleet.hosts[n] for n in fleet.transient}
    first: list[Measurement] = []
    for m in results.measurements:
        where = {*str(m.params.get("hosts", "")).split(","), m.params.get("src_host"),
                 m.params.get("dst_host")}  # fmt: skip
        if not (ends <= where and any(f.params == m.params for f in first)):
            first.append(m)
    once = results.model_copy(update={"measurements": first})
    assert len(first) == len(results.measurements) - (2 if directed else 1)
    assert [e.kind for e in drain_list(once, Thresholds()).entries] == ["link"]


@pytest.mark.parametrize(("num_nodes", "strategy"), [(8, "auto"), (64, "sparse")])
def test_healthy_fleets_give_an_empty_list_over_200_seeds(num_nodes: int, strategy: str) -> None:
    alarms = []
    for seed in range(200):
        results, _ = _run(Fleet(num_nodes, seed=seed, noise=0.1), strategy=strategy)
        dl = drain_list(results, Thresholds())
        assert dl.judged
        if dl.entries:
            alarms.append((seed, [e.nodes for e in dl.entries]))
    assert alarms == []


def test_commands_follow_the_launcher() -> None:
    fleet = Fleet(12, seed=5, bad_node=2)
    slurm, _ = _run(fleet, launcher="slurm", names={f"node{i}": f"gpu{i:03d}" for i in range(12)})
    [entry] = drain_list(slurm, Thresholds()).entries
    [command] = entry.commands
    assert command.startswith('scontrol update nodename=gpu002 state=drain reason="clusterbench: ')
    assert "all_reduce busbw down to" in command and command.count('"') == 2

    k8s, _ = _run(Fleet(12, seed=5, bad_node=2), launcher="kubernetes", pods=["node2"])
    [entry] = drain_list(k8s, Thresholds()).entries
    lookup = "\"$(kubectl get pod node2 -o jsonpath='{.spec.nodeName}')\""
    assert entry.commands == [
        f"kubectl cordon {lookup}",
        f"kubectl taint nodes {lookup} clusterbench=slow-network:NoSchedule",
    ]

    mpi, _ = _run(Fleet(12, seed=5, bad_node=2), launcher="mpi")
    dl = drain_list(mpi, Thresholds())
    assert dl.entries[0].commands == []
    assert dl.hostfile == [f"node{i} slots=8" for i in range(12) if i != 2]


def test_rendered_drain_list_console_markdown_and_json() -> None:
    results, _ = _run(Fleet(12, seed=6, bad_node=7))
    dl = drain_list(results, Thresholds())
    lines = drain_lines(dl)
    assert lines[0].startswith("Drain list: 1 node to drain (launcher torchrun; 12 nodes judged")
    assert any(line.strip().startswith("node node7: all_reduce busbw down to") for line in lines)
    assert lines[-1].endswith(" ".join(f"node{i}" for i in range(12) if i != 7))
    md = drain_markdown(dl)
    assert md.startswith("## Drain list") and "- **node node7:" in md
    body = json.loads(drain_json(dl))
    assert body["empty"] is False and body["entries"][0]["nodes"] == ["node7"]
    assert body["plans"][0]["strategy"] == "sparse"

    healthy, _ = _run(Fleet(12, seed=6))
    empty = drain_list(healthy, Thresholds())
    assert drain_lines(empty) == [drain_lines(empty)[0]]
    assert drain_lines(empty)[0].startswith("Drain list: empty: no bad node or link (12 nodes")
    assert json.loads(drain_json(empty))["empty"] is True
    out = StringIO()
    render_summary(analysis(healthy, []), Console(file=out, width=200))
    assert "Drain list: empty" in out.getvalue()


def test_no_list_without_node_pairs_among_three_nodes() -> None:
    results, _ = _run(Fleet(8, seed=1))
    two = results.model_copy(
        update={"measurements": [m for m in results.measurements
                                 if set(str(m.params["hosts"]).split(",")) <= {"node0", "node1"}],
                "findings": []}
    )  # fmt: skip
    dl = drain_list(two, Thresholds())
    assert not dl.judged and drain_lines(dl) == [] and drain_markdown(dl) == ""


def test_launcher_and_node_names_from_the_environment() -> None:
    from clusterbench.benchmarks.pair_rounds import _launcher, _service_name

    slurm = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "8", "SLURMD_NODENAME": "gpu017"}
    assert _launcher(slurm, run_id="") == "slurm"
    assert _service_name(slurm, host="gpu017.cluster", launcher="slurm") == ("gpu017", True)
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "TORCHELASTIC_RUN_ID": "x", "RANK": "0",
           "WORLD_SIZE": "2"}  # fmt: skip
    assert _launcher(pod, run_id="") == "kubernetes"  # torchrun inside a pod
    assert _service_name(pod, host="job-worker-0", launcher="kubernetes") == ("job-worker-0", False)
    named = {**pod, "NODE_NAME": "ip-10-0-3-7"}
    assert _service_name(named, host="job-worker-0", launcher="kubernetes") == ("ip-10-0-3-7", True)
    assert _launcher({"OMPI_COMM_WORLD_RANK": "0"}, run_id="") == "mpi"
    assert _launcher({"TORCHELASTIC_RUN_ID": "r1"}, run_id="r1") == "clusterbench"
    assert _launcher({}, run_id="") == "none"


def test_drain_list_in_the_html_report() -> None:
    from clusterbench.report.html import render_html
    from tests.html_page import parse_page

    results, _ = _run(Fleet(12, seed=6, bad_node=7), launcher="slurm")
    page = render_html(analysis(results))
    text = " ".join(parse_page(page).text)
    assert '<section id="drain"><h2>Drain list</h2>' in page and 'href="#drain"' in page
    assert "Drain list: 1 node to drain (launcher slurm; 12 nodes judged" in text
    assert "scontrol update nodename=node7 state=drain reason=&quot;clusterbench: " in page
    assert "node node7: all_reduce busbw down to" in text
    assert " ".join(f"node{i}" for i in range(12) if i != 7) in text.replace("\n", " ")

    healthy, _ = _run(Fleet(12, seed=6))
    page = render_html(analysis(healthy))
    assert "Drain list: empty: no bad node or link (12 nodes" in page
    assert "scontrol" not in page
