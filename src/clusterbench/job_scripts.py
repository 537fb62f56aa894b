"""Commands and scripts that run clusterbench on many nodes: torchrun, Slurm, MPI, Kubernetes,
Ray.

Each generator is a pure function of a :class:`LaunchSpec` and returns text to print or save.
The Kubernetes manifest is built as plain dicts and lists and written with PyYAML's
``yaml.safe_dump`` (keys in the order built, so it reads top-down like a hand-written one).
Under every launcher ``clusterbench run`` joins as a worker (``runtime/launch.py`` reads the
launcher's rank variables), so the generated commands only start one process per GPU.

Every command bounds the start: torchrun's rendezvous starts the run with the nodes that came
within the join timeout (``--nnodes 1:N``) and ``clusterbench run --expect-nodes N`` then stops
it at once, naming them; under srun and mpirun rank 0 waits as long for every rank
(``--join-timeout``); the PyTorchJob's static rendezvous gives up after as long.  No launcher
restarts a worker (``--max-restarts 0``): a fault ends the run, named.

A pod's file system goes with the pod, so the manifest can mount a results volume (a
PersistentVolumeClaim or a hostPath) at :data:`RESULTS_MOUNT` in the Master pod, where rank 0
writes the run folder, and point the run's ``--out`` into it; :func:`results_note` says where
the results land (or that they vanish with the pod).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import yaml

__all__ = [
    "LAUNCHERS",
    "RESULTS_MOUNT",
    "LaunchSpec",
    "k8s_manifest",
    "k8s_manifest_dict",
    "mpi_command",
    "parse_env",
    "pick_launcher",
    "ray_commands",
    "render",
    "results_note",
    "slurm_script",
    "to_yaml",
    "torchrun_command",
]

LauncherName = Literal["torchrun", "slurm", "mpi", "k8s", "ray"]
DEFAULT_PORT = 29500
DEFAULT_JOIN_TIMEOUT_S = 300
"""Seconds the nodes have to join, unless --join-timeout (or a shorter run --timeout) says."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_K8S_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RESULTS_MOUNT = "/results"
"""Where a k8s results volume is mounted; the run's ``--out`` is ``/results/<job name>``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    """What to launch: nodes x GPUs running ``clusterbench run --suite SUITE [run_args]``."""

    nodes: int
    gpus_per_node: int
    suite: str = "quick"
    master_addr: str | None = None
    """First node's address; None: found at run time where the launcher allows it."""
    port: int = DEFAULT_PORT
    image: str | None = None
    """Container image (k8s only, where it is required: there is no image to guess)."""
    name: str = "clusterbench"
    """Job name (Slurm, k8s) and rendezvous id (torchrun)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment for every rank, e.g. (("NCCL_SOCKET_IFNAME", "eth0"),)."""
    run_args: tuple[str, ...] = ()
    """Further arguments of ``clusterbench run``."""
    results_pvc: str | None = None
    """k8s: a PersistentVolumeClaim, mounted at ``/results`` in the Master pod, for the run."""
    results_host_path: str | None = None
    """k8s: a folder on the Master pod's node, mounted at ``/results``, for the run."""
    join_timeout_s: int | None = None
    """Seconds the nodes (ranks under srun/mpirun) have to join once the first has started;
    None: 300, or the run's ``--timeout`` when that is shorter."""

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
        if self.join_timeout_s is not None and self.join_timeout_s < 1:
            raise ValueError(f"--join-timeout must be at least 1 s, got {self.join_timeout_s}")
        for option in ("--expect-nodes", "--join-timeout"):
            if self._run_option(option) is not None:
                raise ValueError(
                    f"{option}: set by the launch command itself (use 'clusterbench launch "
                    "--join-timeout'), not among the run's arguments"
                )
        self._check_results_volume()

    def _check_results_volume(self) -> None:
        pvc, host_path = self.results_pvc, self.results_host_path
        if pvc is not None and host_path is not None:
            raise ValueError("--results-pvc and --results-host-path: choose one")
        if pvc is not None and (not _K8S_SUBDOMAIN.match(pvc) or len(pvc) > 253):
            raise ValueError(
                f"--results-pvc must be a PersistentVolumeClaim name (lowercase letters, digits, "
                f"'-' and '.'), got {pvc!r}"
            )
        if host_path is not None and (
            not host_path.startswith("/") or ".." in host_path.split("/")
        ):
            raise ValueError(
                f"--results-host-path must be an absolute path without '..', got {host_path!r}"
            )
        out = self.user_out()
        if self.has_results_volume and out is not None and not out.startswith(f"{RESULTS_MOUNT}/"):
            raise ValueError(
                f"--out {out}: outside the results volume mounted at {RESULTS_MOUNT}; leave "
                f"--out out (the run goes to {RESULTS_MOUNT}/{self.name}) or point it under "
                f"{RESULTS_MOUNT}/"
            )

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def has_results_volume(self) -> bool:
        return self.results_pvc is not None or self.results_host_path is not None

    def _run_option(self, name: str) -> str | None:
        """The value of ``name`` among ``run_args`` (the last one, as the CLI takes it)."""
        value = None
        for i, arg in enumerate(self.run_args):
            if arg == name and i + 1 < len(self.run_args):
                value = self.run_args[i + 1]
            elif arg.startswith(f"{name}="):
                value = arg.partition("=")[2]
        return value

    def user_out(self) -> str | None:
        """The ``--out`` given among ``run_args`` (the last one, as the CLI takes it), if any."""
        return self._run_option("--out")

    @property
    def join_timeout(self) -> int:
        """Seconds to join: ``join_timeout_s``, else 300 or the run's shorter ``--timeout``."""
        if self.join_timeout_s is not None:
            return self.join_timeout_s
        try:
            run_timeout = float(self._run_option("--timeout") or "inf")
        except ValueError:
            run_timeout = math.inf  # clusterbench run refuses it, with its own line
        if math.isfinite(run_timeout) and run_timeout > 0:
            return max(1, min(DEFAULT_JOIN_TIMEOUT_S, math.ceil(run_timeout)))
        return DEFAULT_JOIN_TIMEOUT_S

    def run_out(self) -> str | None:
        """The run folder the job writes: ``--out`` from ``run_args``, else ``/results/<name>``
        with a results volume, else None (clusterbench's default, in the working folder)."""
        out = self.user_out()
        if out is None and self.has_results_volume:
            return f"{RESULTS_MOUNT}/{self.name}"
        return out

    def run_argv(self, *, out: str | None = None) -> list[str]:
        """``clusterbench run --suite SUITE [--expect-nodes N] --join-timeout T [--out OUT]
        [run_args]``."""
        extra = ["--expect-nodes", str(self.nodes)] if self.nodes > 1 else []
        extra += ["--join-timeout", str(self.join_timeout)]
        extra += ["--out", out] if out is not None else []
        return ["clusterbench", "run", "--suite", self.suite, *extra, *self.run_args]


