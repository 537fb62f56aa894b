"""The distributed context every benchmark receives.

Built on ``torch.distributed``: NCCL on GPUs, gloo on CPUs.  Groups beyond the world (per node,
per rail, node pairs) are added by the collective benchmarks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from clusterbench.metrics import Metric
from clusterbench.runtime.budget import TimeBudget
from clusterbench.runtime.cores import cores_per_rank
from clusterbench.runtime.flight import FlightRecorder
from clusterbench.runtime.telemetry import TelemetrySampler
from clusterbench.schema import GpuInfo, HostInfo, Measurement, ParamValue, Reference, Stats

__all__ = [
    "DistContext",
    "JoinTimeout",
    "NullProgress",
    "Progress",
    "init_distributed",
    "set_rank_threads",
]


class Progress(Protocol):
    """Progress of the benchmark running now; shown as a bar on rank 0 only."""

    def start(self, total: float) -> None: ...

    def advance(self, amount: float = 1.0) -> None: ...


class NullProgress:
    """Progress nobody sees (ranks other than 0, tests): a benchmark's bar, and the run's set of
    bars (``with`` it, ask it for a :meth:`bar`), that draw nothing."""

    def start(self, total: float) -> None:
        pass

    def advance(self, amount: float = 1.0) -> None:
        pass

    def finish(self, note: str = "") -> None:
        pass

    def bar(self, name: str) -> NullProgress:
        return self

    def clear(self, note: str = "") -> None:
        pass

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass(kw_only=True)
class DistContext:
    rank: int
    """Global rank of this process."""
    world_size: int
    local_rank: int
    """Rank within this node; the GPU index on GPU runs."""
    local_world_size: int
    node_rank: int
    num_nodes: int
    host: str
    device: torch.device
    hosts: list[str] = field(default_factory=list)
    """Every node's hostname, in node order (filled in once the world has joined)."""
    backend: str
    """'nccl' on GPUs, 'gloo' on CPUs."""
    gpu: GpuInfo | None = None
    """This rank's GPU as the probe saw it (None on CPU runs or before the probe)."""
    host_info: HostInfo | None = None
    """This node's inventory, probed once when the rank starts (None before the probe)."""
    benchmark: str = ""
    """The benchmark running now; set by the runner."""
    round: int | None = None
    """The soak round running now (0-based; ``--soak``/``--repeat``); None outside a soak."""
    progress: Progress = field(default_factory=NullProgress)
    run_dir: Path | None = None
    """The run folder, for benchmarks that keep files (traces, logs) with the results."""
    launcher: str | None = None
    """What started the ranks where their environment cannot tell (the run spec's ``ray``)."""
    waiting: bool = False
    """True while this rank only waits for others (barriers, gathers): a failure or timeout
    then is a consequence of another rank's, not this rank's own."""

    wait_failed: bool = False
    """Set when a wait for others raised (a peer died): the error is theirs, not ours."""
    flight: FlightRecorder | None = None
    """This rank's flight record (where it is, with a heartbeat), when the run keeps one."""
    phases: dict[str, float] = field(default_factory=dict)
    """The phases of this rank's start it timed before its log was open (worker start, device
    init), seconds: written as its first records."""
    telemetry: TelemetrySampler | None = None
    """This rank's GPU telemetry sampler while the benchmarks run (None: CPU workers, no
    NVML, or ``--no-telemetry``)."""
    budget: TimeBudget = field(default_factory=TimeBudget)
    """The running benchmark's time budget (no limit unless --budget or its time_budget_s
    set one): checked between points, agreed through rank 0 in collective benchmarks."""
    failed_in_collective: bool = False
    """Set when an error left a collective (it may be a peer's: the rank waits a moment before
    it exits, so that the launcher sees a dead peer first)."""

    @contextmanager
    def doing(self, activity: str, *, collective: bool = False) -> Iterator[None]:
        """Say in the flight record what this rank does for the block (e.g. the collective
        and size it is in), so a failed run can tell who was stuck from who waited."""
        try:
            if self.flight is None:
                yield
            else:
                with self.flight.doing(activity):
                    yield
        except Exception:
            self.failed_in_collective = self.failed_in_collective or collective
            raise

    @contextmanager
    def waiting_for_peers(self, what: str = "barrier") -> Iterator[None]:
        previous, self.waiting = self.waiting, True
        try:
            with self.doing(f"waiting for peers ({what})", collective=True):
                yield
        except Exception:
            self.wait_failed = True
            raise
        finally:
            self.waiting = previous

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def device_label(self) -> str:
        if self.is_cuda:
            return f"cuda:{self.device.index}"
        return f"cpu:{self.local_rank}"

    def barrier(self) -> None:
        """Wait for every rank (a world of one: no one to wait for, no collective)."""
        if self.world_size > 1 and dist.is_available() and dist.is_initialized():
            with self.waiting_for_peers():
                if self.backend == "nccl":
                    dist.barrier(device_ids=[self.device.index or 0])
                else:
                    dist.barrier()

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere); pickled through the world group."""
        if not (dist.is_available() and dist.is_initialized()) or self.world_size == 1:
            return [obj]
        out: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        with self.waiting_for_peers("gather to rank 0"):
            dist.gather_object(obj, out, dst=0)
        return out

    def all_gather(self, obj: Any) -> list[Any]:
        if not (dist.is_available() and dist.is_initialized()) or self.world_size == 1:
            return [obj]
        out: list[Any] = [None] * self.world_size
        with self.waiting_for_peers("all-gather"):
            dist.all_gather_object(out, obj)
        return out

    def broadcast_from_root(self, obj: Any) -> Any:
        if not (dist.is_available() and dist.is_initialized()) or self.world_size == 1:
            return obj
        box = [obj]
        with self.waiting_for_peers("broadcast from rank 0"):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def measurement(
        self,
        metric: Metric,
        *,
        value: float,
        params: dict[str, ParamValue] | None = None,
        stats: Stats | None = None,
        reference: Reference | None = None,
    ) -> Measurement:
        """A measurement of ``metric`` (declared by the running benchmark) on this rank's device."""
        if metric.benchmark != self.benchmark:
            raise ValueError(f"{self.benchmark} cannot emit {metric}: another benchmark's metric")
        return Measurement(
            benchmark=self.benchmark,
            metric=metric.name,
            value=float(value),
            unit=metric.unit,
            params=dict(params or {}),
            rank=self.rank,
            host=self.host,
            device=self.device_label,
            stats=stats,
            reference=reference,
        )


