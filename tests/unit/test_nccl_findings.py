from __future__ import annotations

from clusterbench.analyses.nccl.findings import nccl_findings
from clusterbench.schema import GpuInfo, HostInfo, NcclRankInfo, Results, RunInfo, ToolInfo
from tests.pages import analysed


def _results(transports: dict[str, int], num_gpus: int = 2) -> Results:
    return Results(
        tool=ToolInfo(version="0"),
        run=RunInfo(id="r", started="t", suite="quick", world_size=2, num_nodes=1,
                    backend="nccl", command="c"),
        hosts=[HostInfo(hostname="h", gpus=[GpuInfo(index=i, name="NVIDIA H200")
                                            for i in range(num_gpus)])],
        nccl=[NcclRankInfo(rank=0, host="h", transports=transports, networks=["Socket"],
                           algorithms={"AllReduce": ["RING/SIMPLE"]}, log="nccl/rank-00000.log")],
    )  # fmt: skip


def test_p2p_is_only_reported() -> None:
    findings = nccl_findings(_results({"P2P": 24}), analysed(_results({"P2P": 24})))
    assert [f.id for f in findings] == ["nccl.transport"]
    assert "P2P on 24 channel(s)" in findings[0].message
    assert "AllReduce: RING/SIMPLE" in findings[0].message


def test_sockets_or_shm_between_local_gpus_warn() -> None:
    for transports in ({"NET/Socket": 4}, {"SHM": 2}):
        findings = nccl_findings(_results(transports), analysed(_results(transports)))
        warn = [f for f in findings if f.severity == "warn"]
        assert [f.id for f in warn] == ["nccl.no_p2p"]
        assert "NCCL_P2P_DISABLE" in warn[0].fix


def test_single_gpu_host_is_not_warned() -> None:
    findings = nccl_findings(
        _results({"NET/IB": 4}, num_gpus=1), analysed(_results({"NET/IB": 4}, num_gpus=1))
    )
    assert [(f.id, f.severity) for f in findings] == [("nccl.transport", "info")]
