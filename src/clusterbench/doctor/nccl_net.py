"""NCCL settings and the network under it: disabled transports, interface selection, debug
logging, forced algorithms, InfiniBand/EFA readiness and port state."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from clusterbench.doctor._sources import Check, Sources
from clusterbench.hardware.sysfs import RDMA_KINDS, read_int, read_text
from clusterbench.schema import Finding

__all__ = [
    "CHECKS",
    "check_algo_proto",
    "check_debug",
    "check_disabled_transports",
    "check_efa_plugin",
    "check_gdr_module",
    "check_ib_verbs",
    "check_rdma_ports",
    "check_socket_ifname",
    "select_interfaces",
]

_DISABLES = {
    "NCCL_P2P_DISABLE": "GPU peer-to-peer (NVLink/PCIe) transport",
    "NCCL_SHM_DISABLE": "shared-memory transport",
    "NCCL_IB_DISABLE": "InfiniBand/RoCE transport (falls back to TCP sockets)",
}
_ARPHRD_LOOPBACK = 772  # linux/if_arp.h
_IB_KINDS = ("infiniband", "roce")
_PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
_PLUGIN_DIRS = (
    "opt/amazon/ofi-nccl/lib",
    "opt/aws-ofi-nccl/lib",
    "usr/local/lib",
    "usr/lib",
    "usr/lib64",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
)


def check_disabled_transports(src: Sources) -> list[Finding]:
    """NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_IB_DISABLE set: a fast path switched off."""
    return [
        Finding(
            id=f"doctor.nccl.{name.lower().removeprefix('nccl_')}",
            severity="warn",
            scope=src.scope,
            message=f"{name}={src.env[name]} switches off NCCL's {what}",
            evidence={name: src.env[name]},
            fix=f"unset {name} (left over from debugging?)",
        )
        for name, what in _DISABLES.items()
        if src.env.get(name, "0").strip() not in ("", "0")
    ]


def select_interfaces(spec: str, available: Sequence[str]) -> list[str]:
    """The interfaces NCCL_SOCKET_IFNAME selects, by NCCL's rules: a comma list of name
    prefixes; a leading ``^`` excludes them; then a leading ``=`` makes them exact names."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.removeprefix("^")
    exact = spec.startswith("=")
    spec = spec.removeprefix("=")
    names = [item.split(":")[0].strip() for item in spec.split(",") if item.strip()]

    def matches(iface: str) -> bool:
        return any(iface == n if exact else iface.startswith(n) for n in names)

    return [iface for iface in available if matches(iface) != exclude]


def _is_loopback(net: Path, iface: str) -> bool:
    return iface == "lo" or read_int(net / iface / "type") == _ARPHRD_LOOPBACK


def check_socket_ifname(src: Sources) -> list[Finding]:
    """NCCL_SOCKET_IFNAME that selects no interface, or only loopback."""
    spec = src.env.get("NCCL_SOCKET_IFNAME")
    net = src.root / "sys/class/net"
    if not spec or not net.is_dir():
        return []
    available = sorted(p.name for p in net.iterdir())
    chosen = select_interfaces(spec, available)
    if chosen and not all(_is_loopback(net, iface) for iface in chosen):
        return []
    what = "selects no interface of this host" if not chosen else "selects only loopback"
    others = [i for i in available if not _is_loopback(net, i)]
    return [
        Finding(
            id="doctor.nccl.socket_ifname",
            severity="fail",
            scope=src.scope,
            message=f"NCCL_SOCKET_IFNAME={spec} {what}: NCCL cannot reach other nodes "
            "(bootstrap and socket transport fail or hang)",
            evidence={"NCCL_SOCKET_IFNAME": spec, "selected": chosen, "interfaces": available},
            fix="set NCCL_SOCKET_IFNAME to this host's data interface "
            f"({', '.join(others) or '?'}) or unset it",
        )
    ]


def check_debug(src: Sources) -> list[Finding]:
    """NCCL_DEBUG=INFO/TRACE left on: slower start, very large logs."""
    level = src.env.get("NCCL_DEBUG", "").strip().upper()
    if level not in ("INFO", "TRACE"):
        return []
    return [
        Finding(
            id="doctor.nccl.debug",
            severity="info",
            scope=src.scope,
            message=f"NCCL_DEBUG={level} is set: every rank logs at start and per communicator "
            "(slower start, large logs)",
            evidence={"NCCL_DEBUG": src.env["NCCL_DEBUG"]},
            fix="unset NCCL_DEBUG (or NCCL_DEBUG=WARN); use 'clusterbench run --nccl-debug' "
            "when the log is wanted",
        )
    ]


def check_algo_proto(src: Sources) -> list[Finding]:
    """NCCL_ALGO / NCCL_PROTO forced: NCCL's tuner cannot pick the best per size."""
    return [
        Finding(
            id=f"doctor.nccl.{name.lower().removeprefix('nccl_')}_forced",
            severity="warn",
            scope=src.scope,
            message=f"{name}={src.env[name]} forces NCCL's choice for every message size",
            evidence={name: src.env[name]},
            fix=f"unset {name} unless a measured sweep shows it helps at your sizes",
        )
        for name in ("NCCL_ALGO", "NCCL_PROTO")
        if src.env.get(name, "").strip()
    ]


