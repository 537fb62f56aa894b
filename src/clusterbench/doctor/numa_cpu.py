"""NUMA and CPU: worker affinity against the GPU's node, NUMA balancing, governor, threads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from clusterbench.doctor._sources import Check, Sources
from clusterbench.hardware.sysfs import numa_node_cpus, read_text
from clusterbench.schema import Finding, GpuInfo, Severity

__all__ = [
    "CHECKS",
    "check_affinity",
    "check_cores_per_gpu",
    "check_governor",
    "check_numa_balancing",
    "check_omp_threads",
    "format_cpulist",
]

MIN_CORES_PER_GPU = 4
"""Fewer physical cores per GPU leave too little for data loading and the Python loop."""
MANY_CORES_PER_GPU = 16
"""From here on OMP_NUM_THREADS=1 leaves most of a GPU's cores idle for CPU-side ops."""


def format_cpulist(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"`` (the kernel's cpulist format)."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def _affinity_finding(
    src: Sources, *, gpu: GpuInfo, local_rank: int, cpus: frozenset[int], nodes: dict[int, set[int]]
) -> Finding | None:
    node = gpu.numa_node
    assert node is not None
    if cpus <= nodes[node]:
        return None
    used = sorted(n for n, node_cpus in nodes.items() if cpus & node_cpus)
    where = "only on" if node not in used else "also on"
    return Finding(
        id="doctor.numa.affinity",
        severity="warn",
        scope=src.gpu_scope(gpu.index),
        message=f"rank {local_rank} may run {where} NUMA node(s) {used}; its GPU {gpu.index} "
        f"is on node {node}: host<->device copies and the data loader cross the socket",
        evidence={
            "local_rank": local_rank,
            "gpu_numa_node": node,
            "affinity": format_cpulist(cpus),
            "numa_nodes_used": used,
        },
        fix=f"bind each rank to its GPU's node: numactl --cpunodebind={node} --membind={node} "
        "(or torchrun --numa-binding=node on torch >= 2.9, srun --cpu-bind=ldoms)",
    )


def check_affinity(src: Sources) -> list[Finding]:
    """Each worker's CPU affinity against the NUMA node of its GPU (local rank = GPU index)."""
    if not src.rank_affinity:
        return []
    nodes = {n: set(cpus) for n, cpus in numa_node_cpus(src.root).items()}
    if len(nodes) < 2:
        return []
    gpus = {gpu.index: gpu for gpu in src.host.gpus}
    findings = []
    for local_rank, cpus in sorted(src.rank_affinity.items()):
        gpu = gpus.get(local_rank)
        if gpu is None or gpu.numa_node not in nodes:
            continue
        found = _affinity_finding(
            src, gpu=gpu, local_rank=local_rank, cpus=frozenset(cpus), nodes=nodes
        )
        if found is not None:
            findings.append(found)
    return findings


def check_numa_balancing(src: Sources) -> list[Finding]:
    """Automatic NUMA balancing migrates pages and threads under a running job."""
    value = read_text(src.root / "proc/sys/kernel/numa_balancing")
    if value is None or value == "0":
        return []
    if len(list((src.root / "sys/devices/system/node").glob("node[0-9]*"))) == 1:
        return []  # one NUMA node: nothing to migrate between
    return [
        Finding(
            id="doctor.numa.balancing",
            severity="warn",
            scope=src.scope,
            message="automatic NUMA balancing is on: the kernel migrates pages and threads of "
            "pinned workers, which adds latency jitter",
            evidence={"/proc/sys/kernel/numa_balancing": value},
            fix="sysctl -w kernel.numa_balancing=0",
        )
    ]


def check_governor(src: Sources) -> list[Finding]:
    """CPU frequency governors other than ``performance``."""
    cpu_dir = src.root / "sys/devices/system/cpu"
    governors = Counter(
        value
        for path in cpu_dir.glob("cpu[0-9]*/cpufreq/scaling_governor")
        if (value := read_text(path)) is not None
    )
    slow = {name: count for name, count in sorted(governors.items()) if name != "performance"}
    if not slow:
        return []
    text = ", ".join(f"{count} CPUs {name}" for name, count in slow.items())
    return [
        Finding(
            id="doctor.cpu.governor",
            severity="warn",
            scope=src.scope,
            message=f"CPU frequency governor is not 'performance' ({text}): kernel launches and "
            "the data loader run at lower clocks",
            evidence={"scaling_governor": dict(sorted(governors.items()))},
            fix="cpupower frequency-set -g performance (and a performance power profile in BIOS)",
        )
    ]


def _cores_per_gpu(src: Sources) -> int | None:
    cores = src.host.cpu.cores or src.host.cpu.threads
    if not src.host.gpus or not cores:
        return None
    return cores // len(src.host.gpus)


def check_cores_per_gpu(src: Sources) -> list[Finding]:
    """Too few physical cores per GPU for input work."""
    per_gpu = _cores_per_gpu(src)
    if per_gpu is None or per_gpu >= MIN_CORES_PER_GPU:
        return []
    return [
        Finding(
            id="doctor.cpu.cores_per_gpu",
            severity="warn",
            scope=src.scope,
            message=f"{per_gpu} CPU cores per GPU (< {MIN_CORES_PER_GPU}): data loading and "
            "augmentation are likely to starve the GPUs",
            evidence={"cores": src.host.cpu.cores, "gpus": len(src.host.gpus)},
            fix="use a node type with more cores per GPU, or move decoding to the GPU "
            "(e.g. NVIDIA DALI) and pre-process datasets offline",
        )
    ]


def check_omp_threads(src: Sources) -> list[Finding]:
    """OMP_NUM_THREADS=1 (torchrun's default) or unset with many cores per GPU."""
    per_gpu = _cores_per_gpu(src)
    omp = src.env.get("OMP_NUM_THREADS")
    if per_gpu is None or per_gpu < MANY_CORES_PER_GPU or omp not in (None, "1"):
        return []
    severity: Severity
    if omp == "1":
        severity, why = "warn", "CPU-side ops of each rank use 1 of its cores"
    else:
        severity, why = "info", "each rank's OpenMP pool takes every core of the node"
    return [
        Finding(
            id="doctor.cpu.omp_threads",
            severity=severity,
            scope=src.scope,
            message=f"OMP_NUM_THREADS is {omp or 'unset'} with {per_gpu} cores per GPU: {why}",
            evidence={"OMP_NUM_THREADS": omp, "cores_per_gpu": per_gpu},
            fix=f"export OMP_NUM_THREADS={max(1, per_gpu // 2)} (about half the cores per GPU, "
            "leaving the rest to data loader workers)",
        )
    ]


CHECKS: tuple[Check, ...] = (
    check_affinity,
    check_numa_balancing,
    check_governor,
    check_cores_per_gpu,
    check_omp_threads,
)