def set_rank_threads(local_world_size: int, env: dict[str, str] | None = None) -> int:
    """Give torch's intra-op pool this rank's share of the cores, unless OMP_NUM_THREADS says
    otherwise (a user's or the launcher's choice stands).  With every rank using every core,
    the ranks' CPU-side work (decoding, small ops) thrashes.  Returns the pool's size."""
    if "OMP_NUM_THREADS" not in (os.environ if env is None else env):
        torch.set_num_threads(cores_per_rank(local_world_size))
    return torch.get_num_threads()


class JoinTimeout(RuntimeError):
    """Not every rank joined the run within the join timeout (its message says who did).

    ``report``: this rank is the one to say so (rank 0; or a rank that found no rank 0)."""

    def __init__(self, message: str, *, report: bool) -> None:
        super().__init__(message)
        self.report = report


def init_distributed(
    *,
    backend: str,
    device: torch.device,
    timeout_s: float,
    join_timeout_s: float | None = None,
    host: str = "",
) -> None:
    """Join the world group from the launcher's environment (MASTER_ADDR/PORT, RANK, ...).

    ``join_timeout_s``: under srun or mpirun (every process a rank, no torchrun agent holding
    the run's store) rank 0 waits this long for every rank to join its store, and else raises
    :class:`JoinTimeout` naming the ranks and hosts that came (on every rank that came).
    Under torchrun (and clusterbench's own launch) the agent's rendezvous has already joined
    the world.
    """
    if dist.is_initialized():
        return
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=timeout_s)}
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if backend == "nccl":
        torch.cuda.set_device(device)
        if world_size > 1:  # NCCL's communicator made now, not at the first collective;
            # a world of one has no peer to talk to: that cost 0.37-0.56 s on an H100
            # (docs/results/command-startup.md, lease G), for a communicator never used
            kwargs["device_id"] = device
    if join_timeout_s is not None and world_size > 1 and "TORCHELASTIC_RUN_ID" not in os.environ:
        store = _join_store(rank=rank, world_size=world_size, timeout_s=join_timeout_s,
                            host=host)  # fmt: skip
        store.set_timeout(timedelta(seconds=timeout_s))
        kwargs["store"] = dist.PrefixStore("clusterbench/world", store)
    dist.init_process_group(rank=rank, world_size=world_size, **kwargs)


