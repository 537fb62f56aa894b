"""Network benchmark: tool output parsers, the pair schedule, the socket test, the verdicts."""

from __future__ import annotations

import itertools
import json
import socket

import pytest

from clusterbench.benchmarks.network import NetworkConfig
from clusterbench.benchmarks.network import tools as tools
from clusterbench.benchmarks.network.findings import (
    findings,
    internode_capacity_findings,
    nic_state_findings,
    rdma_bandwidth_findings,
    tcp_throughput_findings,
)
from clusterbench.benchmarks.pair_plan import round_robin
from clusterbench.config import ConfigError, Thresholds, build_run_config
from clusterbench.schema import Measurement, ParamValue, Reference, Results, RunInfo, ToolInfo

# The shape of `iperf3 -c HOST -P 2 -t 2 -J` (iperf 3.x), trimmed to the fields we read.
IPERF3_JSON = {
    "start": {"connected": [], "version": "iperf 3.12", "test_start": {"num_streams": 2}},
    "intervals": [
        {
            "streams": [],
            "sum": {"start": 0, "end": 1.0, "bytes": 11e9 / 8, "bits_per_second": 11e9},
        },
        {
            "streams": [],
            "sum": {"start": 1.0, "end": 2.0, "bytes": 9e9 / 8, "bits_per_second": 9e9},
        },
    ],
    "end": {
        "streams": [],
        "sum_sent": {"seconds": 2.0, "bits_per_second": 10.2e9, "retransmits": 3},
        "sum_received": {"seconds": 2.0, "bits_per_second": 10.0e9},
        "cpu_utilization_percent": {"host_total": 40.1, "remote_total": 30.2},
    },
}

# `ib_write_bw -d mlx5_0 --report_gbits -F SERVER` (perftest), client side.
IB_WRITE_BW_GBITS = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 Mtu             : 4096[B]
 Link type       : IB