def _has_ib(src: Sources) -> bool:
    return any(nic.kind in _IB_KINDS for nic in src.host.nics)


def check_ib_verbs(src: Sources) -> list[Finding]:
    """InfiniBand/RoCE present but /dev/infiniband/uverbs* missing or not accessible."""
    if not _has_ib(src):
        return []
    uverbs = sorted((src.root / "dev/infiniband").glob("uverbs*"))
    usable = [p for p in uverbs if os.access(p, os.R_OK | os.W_OK)]
    if usable:
        return []
    what = "no /dev/infiniband/uverbs*" if not uverbs else "uverbs devices not accessible"
    return [
        Finding(
            id="doctor.net.ib_verbs",
            severity="fail",
            scope=src.scope,
            message=f"InfiniBand/RoCE NICs present but {what}: NCCL falls back to TCP sockets",
            evidence={"uverbs": [p.name for p in uverbs], "accessible": [p.name for p in usable]},
            fix="modprobe ib_uverbs; in a container pass --device=/dev/infiniband (and "
            "--cap-add=IPC_LOCK, ulimit -l unlimited)",
        )
    ]


def _module_loaded(root: Path, names: Sequence[str]) -> str | None:
    lines = (read_text(root / "proc/modules") or "").splitlines()
    loaded = {line.split(" ", 1)[0] for line in lines}
    for name in names:
        if name in loaded or (root / "sys/module" / name).is_dir():
            return name
    return None


def check_gdr_module(src: Sources) -> list[Finding]:
    """InfiniBand with NVIDIA GPUs but no GPUDirect RDMA kernel module (nvidia_peermem)."""
    nvidia = any(g.name.upper().startswith("NVIDIA") for g in src.host.gpus)
    if not (_has_ib(src) and nvidia) or _module_loaded(src.root, _PEERMEM_MODULES):
        return []
    return [
        Finding(
            id="doctor.net.gpudirect_rdma",
            severity="warn",
            scope=src.scope,
            message="nvidia_peermem is not loaded: without DMA-BUF support NCCL stages "
            "inter-node traffic through host memory (no GPUDirect RDMA)",
            evidence={"modules_checked": list(_PEERMEM_MODULES)},
            fix="modprobe nvidia_peermem (or rely on DMA-BUF: kernel >= 5.12, open GPU kernel "
            "modules, NCCL >= 2.19); confirm with NCCL_DEBUG=INFO ('GPU Direct RDMA Enabled')",
        )
    ]


def _plugin_dirs(src: Sources) -> list[Path]:
    extra = [d for d in src.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    return [src.root / d.lstrip("/") for d in (*extra, *_PLUGIN_DIRS)]


def check_efa_plugin(src: Sources) -> list[Finding]:
    """EFA present without the aws-ofi-nccl plugin (NCCL then uses TCP sockets)."""
    if not any(nic.kind == "efa" for nic in src.host.nics):
        return []
    plugins = sorted(str(p) for d in _plugin_dirs(src) for p in d.glob("libnccl-net*.so*"))
    provider = src.env.get("FI_PROVIDER")
    problems = []
    if not plugins:
        problems.append("no aws-ofi-nccl plugin (libnccl-net*.so) found")
    if provider and provider != "efa":
        problems.append(f"FI_PROVIDER={provider} (not efa)")
    if not problems:
        return []
    return [
        Finding(
            id="doctor.net.efa_plugin",
            severity="warn",
            scope=src.scope,
            message=f"EFA present but {' and '.join(problems)}: NCCL falls back to TCP sockets",
            evidence={"plugins": plugins, "FI_PROVIDER": provider},
            fix="install aws-ofi-nccl (in the EFA installer / AWS DL AMIs), put its lib on "
            "LD_LIBRARY_PATH, export FI_PROVIDER=efa",
        )
    ]


def check_rdma_ports(src: Sources) -> list[Finding]:
    """RDMA ports not ACTIVE, or slower than the fastest port of the same kind."""
    rdma = [n for n in src.host.nics if n.kind in RDMA_KINDS]
    top = {k: max((n.rate_gbps or 0 for n in rdma if n.kind == k), default=0) for k in _IB_KINDS}
    findings = []
    for nic in rdma:
        label = f"{nic.name} port {nic.port}" if nic.port is not None else nic.name
        best = top.get(nic.kind, 0)
        if nic.state and nic.state.upper() != "ACTIVE":
            what = f"{label} is {nic.state}"
        elif nic.rate_gbps and best and nic.rate_gbps < best:
            what = f"{label} runs at {nic.rate_gbps:g} Gb/s, below its peers' {best:g} Gb/s"
        else:
            continue
        findings.append(
            Finding(
                id="doctor.net.rdma_port",
                severity="warn",
                scope=f"{src.scope}/nic:{nic.name}",
                message=what,
                evidence=nic.model_dump(),
                fix=f"ibstat {nic.name}; check the cable, the switch port and the subnet manager",
            )
        )
    return findings


CHECKS: tuple[Check, ...] = (
    check_disabled_transports,
    check_socket_ifname,
    check_debug,
    check_algo_proto,
    check_ib_verbs,
    check_gdr_module,
    check_efa_plugin,
    check_rdma_ports,
)
