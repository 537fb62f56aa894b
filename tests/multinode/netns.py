"""Simulated nodes on one machine: network namespaces joined by a bridge, each with a hostname.

Each node is a namespace with one interface ``eth0`` (10.77.<net>.<i+1>/24) on a bridge that
lives in a hub namespace, so nothing touches the host's own network.  Commands run in a node
through ``ip netns exec`` and ``unshare --uts`` with the node's hostname.  ``shape`` limits a
node's link with ``tc`` (token bucket, both directions).  Needs root and iproute2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def available() -> str | None:
    """None when simulated nodes can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "unshare", "tc"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


class SimulatedCluster:
    def __init__(self, num_nodes: int, *, net: int = 77) -> None:
        tag = f"{os.getpid() % 100000}"
        self.hub = f"cbhub{tag}"
        self.nodes = [f"cbn{tag}x{i}" for i in range(num_nodes)]
        self.hostnames = [f"node{i}" for i in range(num_nodes)]
        self.addresses = [f"10.{net}.0.{i + 1}" for i in range(num_nodes)]
        self._made: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _hosts_file(self, ns: str) -> None:
        # `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts: every node
        # resolves every node's hostname, as a real cluster's DNS or /etc/hosts does.
        folder = Path("/etc/netns") / ns
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost"]
        lines += [f"{a} {h}" for a, h in zip(self.addresses, self.hostnames, strict=True)]
        (folder / "hosts").write_text("\n".join(lines) + "\n")

    def _build(self) -> None:
        _sh("ip", "netns", "add", self.hub)
        self._made.append(self.hub)
        self._hub("ip", "link", "add", "br0", "type", "bridge")
        self._hub("ip", "link", "set", "br0", "up")
        for i, ns in enumerate(self.nodes):
            _sh("ip", "netns", "add", ns)
            self._made.append(ns)
            self._hosts_file(ns)
            _sh("ip", "-n", self.hub, "link", "add", f"hv{i}", "type", "veth", "peer", "name",
                "eth0", "netns", ns)  # fmt: skip
            self._hub("ip", "link", "set", f"hv{i}", "master", "br0", "up")
            self.exec_check(i, "ip", "link", "set", "lo", "up")
            self.exec_check(i, "ip", "addr", "add", f"{self.addresses[i]}/24", "dev", "eth0")
            self.exec_check(i, "ip", "link", "set", "eth0", "up")

    def _hub(self, *args: str) -> None:
        _sh("ip", "netns", "exec", self.hub, *args)

    def exec_check(self, node: int, *args: str) -> None:
        _sh("ip", "netns", "exec", self.nodes[node], *args)

    def shape(self, node: int, *, rate: str, latency: str = "50ms") -> None:
        """Limit node's link to ``rate`` (e.g. '50mbit') in both directions; ``latency``: how
        long a packet may queue (a deeper queue drops less: a steadier rate)."""
        tbf = ["root", "tbf", "rate", rate, "burst", "64kb", "latency", latency]
        self.exec_check(node, "tc", "qdisc", "add", "dev", "eth0", *tbf)
        self._hub("tc", "qdisc", "add", "dev", f"hv{node}", *tbf)

    def command(self, node: int, argv: Sequence[str]) -> list[str]:
        """argv run inside node, under its own hostname."""
        script = f'hostname {self.hostnames[node]} && exec "$@"'
        return ["ip", "netns", "exec", self.nodes[node], "unshare", "--uts", "sh", "-c", script,
                "sh", *argv]  # fmt: skip

    def popen(self, node: int, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(node, argv), text=True, **kwargs)

    def close(self) -> None:
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self._made.clear()

    def __enter__(self) -> SimulatedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_as_srun_tasks(
    cluster: SimulatedCluster, *, args: Sequence[str], port: int, timeout: float
) -> list[subprocess.CompletedProcess[str]]:
    """``clusterbench run --device cpu ARGS``, one rank per simulated node with the variables
    srun sets (SLURMD_NODENAME too): no torchrun agent per node importing torch as well.  Rank
    0's node hosts the run's store; every rank left running at the end is killed."""
    n = len(cluster.nodes)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    try:
        for i in range(n):
            env = {**base, "GLOO_SOCKET_IFNAME": "eth0", "PYTHONUNBUFFERED": "1",
                   "OMP_NUM_THREADS": "1", "SLURM_PROCID": str(i), "SLURM_LOCALID": "0",
                   "SLURM_STEP_NUM_TASKS": str(n), "SLURM_STEP_TASKS_PER_NODE": "1",
                   "SLURMD_NODENAME": cluster.hostnames[i],
                   "MASTER_ADDR": cluster.addresses[0], "MASTER_PORT": str(port)}  # fmt: skip
            argv = [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", *args]
            procs.append(cluster.popen(i, argv, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE))  # fmt: skip
        done = []
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        return done
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
