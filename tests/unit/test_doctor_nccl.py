"""Doctor's NCCL and network checks against env mappings and fake /sys, /proc and /dev trees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterbench.doctor import Sources, nccl_net
from clusterbench.schema import GpuInfo, HostInfo, NicInfo

IB = NicInfo(name="mlx5_0", kind="infiniband", state="ACTIVE", rate_gbps=400.0, port=1)


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content + "\n", encoding="utf-8")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _write(tmp_path / "sys/class/net/eth0/type", "1")
    _write(tmp_path / "sys/class/net/lo/type", "772")
    return tmp_path


def _src(root: Path, env: dict[str, str] | None = None, nics: tuple[NicInfo, ...] = ()) -> Sources:
    gpus = [GpuInfo(index=0, name="NVIDIA H200")]
    return Sources(
        host=HostInfo(hostname="n0", gpus=gpus, nics=list(nics)), env=env or {}, root=root
    )


def _ids(found: list[Any]) -> list[str]:
    return [f.id for f in found]


def test_nccl_p2p_disable_is_named() -> None:
    found = nccl_net.check_disabled_transports(
        _src(Path("/"), {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "0"})
    )
    assert _ids(found) == ["doctor.nccl.p2p_disable"]
    assert (
        found[0].severity == "warn"
        and found[0].fix == "unset NCCL_P2P_DISABLE (left over from debugging?)"
    )
    assert found[0].evidence == {"NCCL_P2P_DISABLE": "1"}


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        ("eth", ["eth0", "eth10"]),
        ("=eth1", []),
        ("=eth10", ["eth10"]),
        ("^docker,lo", ["eth0", "eth10", "ib0"]),
        ("^=eth0", ["docker0", "eth10", "ib0", "lo"]),
        ("ib0:1234,eth0", ["eth0", "ib0"]),
    ],
)
def test_select_interfaces_follows_nccl_syntax(spec: str, chosen: list[str]) -> None:
    available = ["docker0", "eth0", "eth10", "ib0", "lo"]
    assert nccl_net.select_interfaces(spec, available) == chosen


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ("nosuch0", "selects no interface"),
        ("lo", "selects only loopback"),
        ("^eth", "only loopback"),
    ],
)
def test_socket_ifname_missing_or_loopback_fails(root: Path, spec: str, text: str) -> None:
    [found] = nccl_net.check_socket_ifname(_src(root, {"NCCL_SOCKET_IFNAME": spec}))
    assert (found.id, found.severity) == ("doctor.nccl.socket_ifname", "fail")
    assert text in found.message and "(eth0)" in found.fix
    assert found.evidence["interfaces"] == ["eth0", "lo"]


def test_socket_ifname_that_matches_is_quiet(root: Path) -> None:
    assert nccl_net.check_socket_ifname(_src(root, {"NCCL_SOCKET_IFNAME": "eth"})) == []
    assert nccl_net.check_socket_ifname(_src(root)) == []


def test_debug_and_forced_algorithms(root: Path) -> None:
    env = {"NCCL_DEBUG": "info", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert [(f.id, f.severity) for f in nccl_net.check_debug(_src(root, env))] == [
        ("doctor.nccl.debug", "info")
    ]
    assert _ids(nccl_net.check_algo_proto(_src(root, env))) == [
        "doctor.nccl.algo_forced",
        "doctor.nccl.proto_forced",
    ]
    assert nccl_net.check_debug(_src(root, {"NCCL_DEBUG": "WARN"})) == []


def test_ib_present_without_uverbs_fails(root: Path) -> None:
    [found] = nccl_net.check_ib_verbs(_src(root, nics=(IB,)))
    assert (found.id, found.severity) == ("doctor.net.ib_verbs", "fail")
    assert "--device=/dev/infiniband" in found.fix
    _write(root / "dev/infiniband/uverbs0", "")
    assert nccl_net.check_ib_verbs(_src(root, nics=(IB,))) == []
    assert nccl_net.check_ib_verbs(_src(root)) == []  # no IB: nothing to say


def test_gpudirect_rdma_module(root: Path) -> None:
    [found] = nccl_net.check_gdr_module(_src(root, nics=(IB,)))
    assert (found.id, found.severity) == ("doctor.net.gpudirect_rdma", "warn")
    _write(root / "proc/modules", "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)")
    assert nccl_net.check_gdr_module(_src(root, nics=(IB,))) == []


def test_efa_without_the_ofi_plugin(root: Path) -> None:
    efa = NicInfo(name="rdmap16s27", kind="efa", state="ACTIVE", rate_gbps=100.0, port=1)
    [found] = nccl_net.check_efa_plugin(_src(root, {"FI_PROVIDER": "tcp"}, nics=(efa,)))
    assert "no aws-ofi-nccl plugin" in found.message and "FI_PROVIDER=tcp" in found.message
    _write(root / "opt/amazon/ofi-nccl/lib/libnccl-net.so", "")
    assert nccl_net.check_efa_plugin(_src(root, {"FI_PROVIDER": "efa"}, nics=(efa,))) == []


def test_rdma_port_down_or_slow(root: Path) -> None:
    down = IB.model_copy(update={"name": "mlx5_1", "state": "DOWN"})
    slow = IB.model_copy(update={"name": "mlx5_2", "rate_gbps": 200.0})
    found = nccl_net.check_rdma_ports(_src(root, nics=(IB, down, slow)))
    assert [(f.scope, f.severity) for f in found] == [
        ("host:n0/nic:mlx5_1", "warn"),
        ("host:n0/nic:mlx5_2", "warn"),
    ]
    assert "DOWN" in found[0].message and "200 Gb/s" in found[1].message
