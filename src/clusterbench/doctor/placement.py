"""Placement: where each rank of the run sits — node, GPU, NUMA node, CPUs, nearest NIC and
NVLink domain — recorded as one info finding per node for
:mod:`clusterbench.analyses.placement.placements`.

The check only states facts; the verdicts over the whole run (rank order across nodes, TP/PP
groups that cross a node or an NVLink domain, NICs on another NUMA node) need every node's
facts and live in the analysis.  Whether a rank's affinity fits its GPU's NUMA node is
:func:`clusterbench.doctor.numa_cpu.check_affinity`'s verdict, not repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.doctor._sources import Check, Sources
from clusterbench.doctor.numa_cpu import format_cpulist
from clusterbench.doctor.pcie import nearest_nic
from clusterbench.hardware.sysfs import numa_node_cpus
from clusterbench.schema import Finding, GpuInfo, Topology

__all__ = [
    "CHECKS",
    "FINDING_ID",
    "check_placement",
    "launcher_kind",
    "nvlink_domains",
    "placement_rows",
]

FINDING_ID = "doctor.placement"


def launcher_kind(
    env: Mapping[str, str], *, run_id: str = "", given: str | None = None
) -> str | None:
    """What started this rank: ``clusterbench`` (its own launch), ray, torchrun, slurm, mpi;
    None.

    ``given``: the run spec's launcher, where the environment cannot tell: ``clusterbench.ray``
    runs its ranks with ``--launcher ray``, since Ray Train sets the same variables torchrun
    does.

    clusterbench's own launch is ``given`` too (it sets no TORCHELASTIC_RUN_ID; a run whose
    workers torch's elastic agent started had the run's id there).  torchrun's agent sets
    TORCHELASTIC_RUN_ID; it comes first: torchrun started by srun also sees srun's variables.
    Read before RANK, which a joined rank sets itself under srun and mpirun
    (``runtime.launch.export_dist_env``).
    """
    if given:
        return given
    elastic = env.get("TORCHELASTIC_RUN_ID")
    if elastic:
        return "clusterbench" if run_id and elastic == run_id else "torchrun"
    if "OMPI_COMM_WORLD_RANK" in env:
        return "mpi"
    if "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env:
        return "slurm"
    return "torchrun" if "RANK" in env and "WORLD_SIZE" in env else None


def nvlink_domains(topology: Topology) -> dict[int, tuple[int, ...]]:
    """GPU index -> the GPUs of its NVLink domain: those it reaches over NVLink, directly or
    through others (``NV<n>`` cells of the matrix; through an NVSwitch every GPU of the host).
    GPUs without any NVLink are left out."""
    linked: dict[int, set[int]] = {}
    for i, row in enumerate(topology.matrix):
        for j, cell in enumerate(row):
            if i != j and cell.startswith("NV"):
                linked.setdefault(i, set()).add(j)
                linked.setdefault(j, set()).add(i)
    domains: dict[int, tuple[int, ...]] = {}
    for start in sorted(linked):
        if start in domains:
            continue
        seen, todo = {start}, [start]
        while todo:
            for peer in linked[todo.pop()] - seen:
                seen.add(peer)
                todo.append(peer)
        domain = tuple(sorted(seen))
        domains.update(dict.fromkeys(domain, domain))
    return domains


def _gpu_facts(
    src: Sources, gpu: GpuInfo | None, domains: dict[int, tuple[int, ...]]
) -> dict[str, Any]:
    if gpu is None:
        return {"gpu_pci_bus_id": None, "gpu_numa_node": None, "nic": None,
                "nic_numa_node": None, "nic_distance": None, "nvlink_domain": None}  # fmt: skip
    nic = nearest_nic(src, gpu)
    domain = domains.get(gpu.index)
    return {
        "gpu_pci_bus_id": gpu.pci_bus_id,
        "gpu_numa_node": gpu.numa_node,
        "nic": nic[0].name if nic else None,
        "nic_numa_node": nic[0].numa_node if nic else None,
        "nic_distance": nic[1] if nic else None,
        "nvlink_domain": list(domain) if domain else None,
    }


def placement_rows(src: Sources) -> list[dict[str, Any]]:
    """One row of facts per rank of this node, by global rank (JSON-ready)."""
    nodes = numa_node_cpus(src.root)
    gpus = {gpu.index: gpu for gpu in src.host.gpus}
    domains = nvlink_domains(src.host.topology)
    rows = []
    for slot in sorted(src.ranks, key=lambda s: s.rank):
        gpu = gpus.get(slot.gpu) if slot.gpu is not None else None
        rows.append(
            {
                "rank": slot.rank,
                "local_rank": slot.local_rank,
                "node": slot.node,
                "host": src.host.hostname,
                "gpu": slot.gpu,
                **_gpu_facts(src, gpu, domains),
                "cpus": format_cpulist(slot.cpus),
                "cpu_numa_nodes": sorted(n for n, cpus in nodes.items() if slot.cpus & set(cpus)),
            }
        )
    return rows


def _numbers(values: Sequence[object]) -> str:
    known = sorted({v for v in values if isinstance(v, int)})
    return format_cpulist(known) if known else "unknown"


def _message(src: Sources, rows: list[dict[str, Any]]) -> str:
    node = rows[0]["node"]
    ranks = format_cpulist(r["rank"] for r in rows)
    head = f"node {node}: ranks {ranks}" + (f" ({src.launcher})" if src.launcher else "")
    cpu_nodes = _numbers([n for r in rows for n in r["cpu_numa_nodes"]])
    cpus = f"CPU affinity on NUMA node(s) {cpu_nodes}"
    gpus = [r for r in rows if r["gpu"] is not None]
    if not gpus:
        return f"{head}; CPU ranks; {cpus}"
    where = f"GPUs {_numbers([r['gpu'] for r in gpus])} on NUMA node(s) "
    where += _numbers([r["gpu_numa_node"] for r in gpus])
    sizes = sorted({len(r["nvlink_domain"]) for r in gpus if r["nvlink_domain"]})
    nvlink = f"NVLink domains of {', '.join(map(str, sizes))} GPU(s)" if sizes else "no NVLink"
    return f"{head}; {where}; {nvlink}; {cpus}"


def check_placement(src: Sources) -> list[Finding]:
    """The placement facts of this node's ranks (info); nothing outside a run."""
    if not src.ranks:
        return []
    rows = placement_rows(src)
    return [
        Finding(
            id=FINDING_ID,
            severity="info",
            scope=src.scope,
            message=_message(src, rows),
            evidence={"launcher": src.launcher, "ranks": rows},
        )
    ]


CHECKS: tuple[Check, ...] = (check_placement,)
