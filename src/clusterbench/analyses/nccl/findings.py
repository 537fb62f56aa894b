"""Findings from NCCL's own log (``--nccl-debug``): how data actually moved between GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterbench.schema import Finding, NcclRankInfo, Results

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["nccl_findings"]

_FAST_LOCAL = ("P2P", "NVLS")


def nccl_findings(results: Results, run: RunView) -> list[Finding]:
    """Per rank: the transports NCCL chose (info); intra-node traffic off P2P/NVLink -> warn."""
    gpus_per_host = {h.hostname: len(h.gpus) for h in results.hosts}
    out: list[Finding] = []
    for info in results.nccl:
        out.append(_transport_info(info))
        if gpus_per_host.get(info.host, 0) >= 2 and _local_without_p2p(info):
            out.append(_no_p2p(info))
    return out


def _describe(info: NcclRankInfo) -> str:
    parts = [f"{t} on {n} channel(s)" for t, n in sorted(info.transports.items())]
    return ", ".join(parts) or "no transport lines"


def _transport_info(info: NcclRankInfo) -> Finding:
    algos = "; ".join(f"{op}: {', '.join(v)}" for op, v in info.algorithms.items())
    return Finding(
        id="nccl.transport",
        severity="info",
        scope=f"host:{info.host}/rank:{info.rank}",
        message=f"NCCL moved data via {_describe(info)}"
        + (f"; network {', '.join(info.networks)}" if info.networks else "")
        + (f"; algorithm/protocol {algos}" if algos else "")
        + ".",
        evidence=info.model_dump(),
        fix="",
    )


def _local_without_p2p(info: NcclRankInfo) -> bool:
    used = set(info.transports)
    return (
        bool(used)
        and not any(t in used for t in _FAST_LOCAL)
        and ("SHM" in used or any(t.startswith("NET/") for t in used))
    )


def _no_p2p(info: NcclRankInfo) -> Finding:
    return Finding(
        id="nccl.no_p2p",
        severity="warn",
        scope=f"host:{info.host}/rank:{info.rank}",
        message=(
            f"NCCL sends this node's GPU-to-GPU traffic via {_describe(info)}, not P2P over "
            "NVLink/PCIe: collectives run at a fraction of the link rate."
        ),
        evidence={"transports": info.transports, "log": info.log},
        fix=(
            "Unset NCCL_P2P_DISABLE and NCCL_SHM_DISABLE (and NCCL_P2P_LEVEL if set too low); "
            "check `nvidia-smi topo -m` shows NV# or PIX between the GPUs and that the "
            "container/VM exposes peer access (IOMMU/ACS settings)."
        ),
    )