_JOINED = "clusterbench/join/count"
_VERDICT = "clusterbench/join/verdict"
_HEARD = "clusterbench/join/heard"


def _join_key(rank: int) -> str:
    return f"clusterbench/join/{rank}"


def _join_store(*, rank: int, world_size: int, timeout_s: float, host: str) -> dist.TCPStore:
    """The run's store, hosted by rank 0 at MASTER_ADDR:MASTER_PORT, once every rank is in it.

    Each rank leaves its hostname under its own key; rank 0 counts them for ``timeout_s``
    and then says, under one key, either '' (everyone came) or who came and who did not."""
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = timedelta(seconds=timeout_s)
    try:
        store = dist.TCPStore(addr, port, is_master=rank == 0, timeout=timeout,
                              wait_for_workers=False)  # fmt: skip
    except RuntimeError:
        if rank == 0:
            raise
        raise JoinTimeout(
            f"rank {rank} on host {host}: rank 0 did not start its store at {addr}:{port} "
            f"within {timeout_s:g} s (start every rank within --join-timeout)",
            report=True,
        ) from None
    store.set(_join_key(rank), host)
    store.add(_JOINED, 1)
    if rank == 0:
        _await_ranks(store, world_size=world_size, timeout_s=timeout_s)
        return store
    try:
        # rank 0 may have started up to timeout_s after this rank, and then waits timeout_s
        store.set_timeout(2 * timeout + timedelta(seconds=10))
        verdict = store.get(_VERDICT).decode("utf-8", "replace")
    except RuntimeError:
        raise JoinTimeout(
            f"rank {rank} on host {host}: rank 0 at {addr}:{port} never said that every rank "
            "had joined",
            report=True,
        ) from None
    if verdict:
        store.add(_HEARD, 1)
        raise JoinTimeout(verdict, report=False)
    return store


def _await_ranks(store: dist.TCPStore, *, world_size: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while store.add(_JOINED, 0) < world_size and time.monotonic() < deadline:
        time.sleep(0.05)
    if store.add(_JOINED, 0) >= world_size:
        store.set(_VERDICT, "")
        return
    came = {r: store.get(_join_key(r)).decode() for r in range(world_size)
            if store.check([_join_key(r)])}  # fmt: skip
    message = _who_joined(came, world_size=world_size, timeout_s=timeout_s)
    store.set(_VERDICT, message)
    # let the ranks that came read the verdict before this store goes with rank 0
    until = time.monotonic() + 2.0
    while store.add(_HEARD, 0) < len(came) - 1 and time.monotonic() < until:
        time.sleep(0.05)
    raise JoinTimeout(message, report=True)


def _who_joined(came: dict[int, str], *, world_size: int, timeout_s: float) -> str:
    """'only 3 of 4 ranks joined within 5 s, from 2 node(s): node0 (ranks 0-1), node1 (rank 2);
    never came: rank 3'."""
    by_host: dict[str, list[int]] = {}
    for rank, host in sorted(came.items()):
        by_host.setdefault(host, []).append(rank)
    hosts = ", ".join(f"{h} ({_ranks_text(r)})" for h, r in by_host.items())
    missing = [r for r in range(world_size) if r not in came]
    return (
        f"only {len(came)} of {world_size} ranks joined within {timeout_s:g} s, from "
        f"{len(by_host)} node(s): {hosts}; never came: {_ranks_text(missing)}"
    )


def _ranks_text(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> 'ranks 0-2, 5'; [3] -> 'rank 3'."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][-1] + 1:
            spans[-1].append(r)
        else:
            spans.append([r])
    text = ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in spans)
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {text}"
