"""Doctor's one timing: what running off its NUMA node costs a rank, measured on the CPU.

A buffer's pages are placed on one NUMA node (first touched by a thread there); a thread on
that node, then one on another node, copies it.  The remote copy's loss is what a rank bound
to the wrong node (or left to float) pays on its host-memory traffic: the measured evidence
behind the placement advice on hosts with two or more NUMA nodes.  With one NUMA node there is
nothing to compare and nothing is timed.

The figures go into an info finding (``doctor.numa.remote_copy``) rather than measurements:
they describe the host, exist only where it has several NUMA nodes, and serve as evidence.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch

from clusterbench.benchmarks.doctor.settings import NUMA_FINDING_ID as FINDING_ID
from clusterbench.schema import Finding, Stats

__all__ = [
    "COPY_BYTES",
    "FINDING_ID",
    "REPEATS",
    "NumaCopy",
    "copy_gbps",
    "numa_copies",
    "numa_legs",
    "remote_copy_finding",
]


COPY_BYTES = 64 << 20
"""Bytes of each copy: past the last-level caches (tens of MiB), short enough (a few ms a
copy) for doctor's budget of seconds a node."""
REPEATS = 5


@dataclass(frozen=True, slots=True)
class NumaCopy:
    """One leg: the buffer's pages on ``memory_node``, the copying thread on ``cpu_node``."""

    numa: str
    """'local' (the thread on the buffer's node) or 'remote'."""
    memory_node: int
    cpu_node: int
    size_bytes: int
    samples_gbps: list[float]


def numa_legs(
    nodes: Mapping[int, Sequence[int]], allowed: set[int]
) -> tuple[tuple[int, list[int]], tuple[int, list[int]]] | None:
    """(memory node, CPUs), (another node, CPUs): the first two NUMA nodes with CPUs, each
    narrowed to the CPUs this process may use where it may use some of them; None with fewer
    than two such nodes."""
    usable = [(n, sorted(set(c) & allowed) or list(c)) for n, c in sorted(nodes.items()) if c]
    if len(usable) < 2:
        return None
    return usable[0], usable[1]


@contextlib.contextmanager
def _on_cpus(cpus: Sequence[int]) -> Iterator[None]:
    """This thread on ``cpus`` with torch's intra-op pool at one thread (the copy stays on
    this thread); both restored after."""
    before, threads = os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, before)


def copy_gbps(src: torch.Tensor, dst: torch.Tensor, *, repeats: int) -> list[float]:
    """GB/s of ``dst.copy_(src)`` per repeat, after one warm-up copy, checked after."""
    dst.zero_()
    dst.copy_(src)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        seconds = time.perf_counter() - start
        # bytes read + bytes written per second, as STREAM's Copy counts them
        samples.append(2 * src.numel() * src.element_size() / seconds / 1e9)
    if not torch.equal(src, dst):
        raise RuntimeError("doctor: the NUMA copy produced a wrong result")
    return samples


def numa_copies(
    nodes: Mapping[int, Sequence[int]], *, size_bytes: int = COPY_BYTES, repeats: int = REPEATS
) -> list[NumaCopy]:
    """The local and the remote leg on this host (``nodes``: NUMA node -> its CPUs); [] with
    fewer than two NUMA nodes with CPUs.  Raises OSError when this process may not run on a
    node's CPUs (a cgroup cpuset)."""
    legs = numa_legs(nodes, allowed=set(os.sched_getaffinity(0)))
    if legs is None:
        return []
    (home, home_cpus), (other, other_cpus) = legs
    with _on_cpus(home_cpus):  # first touch from the home node: the pages land there
        src = torch.randint(0, 256, (size_bytes,), dtype=torch.uint8)
        dst = torch.zeros_like(src)
    out = []
    for numa, node, cpus in (("local", home, home_cpus), ("remote", other, other_cpus)):
        with _on_cpus(cpus):
            out.append(NumaCopy(numa, home, node, size_bytes, copy_gbps(src, dst, repeats=repeats)))
    return out


def _stats(samples: list[float]) -> dict[str, float | int]:
    stats = Stats.from_samples(samples)
    return {"samples": stats.samples, "median": stats.median, "min": stats.min, "max": stats.max}


def remote_copy_finding(
    nodes: Mapping[int, Sequence[int]],
    *,
    scope: str,
    size_bytes: int = COPY_BYTES,
    repeats: int = REPEATS,
) -> Finding | None:
    """The local and remote copy as one info finding (GB/s, median of ``repeats``); None with
    fewer than two NUMA nodes with CPUs."""
    legs = numa_copies(nodes, size_bytes=size_bytes, repeats=repeats)
    if not legs:
        return None
    local, remote = (_stats(leg.samples_gbps) for leg in legs)
    loss = 1 - remote["median"] / local["median"]
    return Finding(
        id=FINDING_ID,
        severity="info",
        scope=scope,
        message=(
            f"A thread on NUMA node {legs[1].cpu_node} copies memory of node "
            f"{legs[0].memory_node} at {remote['median']:.1f} GB/s, {loss:.0%} below the "
            f"{local['median']:.1f} GB/s of a thread on node {legs[0].memory_node}: what a rank "
            "running off its NUMA node pays on host memory"
        ),
        evidence={
            "unit": "GB/s",
            "size_bytes": size_bytes,
            "memory_node": legs[0].memory_node,
            "local": {"cpu_node": legs[0].cpu_node, **local},
            "remote": {"cpu_node": legs[1].cpu_node, **remote},
            "loss": round(loss, 4),
        },
        fix="",
    )
