"""Commands and scripts that run clusterbench on many nodes: torchrun, Slurm, MPI, Kubernetes.

Each generator is a pure function of a :class:`LaunchSpec` and returns text to print or save.
The Kubernetes manifest is built as plain dicts and lists and written with PyYAML's
``yaml.safe_dump`` (keys in the order built, so it reads top-down like a hand-written one).
Under every launcher ``clusterbench run`` joins as a worker (``runtime/launch.py`` reads the
launcher's rank variables), so the generated commands only start one process per GPU.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import yaml

__all__ = [
    "DEFAULT_IMAGE",
    "LAUNCHERS",
    "LaunchSpec",
    "k8s_manifest",
    "mpi_command",
    "parse_env",
    "pick_launcher",
    "render",
    "slurm_script",
    "to_yaml",
    "torchrun_command",
]

LauncherName = Literal["torchrun", "slurm", "mpi", "k8s"]
DEFAULT_PORT = 29500
DEFAULT_IMAGE = "ghcr.io/OWNER/clusterbench:latest"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    """What to launch: nodes x GPUs running ``clusterbench run --suite SUITE [run_args]``."""

    nodes: int
    gpus_per_node: int
    suite: str = "quick"
    master_addr: str | None = None
    """First node's address; None: found at run time where the launcher allows it."""
    port: int = DEFAULT_PORT
    image: str = DEFAULT_IMAGE
    """Container image (k8s only)."""
    name: str = "clusterbench"
    """Job name (Slurm, k8s) and rendezvous id (torchrun)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment for every rank, e.g. (("NCCL_SOCKET_IFNAME", "eth0"),)."""
    run_args: tuple[str, ...] = ()
    """Further arguments of ``clusterbench run``."""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"--nodes must be at least 1, got {self.nodes}")
        if self.gpus_per_node < 1:
            raise ValueError(f"--gpus-per-node must be at least 1, got {self.gpus_per_node}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"--port must be in 1..65535, got {self.port}")
        if not _K8S_NAME.match(self.name) or len(self.name) > 63:
            raise ValueError(f"--name must be lowercase letters, digits and '-', got {self.name!r}")
        for key, _ in self.env:
            if not _ENV_NAME.match(key):
                raise ValueError(f"--env: bad variable name {key!r} (expected KEY=VALUE)")

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def run_argv(self) -> list[str]:
        return ["clusterbench", "run", "--suite", self.suite, *self.run_args]


def _join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def torchrun_command(spec: LaunchSpec) -> str:
    """The same command for every node; torchrun's c10d rendezvous assigns the node ranks."""
    addr = spec.master_addr or "FIRST_NODE_ADDRESS"
    argv = [
        "torchrun",
        *("--nnodes", str(spec.nodes), "--nproc-per-node", str(spec.gpus_per_node)),
        *("--rdzv-backend", "c10d", "--rdzv-endpoint", f"{addr}:{spec.port}"),
        *("--rdzv-id", spec.name, "-m", *spec.run_argv()),
    ]
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in spec.env)
    lines = [f"# Run this same command on each of the {spec.nodes} node(s)."]
    if spec.master_addr is None:
        lines.append("# Replace FIRST_NODE_ADDRESS with an address of the first node.")
    return "\n".join([*lines, env + _join(argv)]) + "\n"


def slurm_script(spec: LaunchSpec) -> str:
    """A complete sbatch script: one task per GPU, srun starts them, each joins as a worker."""
    addr = (
        f"MASTER_ADDR={shlex.quote(spec.master_addr)}"
        if spec.master_addr
        else 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'
    )
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={spec.name}",
        f"#SBATCH --nodes={spec.nodes}",
        f"#SBATCH --ntasks-per-node={spec.gpus_per_node}",
        f"#SBATCH --gpus-per-node={spec.gpus_per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --output={spec.name}-%j.out",
        "set -eu",
        "# clusterbench reads SLURM_PROCID, SLURM_LOCALID and SLURM_STEP_NUM_TASKS;",
        "# every task sees all GPUs of its node and takes the one of its local rank.",
        addr,
        "export MASTER_ADDR",
        f"export MASTER_PORT={spec.port}",
        *(f"export {k}={shlex.quote(v)}" for k, v in spec.env),
        "srun --kill-on-bad-exit=1 " + _join(spec.run_argv()),
    ]
    return "\n".join(lines) + "\n"