def _join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def torchrun_command(spec: LaunchSpec) -> str:
    """The same command for every node; torchrun's c10d rendezvous assigns the node ranks.

    ``--nnodes 1:N`` with ``last_call_timeout=T``: the rendezvous starts once all N nodes are
    in, or T seconds after the first one came with those that did (then ``clusterbench run
    --expect-nodes N`` stops the run, naming them).  ``join_timeout`` must outlast
    ``last_call_timeout``, else the first node gives up before the rendezvous starts.
    """
    addr = spec.master_addr or "FIRST_NODE_ADDRESS"
    t = spec.join_timeout
    nodes = ["--nnodes", str(spec.nodes)]
    if spec.nodes > 1:
        nodes = ["--nnodes", f"1:{spec.nodes}",
                 "--rdzv-conf", f"join_timeout={2 * t},last_call_timeout={t}"]  # fmt: skip
    argv = [
        "torchrun",
        *nodes, "--nproc-per-node", str(spec.gpus_per_node), "--max-restarts", "0",
        *("--rdzv-backend", "c10d", "--rdzv-endpoint", f"{addr}:{spec.port}"),
        *("--rdzv-id", spec.name, "-m", *spec.run_argv()),
    ]  # fmt: skip
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in spec.env)
    lines = [f"# Run this same command on each of the {spec.nodes} node(s)."]
    if spec.nodes > 1:
        lines.append(
            f"# Start them within {t} s of the first (--join-timeout); a node that has not "
            "joined by then is left out and the run stops, naming the nodes that came."
        )
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
    if not spec.image:
        raise ValueError("the Kubernetes manifest needs a container image (--image IMAGE)")
    # Kubeflow's operator sets MASTER_ADDR, MASTER_PORT and RANK (the pod's index: Master 0,
    # Worker i -> i+1) on every pod; Kubernetes expands $(VAR) from the container's env.
    args = [
        f"--nnodes={spec.nodes}",
        f"--nproc-per-node={spec.gpus_per_node}",
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "--max-restarts=0",
        # the static rendezvous (the Master pod is node 0, where the results volume is): its
        # store waits this long for every pod, then the job fails with torch's own message
        f"--rdzv-conf=timeout={spec.join_timeout}",
        "-m",
        *spec.run_argv(out=spec.run_out() if spec.user_out() is None else None),
    ]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if spec.has_results_volume:
        mounts.append({"name": "results", "mountPath": RESULTS_MOUNT})
    container: dict[str, Any] = {
        "name": "pytorch",  # the operator looks for this container name
        "image": spec.image,
        "command": ["torchrun"],
        "args": args,
        "ports": [{"name": "pytorchjob-port", "containerPort": spec.port}],
        "resources": {"limits": {"nvidia.com/gpu": spec.gpus_per_node}},
        "volumeMounts": mounts,
    }
    if spec.env:
        container["env"] = [{"name": k, "value": v} for k, v in spec.env]
    return container


