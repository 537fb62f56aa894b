"""NVLink and P2P: inactive links against the SKU, peer access missing where it should work.

Inactive links are a warning (a failure when none is up) only where there is a second GPU to
reach over them; with one visible GPU they are information.
"""

from __future__ import annotations

from clusterbench.doctor._sources import Check, Sources
from clusterbench.schema import Finding, GpuInfo

__all__ = ["CHECKS", "EXPECTED_NVLINKS", "check_nvlinks", "check_p2p"]

EXPECTED_NVLINKS: dict[str, int] = {
    "A100 SXM 80GB": 12,  # NVIDIA A100 datasheet: 12 third-generation NVLinks
    "H100 SXM": 18,  # NVIDIA H100 datasheet: 18 fourth-generation NVLinks
    "H200 SXM": 18,  # NVIDIA H200 datasheet: 18 fourth-generation NVLinks
    "B200": 18,  # NVIDIA Blackwell datasheet: 18 fifth-generation NVLinks
}
"""Links per GPU by the spec table's SKU name."""


def _nvlink_finding(src: Sources, gpu: GpuInfo, expected: int) -> Finding | None:
    active = gpu.nvlink_active
    if active is None or active >= expected:
        return None
    sku = gpu.spec.sku if gpu.spec else ""
    if len(src.host.gpus) == 1:
        # e.g. one GPU of an HGX board passed through to a VM: its links lead to GPUs this
        # machine cannot see, so no traffic of this machine would cross them
        return Finding(
            id="doctor.nvlink.inactive",
            severity="info",
            scope=src.gpu_scope(gpu.index),
            message=f"{expected - active} of {expected} NVLinks inactive ({active}/{expected} "
            f"active on this {sku}); with one visible GPU no GPU-to-GPU traffic crosses them, "
            "so this costs nothing here",
            evidence={"active": active, "expected": expected, "name": gpu.name, "visible_gpus": 1},
            fix="nothing to do on this machine; where its GPUs are meant to be linked (several "
            f"GPUs of one board), check nvidia-smi nvlink --status -i {gpu.index}",
        )
    none_up = active == 0
    what = (
        "no NVLink is active: GPU-to-GPU traffic falls back to PCIe"
        if none_up
        else (f"{expected - active} of {expected} NVLinks inactive: GPU-to-GPU bandwidth is cut")
    )
    return Finding(
        id="doctor.nvlink.inactive",
        severity="fail" if none_up else "warn",
        scope=src.gpu_scope(gpu.index),
        message=f"{what} ({active}/{expected} active on this {sku})",
        evidence={"active": active, "expected": expected, "name": gpu.name},
        fix=f"nvidia-smi nvlink --status -i {gpu.index}; check the fabric manager "
        "(systemctl status nvidia-fabricmanager) and nvidia-smi -q -d ECC; a link that stays "
        "down needs the vendor",
    )


def check_nvlinks(src: Sources) -> list[Finding]:
    """Active NVLinks of each GPU against what its SKU has."""
    findings = []
    for gpu in src.host.gpus:
        expected = EXPECTED_NVLINKS.get(gpu.spec.sku) if gpu.spec else None
        found = _nvlink_finding(src, gpu, expected) if expected else None
        if found is not None:
            findings.append(found)
    return findings


def _should_have_p2p(label: str) -> bool:
    return (label.startswith("NV") and label[2:].isdigit()) or label in ("PIX", "PXB")


def check_p2p(src: Sources) -> list[Finding]:
    """GPU pairs joined by NVLink or one PCIe switch where peer access is impossible."""
    topo = src.host.topology
    if not topo.p2p or len(topo.matrix) != len(topo.devices):
        return []
    broken = [
        {"pair": [topo.devices[i], topo.devices[j]], "link": topo.matrix[i][j]}
        for i in range(len(topo.devices))
        for j in range(i + 1, len(topo.devices))
        if _should_have_p2p(topo.matrix[i][j]) and not topo.p2p[i][j]
    ]
    if not broken:
        return []
    pairs = ", ".join(f"{b['pair'][0]}-{b['pair'][1]} ({b['link']})" for b in broken)
    return [
        Finding(
            id="doctor.p2p.unavailable",
            severity="fail",
            scope=src.scope,
            message=f"peer-to-peer access impossible between GPUs that are directly connected: "
            f"{pairs}; NCCL then copies through host memory",
            evidence={"pairs": broken},
            fix="nvidia-smi topo -p2p r; enable IOMMU passthrough (iommu=pt) or disable ACS; in a "
            "VM, enable P2P in the hypervisor; check the fabric manager on NVSwitch systems",
        )
    ]


CHECKS: tuple[Check, ...] = (check_nvlinks, check_p2p)