def mpi_command(spec: LaunchSpec) -> str:
    """An Open MPI ``mpirun`` line for the first node; hosts.txt lists the nodes."""
    # unquoted when it is the $(...) lookup, so that the shell expands it
    addr = (
        shlex.quote(spec.master_addr)
        if spec.master_addr
        else "$(head -n1 hosts.txt | cut -d' ' -f1)"
    )
    argv = [
        "mpirun",
        *("-np", str(spec.world_size), "--map-by", f"ppr:{spec.gpus_per_node}:node"),
        *("--bind-to", "none", "--hostfile", "hosts.txt"),
        *("-x", "PATH", "-x", "LD_LIBRARY_PATH"),
    ]
    flags = [
        f"-x MASTER_ADDR={addr}",
        f"-x MASTER_PORT={spec.port}",
        *(f"-x {k}={shlex.quote(v)}" for k, v in spec.env),
    ]
    head = [
        f"# Run on the first node. hosts.txt: one line per node, e.g. 'node1 slots="
        f"{spec.gpus_per_node}'.",
        "# Add --allow-run-as-root when running as root (e.g. in a container).",
    ]
    command = " ".join([_join(argv), *flags, _join(spec.run_argv())])
    return "\n".join([*head, command]) + "\n"


def _k8s_container(spec: LaunchSpec) -> dict[str, Any]:
    # Kubeflow's operator sets MASTER_ADDR, MASTER_PORT and RANK (the pod's index: Master 0,
    # Worker i -> i+1) on every pod; Kubernetes expands $(VAR) from the container's env.
    args = [
        f"--nnodes={spec.nodes}",
        f"--nproc-per-node={spec.gpus_per_node}",
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "-m",
        *spec.run_argv(),
    ]
    container: dict[str, Any] = {
        "name": "pytorch",  # the operator looks for this container name
        "image": spec.image,
        "command": ["torchrun"],
        "args": args,
        "ports": [{"name": "pytorchjob-port", "containerPort": spec.port}],
        "resources": {"limits": {"nvidia.com/gpu": spec.gpus_per_node}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if spec.env:
        container["env"] = [{"name": k, "value": v} for k, v in spec.env]
    return container


def _k8s_replica(spec: LaunchSpec, count: int) -> dict[str, Any]:
    # built afresh for each replica type: a dict shared by Master and Worker would come out of
    # yaml.safe_dump as an anchor and an alias (&id001 / *id001) instead of written in full
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "containers": [_k8s_container(spec)],
                # NCCL and torch's shared-memory transport need more than the default 64 MiB
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
            }
        },
    }


def k8s_manifest_dict(spec: LaunchSpec) -> dict[str, Any]:
    """A Kubeflow PyTorchJob (kubeflow.org/v1): one pod per node, torchrun inside each.

    A ``Master`` replica and, with more than one node, ``nodes - 1`` ``Worker`` replicas; each
    pod has ``nvidia.com/gpu: gpus_per_node``, a ``/dev/shm`` volume in memory (NCCL and torch
    need more shared memory than the container default of 64 MiB) and the container
    ``pytorch`` (the name the operator looks for) running torchrun with the node rank and
    master address the operator sets in ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``.
    """
    replicas: dict[str, Any] = {"Master": _k8s_replica(spec, 1)}
    if spec.nodes > 1:
        replicas["Worker"] = _k8s_replica(spec, spec.nodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": spec.name},
        "spec": {"pytorchReplicaSpecs": replicas},
    }


def k8s_manifest(spec: LaunchSpec, *, fmt: Literal["yaml", "json"] = "yaml") -> str:
    """The PyTorchJob as YAML (default) or JSON; ``kubectl apply -f`` takes both."""
    manifest = k8s_manifest_dict(spec)
    if fmt == "json":
        return json.dumps(manifest, indent=2) + "\n"
    return to_yaml(manifest)


def to_yaml(value: Any) -> str:
    """Block-style YAML of plain dicts, lists and scalars, keys in insertion order.

    ``yaml.safe_dump`` quotes a string only where YAML needs it (e.g. ``"8"`` or ``"true"``
    stay strings) and, with no width limit, never folds a long value over several lines.
    """
    text: str = yaml.safe_dump(
        value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=float("inf")
    )
    return text


LAUNCHERS: dict[str, Callable[[LaunchSpec], str]] = {
    "torchrun": torchrun_command,
    "slurm": slurm_script,
    "mpi": mpi_command,
    "k8s": k8s_manifest,
}


def pick_launcher(*, torchrun: bool, slurm: bool, mpi: bool, k8s: bool) -> str:
    """The one launcher whose flag is set; ValueError unless exactly one is."""
    chosen = [n for n, on in zip(LAUNCHERS, (torchrun, slurm, mpi, k8s), strict=True) if on]
    if len(chosen) != 1:
        raise ValueError("choose exactly one of --torchrun, --slurm, --mpi, --k8s")
    return chosen[0]


def parse_env(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``["KEY=VALUE", ...]`` -> ``(("KEY", "VALUE"), ...)``."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--env expects KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return tuple(pairs)


def render(launcher: str, spec: LaunchSpec, *, fmt: Literal["yaml", "json"] = "yaml") -> str:
    """The text for ``launcher`` (torchrun, slurm, mpi, k8s); ``fmt`` applies to k8s only."""
    if launcher == "k8s":
        return k8s_manifest(spec, fmt=fmt)
    try:
        return LAUNCHERS[launcher](spec)
    except KeyError:
        raise ValueError(f"unknown launcher {launcher!r}") from None