def _k8s_results_volume(spec: LaunchSpec, *, master: bool) -> dict[str, Any]:
    # Rank 0, in the Master pod, makes the run folder and writes results.json there; the ranks
    # of every other node make the same path for their own files, so the Workers get it as an
    # empty folder (a ReadWriteOnce claim cannot be attached to pods on several nodes).
    if not master:
        return {"name": "results", "emptyDir": {}}
    if spec.results_pvc is not None:
        return {"name": "results", "persistentVolumeClaim": {"claimName": spec.results_pvc}}
    return {
        "name": "results",
        "hostPath": {"path": spec.results_host_path, "type": "DirectoryOrCreate"},
    }


def _k8s_replica(spec: LaunchSpec, count: int, *, master: bool) -> dict[str, Any]:
    # built afresh for each replica type: a dict shared by Master and Worker would come out of
    # yaml.safe_dump as an anchor and an alias (&id001 / *id001) instead of written in full;
    # NCCL and torch's shared-memory transport need more than the default 64 MiB of /dev/shm
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if spec.has_results_volume:
        volumes.append(_k8s_results_volume(spec, master=master))
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "containers": [_k8s_container(spec)],
                "volumes": volumes,
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

    With ``results_pvc`` or ``results_host_path`` the Master pod mounts that volume at
    ``/results`` (the Workers an empty folder there) and the run's ``--out`` is
    ``/results/<name>`` unless ``run_args`` give one under ``/results``.
    """
    replicas: dict[str, Any] = {"Master": _k8s_replica(spec, 1, master=True)}
    if spec.nodes > 1:
        replicas["Worker"] = _k8s_replica(spec, spec.nodes - 1, master=False)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": spec.name},
        "spec": {"pytorchReplicaSpecs": replicas},
    }


def k8s_manifest(spec: LaunchSpec, *, fmt: Literal["yaml", "json"] = "yaml") -> str:
    """The PyTorchJob as YAML (default) or JSON; ``kubectl apply -f`` takes both. The YAML
    starts with a comment saying where the results land (JSON has no comments)."""
    manifest = k8s_manifest_dict(spec)
    if fmt == "json":
        return json.dumps(manifest, indent=2) + "\n"
    return f"# {_k8s_results_note(spec)}\n" + to_yaml(manifest)


def _k8s_results_note(spec: LaunchSpec) -> str:
    """One line: where the PyTorchJob's results land, or that they vanish with the pod."""
    out = spec.run_out()
    if out is None or not spec.has_results_volume:
        where = out or "clusterbench-runs/<UTC time>-<host> under its working folder"
        return (
            f"results stay inside the Master pod ({where}) and vanish with it; add "
            "--results-pvc NAME or --results-host-path PATH to keep them"
        )
    sub = out.removeprefix(f"{RESULTS_MOUNT}/")
    if spec.results_pvc is not None:
        volume = f"folder {sub}/ of PersistentVolumeClaim {spec.results_pvc}"
    else:
        host = f"{(spec.results_host_path or '').rstrip('/')}/{sub}"
        volume = f"{host} on the node that runs it (hostPath {spec.results_host_path})"
    return f"results land in {out} in the Master pod: {volume}, mounted at {RESULTS_MOUNT}"


