"""The distributed context every benchmark receives.

Built on ``torch.distributed``: NCCL on GPUs, gloo on CPUs.  Groups beyond the world (per node,
per rail, node pairs) are added by the collective benchmarks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from clusterbench.metrics import Metric
from clusterbench.runtime.flight import FlightRecorder
from clusterbench.schema import GpuInfo, HostInfo, Measurement, ParamValue, Reference, Stats

__all__ = [
    "DistContext",
    "NullProgress",
    "Progress",
    "cores_per_rank",
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
    backend: str
    """'nccl' on GPUs, 'gloo' on CPUs."""
    gpu: GpuInfo | None = None
    """This rank's GPU as the probe saw it (None on CPU runs or before the probe)."""
    host_info: HostInfo | None = None
    """This node's inventory, probed once when the rank starts (None before the probe)."""
    benchmark: str = ""
    """The benchmark running now; set by the runner."""
    progress: Progress = field(default_factory=NullProgress)
    run_dir: Path | None = None
    """The run folder, for benchmarks that keep files (traces, logs) with the results."""
    waiting: bool = False
    """True while this rank only waits for others (barriers, gathers): a failure or timeout
    then is a consequence of another rank's, not this rank's own."""

    wait_failed: bool = False
    """Set when a wait for others raised (a peer died): the error is theirs, not ours."""
    flight: FlightRecorder | None = None
    """This rank's flight record (where it is, with a heartbeat), when the run keeps one."""
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
        if dist.is_available() and dist.is_initialized():
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


def cores_per_rank(local_world_size: int) -> int:
    """An equal share, for one of ``local_world_size`` ranks, of the cores this process may
    run on (its CPU affinity where the system has one)."""
    affinity = getattr(os, "sched_getaffinity", None)  # absent on macOS
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    return max(1, cores // max(1, local_world_size))


def set_rank_threads(local_world_size: int, env: dict[str, str] | None = None) -> int:
    """Give torch's intra-op pool this rank's share of the cores, unless OMP_NUM_THREADS says
    otherwise (a user's or the launcher's choice stands).  With every rank using every core,
    the ranks' CPU-side work (decoding, small ops) thrashes.  Returns the pool's size."""
    if "OMP_NUM_THREADS" not in (os.environ if env is None else env):
        torch.set_num_threads(cores_per_rank(local_world_size))
    return torch.get_num_threads()


def init_distributed(*, backend: str, device: torch.device, timeout_s: float) -> None:
    """Join the world group from the launcher's environment (MASTER_ADDR/PORT, RANK, ...)."""
    if dist.is_initialized():
        return
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=timeout_s)}
    if backend == "nccl":
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]), **kwargs
    )
