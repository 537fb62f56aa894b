"""The launcher flags that fix a placement: rank order node by node, each rank on its GPU's
NUMA node.  Pure text from the run's facts; the rules and their sources are in
docs/reference.md ("Placement").

- torchrun numbers ranks node by node (``RANK = node rank x nproc-per-node + local rank``) and,
  from torch 2.9, binds local rank i to the CPUs of GPU i's NUMA node with
  ``--numa-binding=node`` (torch docs, "NUMA Binding"; pytorch/pytorch#149334).
- srun: ``--distribution=block`` puts consecutive tasks on one node; ``--cpu-bind=map_ldom:L``
  binds the node's task i to NUMA node ``L[i]`` (whole nodes only: ``--exclusive``); srun(1).
  ``--gpu-bind=closest`` is left out: it narrows each task's visible GPUs, and clusterbench
  takes GPU ``LOCAL_RANK`` of all the node's GPUs.
- Open MPI: ``--map-by ppr:N:node:PE=K`` maps N ranks per node on K cores each, in core order;
  ``--rank-by slot`` numbers them node by node; ``--bind-to core`` binds each to its K cores
  (mpirun(1), Open MPI 4.1).  Local rank i then runs on cores i*K..i*K+K-1, which lie on GPU
  i's NUMA node only where the GPUs' NUMA nodes rise with their index as the cores' do.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterbench.schema import HostInfo

__all__ = [
    "LAUNCHER_NAMES",
    "TORCH_NUMA_BINDING",
    "binding_fix",
    "block_order_fix",
    "mpi_map_follows_gpus",
]

TORCH_NUMA_BINDING = "2.9"
"""The first torch release whose torchrun has ``--numa-binding`` (docs/reference.md)."""
LAUNCHER_NAMES = ("torchrun", "slurm", "mpi")


def _torchrun_binding() -> str:
    return (
        f"torchrun --numa-binding=node (torch >= {TORCH_NUMA_BINDING}): local rank i runs on "
        "the CPUs of GPU i's NUMA node"
    )


def _slurm_binding(gpu_numa: Sequence[int | None]) -> str:
    if gpu_numa and all(n is not None for n in gpu_numa):
        ldoms = ",".join(str(n) for n in gpu_numa)
        bind = (
            f"--cpu-bind=map_ldom:{ldoms} (a node's task i on the i-th NUMA node of the list: "
            "its GPU's; whole nodes only: sbatch --exclusive)"
        )
    else:
        bind = "--cpu-bind=ldoms (each task on one NUMA node; the GPUs' nodes are unknown here)"
    return f"srun --distribution=block {bind}"


def mpi_map_follows_gpus(gpu_numa: Sequence[int | None], numa_nodes: Sequence[int]) -> bool:
    """Whether ``ppr:N:node:PE=K`` with K = cores / N puts local rank i on GPU i's NUMA node:
    rank i's cores lie on the ``floor(i * nodes / N)``-th NUMA node in core order."""
    nodes = sorted(numa_nodes)
    num = len(gpu_numa)
    if not nodes or not num:
        return False
    return all(n == nodes[i * len(nodes) // num] for i, n in enumerate(gpu_numa))


def _mpi_binding(gpu_numa: Sequence[int | None], host: HostInfo | None) -> str:
    num = len(gpu_numa) or "N"
    cores = host.cpu.cores if host is not None else None
    pe = cores // num if isinstance(num, int) and cores else "K"
    flags = f"mpirun --map-by ppr:{num}:node:PE={pe} --bind-to core --rank-by slot"
    numa = [int(n) for n in (host.cpu.numa_nodes if host is not None else {})]
    if not gpu_numa or any(n is None for n in gpu_numa) or len(numa) < 2:
        return f"{flags} (local rank i on cores i*{pe}.., in core order)"
    if mpi_map_follows_gpus(gpu_numa, numa):
        return f"{flags} (local rank i on cores i*{pe}..: GPU i's NUMA node here)"
    order = ",".join(str(n) for n in gpu_numa)
    return (
        f"mpirun --rankfile with rank i on the CPUs of its GPU's NUMA node (GPUs' nodes in "
        f"local-rank order: {order}; {flags} would follow core order instead)"
    )


def binding_fix(
    launcher: str | None, *, gpu_numa: Sequence[int | None], host: HostInfo | None
) -> str:
    """The flags that bind each rank to its GPU's NUMA node, for ``launcher`` (all three when
    it is unknown or clusterbench's own launch, which binds nothing).  ``gpu_numa``: the NUMA
    node of each local rank's GPU on a node, in local-rank order; ``host``: that node."""
    fixes = {
        "torchrun": _torchrun_binding(),
        "slurm": _slurm_binding(gpu_numa),
        "mpi": _mpi_binding(gpu_numa, host),
    }
    if launcher in fixes:
        return fixes[launcher]
    lead = "clusterbench's own launch binds no rank; launch it with " if launcher else ""
    if launcher == "ray":
        lead = "Ray Train binds no rank to a NUMA node; to bind them, launch with "
    return lead + "; or ".join(fixes[name] for name in LAUNCHER_NAMES)


def block_order_fix(launcher: str | None, *, ranks_per_node: int) -> str:
    """The flags that number ranks node by node (a node's ranks contiguous), for ``launcher``
    (all three when unknown)."""
    fixes = {
        "torchrun": "torchrun numbers ranks node by node (node rank x nproc-per-node + local "
        "rank): check that nothing renumbers RANK after it",
        "slurm": "srun --distribution=block (look for a cyclic -m/--distribution or "
        "SLURM_DISTRIBUTION in the job)",
        "mpi": f"mpirun --map-by ppr:{ranks_per_node}:node --rank-by slot (not --map-by node "
        "or --rank-by node)",
        "ray": "Ray Train numbers its workers node by node (its worker group is sorted by "
        "node): check that nothing renumbers RANK after it",
    }
    if launcher in fixes:
        return fixes[launcher]
    return "; or ".join(fixes[name] for name in LAUNCHER_NAMES)