def results_note(launcher: str, spec: LaunchSpec) -> str | None:
    """Where ``launcher``'s results land, for the console; None where nothing needs saying."""
    if launcher == "ray":
        return _ray_results_note(spec)
    return _k8s_results_note(spec) if launcher == "k8s" else None


RAY_GCS_PORT = 6379
"""Ray's default port of the head node (``ray start --head``), where nodes and drivers join."""
RAY_DASHBOARD_PORT = 8265
"""Ray's default dashboard port, where ``ray job submit`` sends a job."""


def ray_commands(spec: LaunchSpec) -> str:
    """The driver ``python -m clusterbench.ray`` (Ray Train starts one worker per rank), to
    run on the head node or to submit as a Ray job; with how to start the cluster, if needed.

    Ray Train picks the rendezvous port itself, so ``spec.port`` plays no part.
    """
    head = spec.master_addr or "HEAD_NODE_ADDRESS"
    argv = ["python", "-m", "clusterbench.ray", "--nodes", str(spec.nodes),
            "--gpus-per-node", str(spec.gpus_per_node), "--suite", spec.suite,
            "--join-timeout", str(spec.join_timeout)]  # fmt: skip
    for key, value in spec.env:
        argv += ["--env", f"{key}={value}"]
    argv += ["--", *spec.run_args] if spec.run_args else []
    submit = ["ray", "job", "submit", "--address", f"http://{head}:{RAY_DASHBOARD_PORT}", "--"]
    lines = [
        "# Every node needs clusterbench[ray], the same version. No Ray cluster yet? Start one:",
        f"#   on the head node:    ray start --head --port={RAY_GCS_PORT}",
        f"#   on each other node:  ray start --address={head}:{RAY_GCS_PORT}",
        "# Then, on the head node:",
        _join(argv),
        f"# or as a Ray job, from a machine that reaches the head's dashboard (port "
        f"{RAY_DASHBOARD_PORT}):",
        _join([*submit, *argv]),
    ]
    if spec.master_addr is None:
        lines.insert(3, "# Replace HEAD_NODE_ADDRESS with an address of the head node.")
    return "\n".join(lines) + "\n"


def _ray_results_note(spec: LaunchSpec) -> str:
    out = spec.user_out()
    where = f"--out {out}" if out else "clusterbench-runs/<UTC time>-<host>"
    return (
        f"rank 0 writes the run folder ({where}, from the driver's working folder) on its own "
        "node, which need not be the driver's: give an absolute --out on storage every node "
        "shares, or look on the node the driver's last line names"
    )


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
    "ray": ray_commands,
}


def pick_launcher(*, torchrun: bool, slurm: bool, mpi: bool, k8s: bool, ray: bool = False) -> str:
    """The one launcher whose flag is set; ValueError unless exactly one is."""
    flags = (torchrun, slurm, mpi, k8s, ray)
    chosen = [n for n, on in zip(LAUNCHERS, flags, strict=True) if on]
    if len(chosen) != 1:
        raise ValueError("choose exactly one of --torchrun, --slurm, --mpi, --k8s, --ray")
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
    """The text for ``launcher`` (torchrun, slurm, mpi, k8s, ray); ``fmt`` applies to k8s only."""
    if spec.has_results_volume and launcher != "k8s":
        raise ValueError("--results-pvc and --results-host-path apply to --k8s only")
    if launcher == "k8s":
        return k8s_manifest(spec, fmt=fmt)
    try:
        return LAUNCHERS[launcher](spec)
    except KeyError:
        raise ValueError(f"unknown launcher {launcher!r}") from None