---------------------------------------------------------------------------------------
 local address: LID 0x01 QPN 0x0108 PSN 0x5a6f1c RKey 0x1fffbf VAddr 0x007f2b4c3b1000
 remote address: LID 0x02 QPN 0x0108 PSN 0x2a9f5e RKey 0x1fffbf VAddr 0x007f0e8d0e6000
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             392.45             391.87             0.747437
---------------------------------------------------------------------------------------
"""
IB_WRITE_BW_MB = """\
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             11634.52           11630.87           0.186094
"""


def test_parse_iperf3_json_reads_receiver_total_and_intervals() -> None:
    result = tools.parse_iperf3_json(json.dumps(IPERF3_JSON))
    assert result.gbps == pytest.approx(10.0)
    assert result.interval_gbps == pytest.approx([11.0, 9.0])
    assert result.tool == "iperf3"


def test_parse_iperf3_json_error_raises() -> None:
    text = json.dumps({"start": {}, "intervals": [], "end": {}, "error": "unable to connect"})
    with pytest.raises(RuntimeError, match="unable to connect"):
        tools.parse_iperf3_json(text)


def test_parse_ib_write_bw_average_column() -> None:
    assert tools.parse_ib_write_bw(IB_WRITE_BW_GBITS) == pytest.approx(391.87)
    # perftest's MB is 2^20 bytes
    assert tools.parse_ib_write_bw(IB_WRITE_BW_MB) == pytest.approx(11630.87 * 2**20 * 8 / 1e9)
    with pytest.raises(ValueError, match="BW average"):
        tools.parse_ib_write_bw("Couldn't connect to 10.0.0.2:18515\n")


@pytest.mark.parametrize("num_nodes", range(1, 10))
def test_round_robin_covers_every_pair_once_no_node_twice_per_round(num_nodes: int) -> None:
    rounds = round_robin(num_nodes)
    seen = [frozenset(p) for pairs in rounds for p in pairs]
    assert sorted(seen, key=sorted) == sorted(
        (frozenset(p) for p in itertools.combinations(range(num_nodes), 2)), key=sorted
    )
    for pairs in rounds:
        nodes = [n for p in pairs for n in p]
        assert len(nodes) == len(set(nodes))
    assert len(rounds) == (num_nodes - 1 if num_nodes % 2 == 0 else num_nodes)


def test_socket_throughput_and_latency_over_loopback() -> None:
    servers = tools.start_servers("127.0.0.1", iperf3=False, rdma_device=None, timeout_s=30)
    try:
        port = servers.ports.socket
        result = tools.socket_throughput("127.0.0.1", port=port, streams=2, duration_s=0.6)
        rtts = tools.socket_latency_us("127.0.0.1", port=port, rounds=50)
    finally:
        servers.stop()
    assert result.tool == "socket" and result.gbps > 0
    assert result.interval_gbps and all(r > 0 for r in result.interval_gbps)
    assert len(rtts) == 50 and all(0 < r < 1e6 for r in rtts)


def test_local_address_from_interface_name_and_plain_address() -> None:
    assert tools.local_address("lo", peer=None) == "127.0.0.1"
    assert tools.local_address("10.1.2.3", peer=None) == "10.1.2.3"
    assert tools.local_address("", peer=None) == "127.0.0.1"


def test_config_presets_and_checks() -> None:
    assert NetworkConfig.preset(suite="quick", device_type="cpu").duration_s == 1.0
    assert NetworkConfig.preset(suite="quick", device_type="cuda").streams == 4
    assert NetworkConfig.preset(suite="full", device_type="cuda").streams == 8
    with pytest.raises(ValueError, match="streams"):
        NetworkConfig(streams=0)
    with pytest.raises(ConfigError, match=r"network\.tool: input should be 'auto', 'iperf3'"):
        build_run_config(device_type="cpu", only=["network"], sets=["network.tool=netcat"])
    with pytest.raises(ValueError, match="unknown suite"):
        NetworkConfig.preset(suite="huge", device_type="cpu")


# --- verdicts ------------------------------------------------------------------------------


def _m(
    metric: str,
    value: float,
    *,
    host: str = "a",
    reference: Reference | None = None,
    **params: ParamValue,
) -> Measurement:
    unit = "us" if metric == "tcp_latency_us" else "Gb/s"
    return Measurement(
        benchmark="network",
        metric=metric,
        value=value,
        unit=unit,
        params=params,
        rank=0,
        host=host,
        device="cpu:0",
        reference=reference,
    )


def _results(*measurements: Measurement) -> Results:
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(
            id="r",
            started="2026-11-01T00:00:00Z",
            suite="quick",
            world_size=16,
            num_nodes=2,
            backend="nccl",
            command="clusterbench run",
        ),
        measurements=list(measurements),
    )


def _nic(host: str, nic: str, rate: float, state: str, kind: str = "infiniband") -> Measurement:
    link = "Ethernet" if kind == "ethernet" else "InfiniBand"
    return _m("nic_rate", rate, host=host, nic=nic, kind=kind, state=state, link_layer=link)


def _tcp(
    value: float, rate: float | None, *, loopback: bool = False, tool: str = "iperf3"
) -> Measurement:
    ref = Reference(value=rate, kind="link_rate", source="sysfs") if rate else None
    return _m(
        "tcp_throughput",
        value,
        reference=ref,
        src_host="a",
        dst_host="b",
        streams=4,
        tool=tool,
        loopback=loopback,
    )


def test_nic_state_rdma_down_warns_ethernet_down_is_info() -> None:
    results = _results(
        _nic("a", "mlx5_0/1", 400, "ACTIVE"),
        _nic("a", "mlx5_1/1", 400, "DOWN"),
        _nic("a", "eth1", 0, "down", kind="ethernet"),
        _nic("a", "eth0", 100, "up", kind="ethernet"),
    )
    found = {f.scope: f.severity for f in nic_state_findings(results)}
    assert found == {"host:a/mlx5_1/1": "warn", "host:a/eth1": "info"}


def test_tcp_below_80_percent_of_link_warns() -> None:
    slow = tcp_throughput_findings(_results(_tcp(70, 100)), min_efficiency=0.8)
    assert [f.id for f in slow] == ["network.low_tcp_throughput"]
    assert slow[0].evidence["efficiency"] == pytest.approx(0.7) and slow[0].severity == "warn"
    by_socket = tcp_throughput_findings(_results(_tcp(70, 100, tool="socket")), min_efficiency=0.8)
    assert [f.severity for f in by_socket] == ["info"] and "iperf3" in by_socket[0].fix
    assert not tcp_throughput_findings(_results(_tcp(85, 100)), min_efficiency=0.8)
    assert not tcp_throughput_findings(_results(_tcp(1, None)), min_efficiency=0.8)
    assert not tcp_throughput_findings(_results(_tcp(1, 100, loopback=True)), min_efficiency=0.8)


def test_rdma_below_80_percent_of_slower_port_warns() -> None:
    bw = _m("rdma_write_bw", 150, src_host="a", dst_host="b", nic="mlx5_0", peer_nic="mlx5_0")
    nics = [_nic("a", "mlx5_0/1", 400, "ACTIVE"), _nic("b", "mlx5_0/1", 200, "ACTIVE")]
    found = rdma_bandwidth_findings(_results(*nics, bw), min_efficiency=0.8)
    assert [f.evidence["link_rate_gbps"] for f in found] == [200]
    fast = bw.model_copy(update={"value": 190})
    assert not rdma_bandwidth_findings(_results(*nics, fast), min_efficiency=0.8)


def test_internode_capacity_only_for_models_above_7b() -> None:
    results = _results(
        _nic("a", "eth0", 100, "up", kind="ethernet"),
        _nic("b", "mlx5_0/1", 400, "ACTIVE"),
        _nic("b", "mlx5_1/1", 400, "ACTIVE"),
    )
    assert not internode_capacity_findings(results, model_params_b=7, min_gbps=400)
    found = internode_capacity_findings(results, model_params_b=70, min_gbps=400)
    assert [(f.scope, f.evidence["internode_gbps"]) for f in found] == [("host:a", 100)]


def test_network_findings_reads_the_thresholds() -> None:
    results = _results(_nic("a", "eth0", 100, "up", kind="ethernet"), _tcp(50, 100))
    ids = [f.id for f in findings(results, Thresholds())]
    assert ids == ["network.low_tcp_throughput"]
    big = Thresholds(given={"model_params_b": 70.0, "network_min_efficiency": 0.4})
    assert [f.id for f in findings(results, big)] == ["network.internode_too_slow"]


def test_socket_test_against_a_closed_port_raises() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(OSError):
            tools.socket_throughput("127.0.0.1", port=port, streams=2, duration_s=0.2)


def test_intra_inter_node_ratio_is_stated() -> None:
    from clusterbench.benchmarks.network.bandwidth_ratio import bandwidth_ratio_findings
    from clusterbench.schema import Measurement, Results, RunInfo, ToolInfo

    def m(bench: str, metric: str, value: float, **params: object) -> Measurement:
        return Measurement(
            benchmark=bench,
            metric=metric,
            value=value,
            unit="GB/s",
            params=params,
            rank=0,
            host="n0",
            device="cuda:0",
        )  # type: ignore[arg-type]

    run = RunInfo(
        id="r",
        started="t",
        suite="standard",
        world_size=16,
        num_nodes=2,
        backend="nccl",
        command="c",
    )
    ms = [
        m("collectives", "busbw", 340.0, op="all_reduce", size_bytes=2**33,
          group_kind="intra_node", mode="back_to_back"),
        m("collectives", "busbw", 100.0, op="all_reduce", size_bytes=2**20,
          group_kind="intra_node", mode="back_to_back"),  # smaller size: not used
        m("network", "tcp_throughput", 200.0, loopback=False),  # 25 GB/s
    ]  # fmt: skip
    results = Results(tool=ToolInfo(version="0"), run=run, measurements=ms)
    (finding,) = bandwidth_ratio_findings(results)
    assert finding.severity == "info" and finding.evidence["ratio"] == 13.6
    rail = m("collectives", "busbw", 40.0, op="all_reduce", size_bytes=2**33,
             group_kind="inter_node", mode="back_to_back")  # fmt: skip
    results.measurements.append(rail)
    (finding,) = bandwidth_ratio_findings(results)
    assert finding.evidence["ratio"] == 8.5 and "per rail" in finding.message
    results.measurements = ms[:2]
    assert bandwidth_ratio_findings(results) == []
