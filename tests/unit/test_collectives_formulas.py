"""Collectives: nccl-tests formulas, size lists, groups, exact checks, findings and the report."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from clusterbench.analyses.run import analyze
from clusterbench.benchmarks.collectives import CollectivesConfig
from clusterbench.benchmarks.collectives.findings import (
    findings,
    inter_node_peak_gbps,
    node_pair_findings,
)
from clusterbench.benchmarks.collectives.groups import (
    GroupHandle,
    GroupSpec,
    plan_groups,
    round_robin_pairs,
)
from clusterbench.benchmarks.collectives.ops import make_op
from clusterbench.benchmarks.collectives.section import collective_grids, section
from clusterbench.collective_facts import (
    OPS,
    algbw_gbps,
    bus_factor,
    round_size,
    size_sweep,
    usable_sizes,
)
from clusterbench.config import ConfigError, Thresholds, build_run_config
from clusterbench.schema import (
    GpuInfo,
    GpuSpecRef,
    HostInfo,
    Measurement,
    NicInfo,
    ParamValue,
    Results,
    RunInfo,
    ToolInfo,
)

MIB = 2**20

# --- formulas ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (2, {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "all_to_all": 0.5}),
        (4, {"all_reduce": 1.5, "all_gather": 0.75, "reduce_scatter": 0.75, "all_to_all": 0.75}),
        (
            8,
            {"all_reduce": 1.75, "all_gather": 0.875, "reduce_scatter": 0.875, "all_to_all": 0.875},
        ),
    ],
)
def test_bus_factors_follow_nccl_tests(n: int, expected: dict[str, float]) -> None:
    for op, factor in {**expected, "broadcast": 1.0, "send_recv": 1.0}.items():
        assert bus_factor(op, n) == pytest.approx(factor)
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("reduce", n)


def test_algbw_is_bytes_over_time_in_gb_per_s() -> None:
    assert algbw_gbps(8 * 2**30, 0.025) == pytest.approx(8 * 2**30 / 0.025 / 1e9)
    # docs/reference.md: 2 H200 all_reduce 8 GiB busbw 342 -> algbw 342 (F = 1 for n = 2)
    t = 8 * 2**30 / 342e9
    assert algbw_gbps(8 * 2**30, t) * bus_factor("all_reduce", 2) == pytest.approx(342)


def test_size_sweep_rounding_and_memory_cap() -> None:
    assert size_sweep(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_sweep(8, 100, 4) == [8, 32]
    # chunked ops: multiples of n x element size, at least one chunk each
    assert round_size("all_gather", 8, n=4, element_bytes=4) == 16
    assert round_size("all_to_all", 100, n=3, element_bytes=4) == 96
    assert round_size("all_reduce", 10, n=4, element_bytes=4) == 8
    assert round_size("broadcast", 2, n=4, element_bytes=2) == 2
    sizes = size_sweep(8, 64 * MIB, 2)
    capped = usable_sizes("all_to_all", sizes, n=8, element_bytes=4, memory_limit_bytes=64 * MIB)
    assert max(capped) == 32 * MIB  # all_to_all holds input and output: 2 x 32 MiB
    assert capped[0] == 32 and len(set(capped)) == len(capped)  # 8 and 16 round up to 32: once
    gather = usable_sizes("all_gather", sizes, n=8, element_bytes=4, memory_limit_bytes=64 * MIB)
    assert max(gather) == 32 * MIB  # 32 MiB x (1 + 1/8) fits, 64 MiB x 1.125 does not


def test_config_validation_and_presets() -> None:
    assert CollectivesConfig(dtype="float32").dtype == "fp32"
    sets = ["collectives.dtype=fp16", "collectives.ops=all_reduce,broadcast"]
    cfg = build_run_config(device_type="cpu", sets=sets).benchmarks["collectives"]
    assert (cfg.dtype, cfg.ops) == ("fp16", ["all_reduce", "broadcast"])
    for bad in ("ops=all_reduce,reduce", "modes=async", "groups=racks", "dtype=int8"):
        with pytest.raises(ConfigError, match=r"collectives\.\w+: input should be"):
            build_run_config(device_type="cpu", sets=[f"collectives.{bad}"])
    with pytest.raises(ConfigError, match="ops must not be empty"):
        build_run_config(device_type="cpu", sets=["collectives.ops="])
    with pytest.raises(ValueError, match="factor"):
        CollectivesConfig(factor=1)
    cpu = CollectivesConfig.preset(suite="quick", device_type="cpu")
    assert cpu.max_bytes == 4 * MIB and "graph" not in cpu.modes
    gpu = CollectivesConfig.preset(suite="standard", device_type="cuda")
    assert gpu.max_bytes == 8 * 2**30 and "graph" in gpu.modes


# --- groups --------------------------------------------------------------------------------


def test_round_robin_pairs_cover_every_pair_in_disjoint_rounds() -> None:
    for k in range(2, 9):
        pairs = round_robin_pairs(k)
        assert sorted(pairs) == list(itertools.combinations(range(k), 2))
        per_round = k // 2
        for i in range(0, len(pairs) - per_round + 1, per_round):
            nodes = [n for p in pairs[i : i + per_round] for n in p]
            assert len(nodes) == len(set(nodes))


def test_plan_groups_per_node_rail_and_pairs() -> None:
    kinds = ["world", "intra_node", "inter_node", "node_pairs"]
    one = plan_groups(kinds, node_of_rank=[0, 0, 0, 0], host_of_node=["a"])
    assert [g.name for g in one] == ["world"]
    two = plan_groups(kinds, node_of_rank=[0, 0, 1, 1], host_of_node=["a", "b"])
    assert [(g.name, g.ranks) for g in two] == [
        ("world", (0, 1, 2, 3)),
        ("node0", (0, 1)),
        ("node1", (2, 3)),
        ("rail0", (0, 2)),
        ("rail1", (1, 3)),
    ]
    three = plan_groups(kinds, node_of_rank=[0, 1, 2], host_of_node=["a", "b", "c"])
    pairs = [g for g in three if g.kind == "node_pairs"]
    assert {g.hosts for g in pairs} == {("a", "b"), ("a", "c"), ("b", "c")}
    assert all(g.kind != "intra_node" for g in three)  # one GPU per node: groups of one dropped


# --- exact checks on a one-rank gloo world -------------------------------------------------


@pytest.fixture
def one_rank_world() -> Iterator[GroupHandle]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield GroupHandle(GroupSpec("world", "world", (0,)), None, 0)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_ops_check_exact_values_and_count_corruption(
    one_rank_world: GroupHandle, dtype: str
) -> None:
    for name in [o for o in OPS if o != "send_recv"]:
        for emulate in (False, True):
            op = make_op(
                name, size_bytes=4096, h=one_rank_world, dtype=dtype,
                device=torch.device("cpu"), emulate=emulate,
            )  # fmt: skip
            op.prepare()
            op.run()
            assert op.count_wrong() == 0, (name, emulate)
            op.prepare()  # outputs poisoned with NaN and never written: every element wrong
            if name not in ("all_reduce", "broadcast"):  # in place: the input is the output
                assert op.count_wrong() > 0, name


# --- findings ------------------------------------------------------------------------------

H200 = GpuSpecRef(
    sku="H200 SXM",
    dense_tflops={"bf16": 989},
    hbm_gbps=4800,
    nvlink_gbps_per_dir=450,
    source="datasheet",
)


def results(
    ms: list[Measurement], *, hosts: list[HostInfo], num_nodes: int = 1, backend: str = "nccl"
) -> Results:
    run = RunInfo(
        id="r", started="2026-11-01T00:00:00Z", suite="quick", world_size=8,
        num_nodes=num_nodes, backend=backend, command="clusterbench run",
    )  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, hosts=hosts, measurements=ms)


def coll(
    metric: str, value: float, *, op: str = "all_reduce", group: str = "world", **extra: ParamValue
) -> Measurement:
    params: dict[str, ParamValue] = {
        "op": op, "size_bytes": 8 * 2**30, "group": group, "group_kind": "world",
        "group_size": 8, "mode": "back_to_back", "dtype": "fp32", **extra,
    }  # fmt: skip
    unit = "count" if metric == "num_wrong" else "GB/s"
    return Measurement(
        benchmark="collectives", metric=metric, value=value, unit=unit, params=params,
        rank=0, host="h1", device="cuda:0",
    )  # fmt: skip


def gpu_host(name: str = "h1", *, nics: list[NicInfo] | None = None) -> HostInfo:
    gpus = [GpuInfo(index=i, name="H200", spec=H200) for i in range(8)]
    return HostInfo(hostname=name, gpus=gpus, nics=nics or [])


def test_wrong_results_fail_naming_op_and_group() -> None:
    r = results([coll("num_wrong", 0, op="broadcast"), coll("num_wrong", 12)], hosts=[gpu_host()])
    found = [f for f in findings(r, Thresholds()) if f.severity == "fail"]
    assert [f.id for f in found] == ["collectives.wrong_results"]
    assert "all_reduce" in found[0].message and "world" in found[0].message


def test_low_busbw_warns_against_nvlink_spec() -> None:
    small = coll("busbw", 500.0, size_bytes=MIB)  # not the largest size: not judged
    slow = results([coll("busbw", 300.0), small], hosts=[gpu_host()])
    found = findings(slow, Thresholds())
    assert [f.id for f in found] == ["collectives.low_busbw"]
    assert found[0].evidence["peak_gbps"] == 450 and found[0].severity == "warn"
    healthy = results([coll("busbw", 370.0)], hosts=[gpu_host()])
    assert findings(healthy, Thresholds()) == []
    cpu = results([coll("busbw", 1.0)], hosts=[HostInfo(hostname="h1")], backend="gloo")
    assert findings(cpu, Thresholds()) == []
    assert "collectives.low_busbw" in [f.id for f in analyze(slow, Thresholds())]


def test_low_busbw_across_nodes_uses_the_nic_share_per_gpu() -> None:
    nics = [
        NicInfo(name=f"mlx5_{i}", kind="infiniband", rate_gbps=400, state="up") for i in range(8)
    ]
    hosts = [gpu_host("h1", nics=nics), gpu_host("h2", nics=nics)]
    assert inter_node_peak_gbps(hosts[0]) == pytest.approx(50.0)  # 8 x 400 Gb/s / 8 / 8 GPUs
    rail = coll("busbw", 30.0, group="rail0", group_kind="inter_node")
    found = findings(results([rail], hosts=hosts, num_nodes=2), Thresholds())
    assert [f.id for f in found] == ["collectives.low_busbw"]
    good = coll("busbw", 46.0, group="rail0", group_kind="inter_node")
    assert findings(results([good], hosts=hosts, num_nodes=2), Thresholds()) == []


def pair(a: str, b: str, value: float) -> Measurement:
    return coll("busbw", value, group=f"{a}-{b}", group_kind="node_pairs", hosts=f"{a},{b}")


@pytest.mark.parametrize("num_nodes", [3, 4, 6])
def test_slow_node_pair_names_the_common_node(num_nodes: int) -> None:
    nodes = [f"n{i}" for i in range(num_nodes)]
    bad = nodes[-1]
    ms = [
        pair(a, b, 20.0 if bad in (a, b) else 45.0 + i * 0.1)
        for i, (a, b) in enumerate(itertools.combinations(nodes, 2))
    ]
    r = results(ms, hosts=[gpu_host(n) for n in nodes], num_nodes=num_nodes)
    found = node_pair_findings(r, mads=3.0, min_rel=0.05)
    assert [f.id for f in found] == ["collectives.slow_node_pair"]
    assert found[0].evidence["common_nodes"] == [bad] and found[0].scope == f"host:{bad}"
    assert len(found[0].evidence["slow_pairs"]) == num_nodes - 1
    even = [pair(a, b, 45.0) for a, b in itertools.combinations(nodes, 2)]
    assert node_pair_findings(results(even, hosts=[]), mads=3.0, min_rel=0.05) == []


# --- report --------------------------------------------------------------------------------


def test_grids_show_busbw_for_large_and_latency_for_small_sizes() -> None:
    ms = [
        coll("busbw", 300.0),
        coll("busbw", 200.0, op="all_gather"),
        Measurement(
            benchmark="collectives", metric="latency_us", value=13.5, unit="us",
            params={"op": "all_reduce", "size_bytes": 8, "group": "world", "group_size": 8,
                    "mode": "graph", "dtype": "fp32"},
            rank=0, host="h1", device="cuda:0",
        ),
    ]  # fmt: skip
    grids = collective_grids(ms)
    assert [g.header for g in grids] == [
        ("size", "all_reduce", "all_gather"),
        ("size", "all_reduce"),
    ]
    assert grids[0].rows == [("8 GiB", "300.0", "200.0")]
    assert grids[1].rows == [("8 B", "13.5")]


def test_grid_sizes_that_print_alike_share_a_row_unless_one_op_has_both() -> None:
    # nccl-tests rounds all_gather's 32 MiB to a multiple of 80 ranks x 8 bytes: 33,553,920
    ms = [
        coll("busbw", 83.0, size_bytes=32 * MIB),
        coll("busbw", 48.6, op="all_gather", size_bytes=33_553_920),
        coll("busbw", 141.0, size_bytes=64 * MIB),
    ]
    assert collective_grids(ms)[0].rows == [("32 MiB", "83.0", "48.6"), ("64 MiB", "141.0", "-")]
    # the same op at two sizes that print alike: a row each, nothing lost
    twice = [coll("busbw", 83.0, size_bytes=32 * MIB), coll("busbw", 82.0, size_bytes=32 * MIB - 8)]
    assert collective_grids(twice)[0].rows == [("32 MiB", "82.0"), ("32 MiB", "83.0")]


def test_summary_rows_of_one_op_on_groups_of_different_ranks_are_apart() -> None:
    # imported: reduce on two GPUs (-g 2), then reduce on one
    two = coll("busbw", 11.1, op="reduce", group_size=2)
    one = coll("busbw", 267.4, op="reduce", group_size=1)
    rows = section([two, one, coll("busbw", 4.0, group_size=2)], multi_host=False).rows
    assert [(r.what, r.num_ranks, r.median) for r in rows] == [
        ("reduce busbw · world of 2 ranks", 2, 11.1),
        ("reduce busbw · world of 1 rank", 1, 267.4),
        ("all_reduce busbw · world", 2, 4.0),
    ]


def test_low_busbw_uses_what_healthy_nvlink_reaches_when_known() -> None:
    from clusterbench.hardware.specs import match_spec, to_spec_ref

    spec = match_spec("NVIDIA H200")
    assert spec is not None
    host = HostInfo(
        hostname="h1", gpus=[GpuInfo(index=i, name="NVIDIA H200", spec=to_spec_ref(spec))
                             for i in range(2)],
    )  # fmt: skip
    # 2x H200 measured: all_reduce 344.5, all_gather 296.9 GB/s at 8 GiB -> healthy, no finding
    healthy = [coll("busbw", 344.5), coll("busbw", 296.9, op="all_gather")]
    assert findings(results(healthy, hosts=[host]), Thresholds()) == []
    # traffic forced onto sockets: 3.1 GB/s at 128 MiB -> warn against 342
    sockets = coll("busbw", 3.1, size_bytes=128 * MIB)
    found = findings(results([sockets], hosts=[host]), Thresholds())
    assert [f.id for f in found] == ["collectives.low_busbw"]
    assert found[0].evidence["peak_gbps"] == 342.0 and "128 MiB" in found[0].message
    # a sweep that stops at 1 MiB cannot judge the link
    tiny = coll("busbw", 20.0, size_bytes=MIB)
    assert findings(results([tiny], hosts=[host]), Thresholds()) == []


@pytest.mark.parametrize("name", ["all_reduce", "broadcast"])
def test_in_place_ops_catch_a_wrong_result(
    one_rank_world: GroupHandle, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # In place, prepare alone leaves the expected pattern: only a collective that writes
    # something wrong can show the check works.  Here the "collective" doubles every element.
    def corrupt(tensor: torch.Tensor, *args: object, **kwargs: object) -> None:
        tensor.mul_(2).add_(1)

    monkeypatch.setattr(dist, name, corrupt)
    op = make_op(name, size_bytes=4096, h=one_rank_world, dtype="fp32",
                 device=torch.device("cpu"), emulate=False)  # fmt: skip
    op.prepare()
    op.run()
    assert op.count_wrong() == 4096 // 4
