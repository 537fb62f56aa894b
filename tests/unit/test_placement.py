"""Placement: doctor's per-rank facts on fake sysfs trees, the verdicts over synthetic layouts
(block and interleaved nodes, training's tp / pp groups, NVLink domains, NUMA and NIC), the
launcher flags and the placement table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clusterbench.analyses.placement import placements as placement
from clusterbench.analyses.placement.facts import placements, rank_order, training_groups
from clusterbench.analyses.placement.flags import (
    TORCH_NUMA_BINDING,
    binding_fix,
    block_order_fix,
    mpi_map_follows_gpus,
)
from clusterbench.analyses.placement.section import MAX_RANK_ROWS, section
from clusterbench.analyses.placement.summary import numa_cost
from clusterbench.benchmarks.doctor.numa import numa_copies, numa_legs, remote_copy_finding
from clusterbench.doctor import RankSlot, Sources, numa_cpu
from clusterbench.doctor.placement import check_placement, launcher_kind, nvlink_domains
from clusterbench.schema import (
    CpuInfo,
    Finding,
    GpuInfo,
    HostInfo,
    Measurement,
    NicInfo,
    Results,
    RunInfo,
    ToolInfo,
    Topology,
)
from clusterbench.thresholds import Thresholds
from tests.pages import analysed

# ----------------------------------------------------------------------------- synthetic runs


def _row(rank: int, node: int, local: int, **kw: Any) -> dict[str, Any]:
    return {"rank": rank, "local_rank": local, "node": node, "host": f"node{node}",
            "gpu": None, "cpus": "0-63", "cpu_numa_nodes": [0, 1], **kw}  # fmt: skip


def _layout(num_nodes: int, per_node: int, *, interleaved: bool, **kw: Any) -> list[dict]:
    """Ranks of ``num_nodes`` x ``per_node``: block (node n holds n*per_node..) or round-robin
    (rank r on node r % num_nodes), as srun --distribution=block / cyclic number them."""
    rows = []
    for rank in range(num_nodes * per_node):
        node, local = (
            (rank % num_nodes, rank // num_nodes) if interleaved else divmod(rank, per_node)
        )
        rows.append(_row(rank, node, local, **kw))
    return rows


def _results(
    rows: list[dict[str, Any]],
    *,
    launcher: str | None = "slurm",
    training: dict[str, Any] | None = None,
    hosts: list[HostInfo] | None = None,
    findings: list[Finding] | None = None,
    measurements: list[Measurement] | None = None,
) -> Results:
    by_host: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_host.setdefault(row["host"], []).append(row)
    facts = [
        Finding(id="doctor.placement", severity="info", scope=f"host:{host}", message="",
                evidence={"launcher": launcher, "ranks": ranks})
        for host, ranks in by_host.items()
    ]  # fmt: skip
    config = {"benchmarks": {"training": training} if training else {"doctor": {}}}
    run = RunInfo(id="r", started="now", suite="quick", world_size=len(rows),
                  num_nodes=len(by_host), backend="gloo", command="", config=config)  # fmt: skip
    return Results(
        tool=ToolInfo(version="0"),
        run=run,
        hosts=hosts or [HostInfo(hostname=h) for h in by_host],
        findings=[*facts, *(findings or [])],
        measurements=measurements or [],
    )


def _ids(results: Results) -> dict[str, Finding]:
    found = placement.findings(results, analysed(results, Thresholds()))
    assert len({f.id for f in found}) == len(found), [f.id for f in found]  # one id, one verdict
    return {f.id: f for f in found}


# ----------------------------------------------------------------------------- rank order


def test_block_layout_on_two_nodes_raises_no_warning() -> None:
    results = _results(_layout(2, 4, interleaved=False))
    found = _ids(results)
    assert rank_order(placements(results)) == "block"
    assert [f.severity for f in found.values()] == ["info"]
    layout = found["placement.layout"]
    assert layout.evidence["order"] == "block"
    assert layout.evidence["ranks_by_node"] == {"0": "0-3", "1": "4-7"}


def test_interleaved_layout_on_two_nodes_warns_with_the_launchers_flag() -> None:
    results = _results(_layout(2, 4, interleaved=True))
    assert rank_order(placements(results)) == "round-robin"
    found = _ids(results)["placement.rank_order"]
    assert found.severity == "warn"
    assert found.evidence["ranks_by_host"] == {"node0": "0,2,4,6", "node1": "1,3,5,7"}
    assert found.fix.startswith("srun --distribution=block")
    mpi = _ids(_results(_layout(2, 4, interleaved=True), launcher="mpi"))
    assert "mpirun --map-by ppr:4:node --rank-by slot" in mpi["placement.rank_order"].fix
    unknown = _ids(_results(_layout(2, 4, interleaved=True), launcher=None))
    fix = unknown["placement.rank_order"].fix
    assert "srun --distribution=block" in fix and "--rank-by slot" in fix and "torchrun" in fix


def test_scattered_order() -> None:
    rows = [_row(0, 0, 0), _row(1, 0, 1), _row(2, 1, 0), _row(3, 0, 2), _row(4, 1, 1)]
    assert rank_order(placements(_results(rows))) == "scattered"


# ----------------------------------------------------------------------------- training groups


def test_training_groups_follow_the_training_code() -> None:
    tp = {"strategy": "tp", "world_sizes": [], "sweep": False}
    assert [g.ranks for g in training_groups({"benchmarks": {"training": tp}}, 8)] == [
        (0, 1), (0, 1, 2, 3), tuple(range(8)),
    ]  # fmt: skip
    ddp_sweep = {"strategy": "ddp", "world_sizes": [2, 4], "sweep": True,
                 "sweep_strategies": ["ddp", "pp"]}  # fmt: skip
    groups = training_groups({"benchmarks": {"training": ddp_sweep}}, 8)
    assert [(g.strategy, g.ranks) for g in groups] == [("pp", (0, 1, 2, 3))]
    assert training_groups({"benchmarks": {}}, 8) == []


def test_tp_group_of_four_on_nodes_of_two_crosses_nodes() -> None:
    tp = {"strategy": "tp", "world_sizes": [2, 4]}
    block = _ids(_results(_layout(2, 2, interleaved=False), training=tp))
    # tp=2 fits a node and stays in one; tp=4 cannot: info, with the size to keep within
    assert "placement.rank_order" not in block
    assert "placement.tp_group" not in block
    info = block["placement.tp_group_size"]
    assert info.severity == "info" and [g["size"] for g in info.evidence["groups"]] == [4]
    assert info.evidence["groups"][0]["nodes"] == [0, 1] and "tp <= 2" in info.fix
    interleaved = placement.group_findings(
        placements(_results(_layout(2, 2, interleaved=True))),
        training_groups({"benchmarks": {"training": tp}}, 4),
        "slurm",
    )
    [warn] = [f for f in interleaved if f.severity == "warn"]
    assert warn.id == "placement.tp_group"
    assert warn.evidence["groups"] == [{"size": 2, "ranks": "0-1", "nodes": [0, 1], "min_nodes": 1}]
    assert warn.fix.startswith("srun --distribution=block")
    # 2 nodes of 4, interleaved: tp 2 and 4 cross by the order, tp 8 by its size
    wide = _ids(
        _results(_layout(2, 4, interleaved=True), training={**tp, "world_sizes": [2, 4, 8]})
    )
    assert [g["size"] for g in wide["placement.tp_group"].evidence["groups"]] == [2, 4]
    assert [g["size"] for g in wide["placement.tp_group_size"].evidence["groups"]] == [8]


def test_pp_groups_across_nodes_only_warn_when_the_order_adds_crossings() -> None:
    pp = {"strategy": "pp", "world_sizes": [2, 4]}
    assert "placement.pp_group" not in _ids(_results(_layout(2, 2, interleaved=False), training=pp))
    found = _ids(_results(_layout(2, 2, interleaved=True), training=pp))["placement.pp_group"]
    assert found.severity == "warn" and [g["size"] for g in found.evidence["groups"]] == [2]


def test_tp_group_across_nvlink_domains_of_one_node() -> None:
    islands = [0, 1, 2, 3], [4, 5, 6, 7]
    rows = [
        _row(r, 0, r, gpu=r, gpu_numa_node=r // 4, nvlink_domain=islands[r // 4]) for r in range(8)
    ]
    found = _ids(_results(rows, training={"strategy": "tp"}))["placement.tp_group_nvlink"]
    assert found.severity == "warn"
    assert found.evidence["groups"] == [
        {"size": 8, "ranks": "0-7", "host": "node0", "nvlink_domains": "0-3 / 4-7"}
    ]
    assert "tp <= 4" in found.fix


# ----------------------------------------------------------------------------- NUMA and NIC


def _two_numa_host(name: str = "node0") -> HostInfo:
    return HostInfo(hostname=name, cpu=CpuInfo(cores=64, numa_nodes={"0": "0-31", "1": "32-63"}))


def _affinity_finding(host: str, local_rank: int) -> Finding:
    scope = f"host:{host}/cuda:{local_rank}"
    return Finding(id="doctor.numa.affinity", severity="warn", scope=scope, message="",
                   evidence={"local_rank": local_rank})  # fmt: skip


def test_affinity_on_the_wrong_numa_node_is_summed_up_with_the_launchers_flags() -> None:
    rows = [
        _row(r, 0, r, gpu=r, gpu_numa_node=r // 2, cpus="32-63", cpu_numa_nodes=[1])
        for r in range(4)
    ]
    hosts = [_two_numa_host()]
    affinity = [_affinity_finding("node0", 0), _affinity_finding("node0", 1)]
    layout = _ids(_results(rows, hosts=hosts, findings=affinity))["placement.layout"]
    assert layout.severity == "info"  # doctor's own finding is the warning
    assert layout.evidence["off_gpu_numa"] == [0, 1]
    assert "rank(s) 0-1 run off their GPU's NUMA node (doctor.numa.affinity)" in layout.message
    assert layout.fix.startswith("srun --distribution=block --cpu-bind=map_ldom:0,0,1,1")
    assert "rests on the topology" in layout.fix  # nothing measured it in this run
    torchrun = _ids(_results(rows, hosts=hosts, findings=affinity, launcher="torchrun"))
    assert torchrun["placement.layout"].fix.startswith("torchrun --numa-binding=node")
    # no affinity finding, no fix
    assert _ids(_results(rows, hosts=hosts))["placement.layout"].fix == ""


def _transfer(numa: str, value: float) -> Measurement:
    return Measurement(benchmark="transfer", metric="bandwidth", value=value, unit="GB/s",
                       params={"memory": "pinned", "numa": numa, "direction": "h2d",
                               "size_bytes": 1 << 30, "numa_node": 0},
                       rank=0, host="node0", device="cuda:0")  # fmt: skip


def test_the_measured_numa_cost_of_this_run_is_quoted() -> None:
    rows = [_row(0, 0, 0, gpu=0, gpu_numa_node=0, cpus="32-63", cpu_numa_nodes=[1])]
    results = _results(
        rows, hosts=[_two_numa_host()], findings=[_affinity_finding("node0", 0)],
        measurements=[_transfer("local", 50.0), _transfer("remote", 40.0)],
    )  # fmt: skip
    cost = numa_cost(results)
    assert cost is not None and (cost["source"], cost["loss"]) == ("transfer", 0.2)
    layout = _ids(results)["placement.layout"]
    assert "pinned h2d from the other NUMA node 40.0 GB/s against 50.0 GB/s" in layout.fix
    assert "20% less" in layout.message


def test_doctors_cpu_copy_is_quoted_where_no_transfer_ran() -> None:
    rows = [_row(0, 0, 0, gpu=0, gpu_numa_node=0, cpus="32-63", cpu_numa_nodes=[1])]
    evidence = {"local": {"median": 20.0}, "remote": {"median": 15.0}, "loss": 0.25}
    copy = Finding(id="doctor.numa.remote_copy", severity="info", scope="host:node0", message="",
                   evidence=evidence)  # fmt: skip
    results = _results(
        rows, hosts=[_two_numa_host()], findings=[copy, _affinity_finding("node0", 0)]
    )
    cost = numa_cost(results)
    assert cost is not None and (cost["source"], cost["loss"]) == ("doctor", 0.25)
    assert "CPU copy from the other NUMA node 15.0 GB/s against 20.0 GB/s" in (
        _ids(results)["placement.layout"].fix
    )


def test_nic_on_another_numa_node_than_the_ranks_cpus() -> None:
    rows = [
        _row(0, 0, 0, gpu=0, gpu_numa_node=0, cpus="32-63", cpu_numa_nodes=[1], nic="mlx5_0",
             nic_numa_node=0),
        _row(1, 0, 1, gpu=1, gpu_numa_node=1, cpus="32-63", cpu_numa_nodes=[1], nic="mlx5_1",
             nic_numa_node=1),
    ]  # fmt: skip
    found = _ids(_results(rows, hosts=[_two_numa_host()], launcher="mpi"))["placement.nic_numa"]
    assert found.severity == "warn" and [r["rank"] for r in found.evidence["ranks"]] == [0]
    assert "mpirun --map-by ppr:2:node:PE=32 --bind-to core --rank-by slot" in found.fix


# ----------------------------------------------------------------------------- flags


def test_flags_per_launcher() -> None:
    host = _two_numa_host()
    torchrun = binding_fix("torchrun", gpu_numa=[0, 0, 1, 1], host=host)
    assert torchrun.startswith("torchrun --numa-binding=node") and TORCH_NUMA_BINDING == "2.9"
    assert "map_ldom:0,0,1,1" in binding_fix("slurm", gpu_numa=[0, 0, 1, 1], host=host)
    assert "--cpu-bind=ldoms" in binding_fix("slurm", gpu_numa=[None], host=None)
    mpi = binding_fix("mpi", gpu_numa=[0, 0, 1, 1], host=host)
    assert mpi.startswith("mpirun --map-by ppr:4:node:PE=16 --bind-to core --rank-by slot")
    assert "GPU i's NUMA node here" in mpi
    # GPUs alternating between the nodes: core-order mapping would put them on the wrong one
    assert mpi_map_follows_gpus([0, 0, 1, 1], [0, 1]) and not mpi_map_follows_gpus(
        [0, 1, 0, 1], [0, 1]
    )
    assert "--rankfile" in binding_fix("mpi", gpu_numa=[0, 1, 0, 1], host=host)
    every = binding_fix(None, gpu_numa=[0, 1], host=host)
    assert all(flag in every for flag in ("--numa-binding=node", "map_ldom:0,1", "ppr:2:node"))
    own = binding_fix("clusterbench", gpu_numa=[0, 1], host=host)
    assert own.startswith("clusterbench's own launch binds no rank") and "map_ldom" in own
    assert block_order_fix("slurm", ranks_per_node=8).startswith("srun --distribution=block")


def test_launcher_kind_from_the_environment() -> None:
    assert launcher_kind({"TORCHELASTIC_RUN_ID": "run-1"}, run_id="run-1") == "clusterbench"
    # torchrun started by srun sees both: torchrun numbers the ranks
    torch_in_slurm = {
        "TORCHELASTIC_RUN_ID": "job",
        "SLURM_PROCID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
    }
    assert launcher_kind(torch_in_slurm, run_id="run-1") == "torchrun"
    # srun and mpirun: RANK is set by clusterbench itself when it joins
    slurm = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "RANK": "1", "WORLD_SIZE": "2"}
    assert launcher_kind(slurm) == "slurm"
    assert launcher_kind({"OMPI_COMM_WORLD_RANK": "0", "RANK": "0", "WORLD_SIZE": "2"}) == "mpi"
    assert launcher_kind({}) is None
    # Ray Train sets torchrun's variables; clusterbench.ray runs its ranks with --launcher ray,
    # which the run spec carries (the environment alone says torchrun)
    ray = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    assert launcher_kind(ray) == "torchrun"
    assert launcher_kind(ray, given="ray") == "ray"
    assert launcher_kind({**ray, "TORCHELASTIC_RUN_ID": "x"}, run_id="y", given="ray") == "ray"


def test_fixes_under_ray_say_what_ray_does() -> None:
    from clusterbench.analyses.placement.flags import binding_fix, block_order_fix

    bind = binding_fix("ray", gpu_numa=[0, 1], host=None)
    assert bind.startswith("Ray Train binds no rank to a NUMA node; to bind them, launch with ")
    assert "torchrun" in bind and "srun" in bind and "mpirun" in bind
    assert block_order_fix("ray", ranks_per_node=8).startswith("Ray Train numbers its workers")


# ----------------------------------------------------------------------------- doctor's facts


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _pci(root: Path, chain: list[str]) -> None:
    device = root.joinpath("sys/devices/pci0000:00", *chain)
    device.mkdir(parents=True)
    link = root / "sys/bus/pci/devices" / chain[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)


def test_nvlink_domains_from_the_matrix() -> None:
    nvswitch = Topology(matrix=[["X" if i == j else "NV18" for j in range(4)] for i in range(4)])
    assert set(nvswitch_domains := nvlink_domains(nvswitch).values()) == {(0, 1, 2, 3)}
    assert len(nvswitch_domains) == 4
    pairs = Topology(matrix=[["X", "NV4", "SYS", "SYS"], ["NV4", "X", "SYS", "SYS"],
                             ["SYS", "SYS", "X", "NV4"], ["SYS", "SYS", "NV4", "X"]])  # fmt: skip
    assert nvlink_domains(pairs) == {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}
    assert nvlink_domains(Topology(matrix=[["X", "PIX"], ["PIX", "X"]])) == {}


def test_doctor_records_each_ranks_facts_on_a_fake_node(tmp_path: Path) -> None:
    _write(tmp_path / "sys/devices/system/node/node0/cpulist", "0-31")
    _write(tmp_path / "sys/devices/system/node/node1/cpulist", "32-63")
    _pci(tmp_path, ["0000:00:01.0", "0000:01:00.0", "0000:03:00.0"])  # GPU 0
    _pci(tmp_path, ["0000:00:01.0", "0000:01:00.0", "0000:04:00.0"])  # its NIC, same switch
    _pci(tmp_path, ["0000:80:01.0", "0000:83:00.0"])  # GPU 1, other socket
    gpus = [GpuInfo(index=0, name="g", numa_node=0, pci_bus_id="0000:03:00.0"),
            GpuInfo(index=1, name="g", numa_node=1, pci_bus_id="0000:83:00.0")]  # fmt: skip
    nic = NicInfo(name="mlx5_0", kind="infiniband", numa_node=0, pci_bus_id="0000:04:00.0")
    host = HostInfo(hostname="n0", gpus=gpus, nics=[nic],
                    topology=Topology(matrix=[["X", "NV18"], ["NV18", "X"]]))  # fmt: skip
    node1 = frozenset(range(32, 64))
    slots = (RankSlot(rank=4, local_rank=0, node=2, cpus=node1, gpu=0),
             RankSlot(rank=5, local_rank=1, node=2, cpus=node1, gpu=1))  # fmt: skip
    src = Sources(host=host, root=tmp_path, ranks=slots, launcher="slurm",
                  rank_affinity={0: node1, 1: node1})  # fmt: skip
    [facts] = check_placement(src)
    assert (facts.id, facts.severity, facts.scope) == ("doctor.placement", "info", "host:n0")
    first, second = facts.evidence["ranks"]
    assert (first["rank"], first["node"], first["gpu_numa_node"], first["cpus"]) == (
        4,
        2,
        0,
        "32-63",
    )
    assert first["cpu_numa_nodes"] == [1] and first["nvlink_domain"] == [0, 1]
    assert (first["nic"], first["nic_distance"]) == ("mlx5_0", "same PCIe switch")
    assert (second["nic"], second["nic_distance"]) == ("mlx5_0", "across sockets")
    assert "node 2: ranks 4-5 (slurm); GPUs 0-1 on NUMA node(s) 0-1" in facts.message
    # doctor's affinity verdict (rank 4's GPU on node 0, its CPUs on node 1) and the summary
    affinity = numa_cpu.check_affinity(src)
    assert [f.evidence["local_rank"] for f in affinity] == [0]
    results = _results(facts.evidence["ranks"], hosts=[host.model_copy(update={
        "cpu": CpuInfo(cores=64, numa_nodes={"0": "0-31", "1": "32-63"})})],
        findings=affinity)  # fmt: skip
    found = _ids(results)
    assert found["placement.layout"].evidence["off_gpu_numa"] == [4]
    assert [r["rank"] for r in found["placement.nic_numa"].evidence["ranks"]] == [4, 5]
    assert "GPU(s) 1 have no RDMA NIC on their own NUMA node" in found["placement.nic_numa"].fix


def test_outside_a_run_there_is_nothing_to_place() -> None:
    assert check_placement(Sources(host=HostInfo(hostname="n0"))) == []
    assert placement.findings(_results([]), analysed(_results([]), Thresholds())) == []


# ----------------------------------------------------------------------------- the table


def test_placement_table_one_row_per_rank_then_per_node() -> None:
    small = section(
        _results(_layout(2, 2, interleaved=True, gpu=0, nic="mlx5_0", nic_numa_node=0)),
        analysed(_results(_layout(2, 2, interleaved=True, gpu=0, nic="mlx5_0", nic_numa_node=0))),
    )
    assert small is not None
    [grid] = small.grids
    assert [row[:3] for row in grid.rows] == [("0", "node0", "0"), ("1", "node1", "0"),
                                              ("2", "node0", "1"), ("3", "node1", "1")]  # fmt: skip
    assert grid.rows[0][7] == "mlx5_0 (0)"
    big = section(
        _results(_layout(2, MAX_RANK_ROWS, interleaved=False)),
        analysed(_results(_layout(2, MAX_RANK_ROWS, interleaved=False))),
    )
    assert big is not None
    assert [row[:3] for row in big.grids[0].rows] == [("0-15", "node0", "0-15"),
                                                      ("16-31", "node1", "0-15")]  # fmt: skip
    assert section(_results([]), analysed(_results([]))) is None


# ----------------------------------------------------------------------------- the CPU copy


def test_numa_legs_need_two_nodes_with_cpus() -> None:
    assert numa_legs({0: [0, 1]}, allowed={0, 1}) is None
    assert numa_legs({0: [0, 1], 1: []}, allowed={0, 1}) is None
    assert numa_legs({0: [0, 1], 1: [2, 3]}, allowed={0, 2}) == ((0, [0]), (1, [2]))
    assert numa_copies({0: sorted(os.sched_getaffinity(0))}) == []  # one node: nothing timed


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to")
def test_numa_copy_mechanism_pins_each_leg_and_restores_the_affinity() -> None:
    # Two CPUs of this machine stand in for two nodes: this checks the pinning, placement of
    # the legs and the copy check, not a NUMA cost (this machine's nodes are what they are).
    cpus = sorted(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    legs = numa_copies({0: [cpus[0]], 1: [cpus[1]]}, size_bytes=4 << 20, repeats=3)
    assert os.sched_getaffinity(0) == before
    assert [(leg.numa, leg.memory_node, leg.cpu_node) for leg in legs] == [
        ("local", 0, 0), ("remote", 0, 1),
    ]  # fmt: skip
    assert all(len(leg.samples_gbps) == 3 and min(leg.samples_gbps) > 0 for leg in legs)
    found = remote_copy_finding({0: [cpus[0]], 1: [cpus[1]]}, scope="host:h", size_bytes=4 << 20)
    assert found is not None and (found.id, found.severity) == ("doctor.numa.remote_copy", "info")
    ev = found.evidence
    assert (ev["memory_node"], ev["local"]["cpu_node"], ev["remote"]["cpu_node"]) == (0, 0, 1)
    assert ev["local"]["samples"] == 5 and ev["loss"] == round(
        1 - ev["remote"]["median"] / ev["local"]["median"], 4
    )
    assert remote_copy_finding({0: cpus}, scope="host:h") is None
