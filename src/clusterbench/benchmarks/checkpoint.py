"""Checkpoint save and load of a training workload's state, in the formats people use.

The state is the model and its AdamW state after one training step (so exp_avg/exp_avg_sq
exist), as ``torch.distributed.checkpoint.state_dict.get_state_dict`` returns it.

- ``torch``: ``torch.save`` / ``torch.load(map_location="cpu")`` on rank 0, as DDP scripts do;
- ``safetensors``: the model weights (shared tensors once) with ``save_file`` / ``load_file``;
- ``dcp``: ``torch.distributed.checkpoint.save`` / ``load`` on every rank.  The state is
  replicated (plain DDP-style): DCP's planner de-duplicates replicated tensors and spreads the
  writes over the ranks, so each tensor is written once; every rank loads the whole state;
- ``dcp_async``: ``async_save``; the blocking part (staging to host memory) and the training
  stall: K steps while the save runs against K steps without one.

Every save is made durable (fsync) before its clock stops, and its files are dropped from the
page cache (posix_fadvise DONTNEED) before the load, so loads read the storage, not memory; on
tmpfs (often /tmp) both are memory copies.  Loaded tensors are compared with a sample of the
saved ones.  Everything written is removed afterwards, also on error.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.distributed as dist

from clusterbench.benchmarks import checkpoint_io as io
from clusterbench.benchmarks.dataloader_workload import (
    WorkloadName,
    load_workload,
    make_train_step,
)
from clusterbench.benchmarks.presets import check_suite
from clusterbench.benchmarks.training.strategies import Trainer
from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, synchronize, wall_clock
from clusterbench.schema import Measurement, ParamValue, Stats

if TYPE_CHECKING:
    from typing import Self

    from clusterbench.benchmarks.training.workload import Batch

__all__ = ["FORMATS", "CheckpointConfig", "CheckpointMetrics", "Format", "checkpoint"]

Format = Literal["torch", "safetensors", "dcp", "dcp_async"]
FORMATS: tuple[Format, ...] = typing.get_args(Format)
_DCP = ("dcp", "dcp_async")


class CheckpointMetrics(MetricSet, benchmark="checkpoint"):
    save_gbps = Metric("GB/s", "higher", "checkpoint bytes / save time, made durable (fsync)")
    load_gbps = Metric("GB/s", "higher", "checkpoint bytes / load time, from the storage")
    save_s = Metric("s", "lower", "time of one save, made durable (fsync)")
    load_s = Metric("s", "lower", "time of one load, page cache dropped before it")
    async_block_s = Metric("s", "lower", "time dcp.async_save blocks training (staging)")
    async_stall_pct = Metric(
        "%", "none", "how much slower training steps run while an async save writes"
    )
    free_space_gb = Metric("GB", "none", "free space of the folder checkpoints are written to")


@dataclass(kw_only=True, slots=True)
class CheckpointConfig:
    """Settings of the ``checkpoint`` benchmark."""

    model: WorkloadName = "1.3b"
    """Workload preset whose state is saved (a ``training`` preset, or 'small_cnn')."""
    formats: list[Format] = field(default_factory=lambda: list(FORMATS))
    """torch, safetensors, dcp (sharded, synchronous), dcp_async."""
    directory: str = ""
    """Existing folder to write under ('' = the node's temp dir); a shared filesystem here
    measures it.  Several nodes need a shared folder (DCP's ranks read each other's files)."""
    repeats: int = 3
    """Saves and loads per format."""
    stall_steps: int = 5
    """Training steps timed with and without an async save running."""
    batch_size: int = 1
    """Samples per training step."""
    num_checked: int = 8
    """Tensors compared after each load (evenly spread over the state)."""

    def __post_init__(self) -> None:
        if not self.formats:
            raise ValueError("formats must not be empty")
        for name in ("repeats", "stall_steps", "batch_size", "num_checked"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        repeats = 1 if suite == "quick" else 3
        if device_type == "cpu":
            return cls(model="tiny", repeats=repeats, stall_steps=3)
        return cls(model="125m" if suite == "quick" else "1.3b", repeats=repeats)


@dataclass(kw_only=True)
class _Run:
    """What every format needs: the context, settings, state, folder and DCP's process group."""

    ctx: DistContext
    cfg: CheckpointConfig
    step: Trainer
    batch: Batch
    state: dict[str, Any]
    size_bytes: int
    root: Path
    group: Any


def checkpoint(ctx: DistContext, cfg: CheckpointConfig) -> Iterator[Measurement]:
    """Checkpoint save/load GB/s (torch.save, safetensors, DCP sync and async) and async stall."""
    if ctx.num_nodes > 1 and not cfg.directory and any(f in _DCP for f in cfg.formats):
        raise ValueError(
            "checkpoint: DCP on several nodes needs a shared `directory` "
            "(--set checkpoint.directory=/shared/path)"
        )
    ctx.progress.start(len(cfg.formats) + 1)
    workload = load_workload(cfg.model, device=ctx.device)
    step = make_train_step(workload, precision="bf16" if ctx.is_cuda else "fp32")
    batch = workload.make_batch(cfg.batch_size)
    step.step([batch])  # the optimizer state exists after one step
    state = _state_dict(step)
    with _shared_dir(ctx, cfg) as root, _gloo_group(ctx) as group:
        run = _Run(
            ctx=ctx,
            cfg=cfg,
            step=step,
            batch=batch,
            state=state,
            size_bytes=io.nbytes(state),
            root=root,
            group=group,
        )
        if ctx.rank == 0:
            yield _free_space(run)
        ctx.progress.advance()
        for fmt in cfg.formats:
            yield from _FORMATS[fmt](run)
            ctx.barrier()
            ctx.progress.advance()


def _state_dict(step: Trainer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(step.model, step.optimizer)
    return {"model": model_sd, "optim": optim_sd}


@contextmanager
def _shared_dir(ctx: DistContext, cfg: CheckpointConfig) -> Iterator[Path]:
    """One folder for all ranks, made by rank 0; every rank removes it at the end."""
    if cfg.directory and not Path(cfg.directory).is_dir():
        raise ValueError(f"checkpoint: directory {cfg.directory!r} is not an existing folder")
    made = (
        tempfile.mkdtemp(prefix="clusterbench-ckpt-", dir=cfg.directory or None)
        if ctx.rank == 0
        else None
    )
    path = Path(ctx.broadcast_from_root(made))
    path.mkdir(parents=True, exist_ok=True)  # another node's view of a shared folder
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # peers may remove the same files first


@contextmanager
def _gloo_group(ctx: DistContext) -> Iterator[Any]:
    """A gloo group for DCP: async_save's background thread needs a CPU backend."""
    if not (dist.is_available() and dist.is_initialized()):
        yield None
        return
    with ctx.waiting_for_peers():
        group = dist.new_group(backend="gloo")
    try:
        yield group
    finally:
        dist.destroy_process_group(group)


def _io_measurements(
    run: _Run, *, fmt: Format, size_bytes: int, saves: list[float], loads: list[float]
) -> Iterator[Measurement]:
    params: dict[str, ParamValue] = {"format": fmt, "size_bytes": size_bytes}
    if fmt in _DCP:
        params["num_ranks"] = run.ctx.world_size
    for kind, samples in (("save", saves), ("load", loads)):
        if not samples:
            continue
        # GB/s = bytes / t / 1e9
        gbps = rate_stats(samples, work=size_bytes, scale=1e9)
        yield run.ctx.measurement(
            CheckpointMetrics.get(f"{kind}_gbps"), value=gbps.median, params=params, stats=gbps
        )
        secs = Stats.from_samples(samples)
        yield run.ctx.measurement(
            CheckpointMetrics.get(f"{kind}_s"), value=secs.median, params=params, stats=secs
        )


def _torch_format(run: _Run) -> Iterator[Measurement]:
    yield from _rank0_round_trips(
        run, fmt="torch", tree=run.state, path=run.root / "state.pt", save=_torch_save,
        load=lambda path: torch.load(path, map_location="cpu", weights_only=True),
    )  # fmt: skip


def _rank0_round_trips(
    run: _Run, *, fmt: Format, tree: Any, path: Path, save: Callable[[Any, Path], None],
    load: Callable[[Path], Any],
) -> Iterator[Measurement]:  # fmt: skip
    """Rank 0 saves ``tree`` and loads it back ``repeats`` times, checking every load; the
    other ranks wait at the benchmark's barrier (rank 0 saves, as DDP scripts do)."""
    if run.ctx.rank != 0:
        return
    expected = io.sample(tree, run.cfg.num_checked)  # the state does not change between rounds
    saves, loads = [], []
    for _ in range(run.cfg.repeats):
        saves.append(wall_clock(lambda: save(tree, path))[1])
        io.drop_cache([path])  # outside the clock, as for DCP
        loaded, t = wall_clock(lambda: load(path))
        loads.append(t)
        io.check(expected, loaded, fmt=fmt)
        del loaded
        path.unlink()
    size = io.nbytes(tree)
    yield from _io_measurements(run, fmt=fmt, size_bytes=size, saves=saves, loads=loads)


def _torch_save(state: dict[str, Any], path: Path) -> None:
    with open(path, "wb") as fh:
        torch.save(state, fh)
    io.fsync_files([path])


def _safetensors_save(weights: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    save_file(weights, str(path))
    io.fsync_files([path])


def _safetensors_format(run: _Run) -> Iterator[Measurement]:
    from safetensors.torch import load_file

    yield from _rank0_round_trips(
        run, fmt="safetensors", tree=io.unique(run.state["model"]),
        path=run.root / "model.safetensors", save=_safetensors_save,
        load=lambda path: load_file(str(path), device="cpu"),
    )  # fmt: skip


def _dcp_format(run: _Run) -> Iterator[Measurement]:
    _replicate(run)  # once: saves and loads leave the state as it is
    expected = io.sample(run.state, run.cfg.num_checked)
    saves, loads = [], []
    for r in range(run.cfg.repeats):
        save_s, load_s = _dcp_round(run, path=run.root / f"dcp-{r}", expected=expected)
        saves.append(save_s)
        loads.append(load_s)
    if run.ctx.rank == 0:
        yield from _io_measurements(
            run, fmt="dcp", size_bytes=run.size_bytes, saves=saves, loads=loads
        )


def _dcp_round(run: _Run, *, path: Path, expected: dict[str, torch.Tensor]) -> tuple[float, float]:
    """One synchronous DCP save and load into zeroed tensors, checked; seconds of each."""
    import torch.distributed.checkpoint as dcp

    save_s = _collective_time(
        run, lambda: dcp.save(run.state, checkpoint_id=path, process_group=run.group)
    )
    io.drop_cache(io.files(path))  # DCP fsyncs its files itself, inside the clock
    target = io.zeros_like(run.state)
    load_s = _collective_time(
        run, lambda: dcp.load(target, checkpoint_id=path, process_group=run.group)
    )
    io.check(expected, target, fmt="dcp")
    run.ctx.barrier()
    if run.ctx.rank == 0:
        shutil.rmtree(path)
    return save_s, load_s


def _replicate(run: _Run) -> None:
    """Rank 0's values on every rank, as DDP keeps them (each rank trains on its own batch
    here): DCP then writes each replicated tensor once and any rank's copy is the right one."""
    if run.group is None or run.ctx.world_size == 1:
        return
    with run.ctx.waiting_for_peers():
        for t in io.tensors(run.state).values():  # CPU tensors (AdamW's step) go through gloo
            dist.broadcast(t, src=0, group=run.group if t.device.type == "cpu" else None)


def _collective_time(run: _Run, fn: Callable[[], Any]) -> float:
    """Seconds from a common start until the last rank is done."""
    run.ctx.barrier()
    t0 = time.perf_counter()
    fn()
    run.ctx.barrier()
    return time.perf_counter() - t0


def _dcp_async_format(run: _Run) -> Iterator[Measurement]:
    blocks, stalls = [], []
    for r in range(run.cfg.repeats):
        block_s, stall_pct = _async_round(run, path=run.root / f"dcp-async-{r}")
        blocks.append(block_s)
        stalls.append(stall_pct)
    if run.ctx.rank != 0:
        return
    params: dict[str, ParamValue] = {
        "format": "dcp_async",
        "size_bytes": run.size_bytes,
        "num_ranks": run.ctx.world_size,
        "steps": run.cfg.stall_steps,
    }
    for metric, samples in (
        (CheckpointMetrics.async_block_s, blocks),
        (CheckpointMetrics.async_stall_pct, stalls),
    ):
        stats = Stats.from_samples(samples)
        yield run.ctx.measurement(metric, value=stats.median, params=params, stats=stats)


def _async_round(run: _Run, *, path: Path) -> tuple[float, float]:
    """Seconds async_save blocks, and the % by which steps slow down while it writes."""
    import torch.distributed.checkpoint as dcp

    quiet = _step_times(run)
    _replicate(run)
    expected = io.sample(run.state["model"], run.cfg.num_checked)
    run.ctx.barrier()
    response: Any  # a Future, or an AsyncSaveResponse holding one (upload_completion)
    response, block_s = wall_clock(
        lambda: dcp.async_save(run.state, checkpoint_id=path, process_group=run.group)
    )
    busy = _step_times(run)
    getattr(response, "upload_completion", response).result()
    run.ctx.barrier()
    _check_async(run, path=path, expected=expected)
    run.ctx.barrier()
    if run.ctx.rank == 0:
        shutil.rmtree(path)
    # stall % = (mean step time during the save / mean step time without one - 1) x 100
    return block_s, 100.0 * (sum(busy) / sum(quiet) - 1.0)


def _step_times(run: _Run) -> list[float]:
    out = []
    for _ in range(run.cfg.stall_steps):
        synchronize(run.ctx.device)
        t0 = time.perf_counter()
        run.step.step([run.batch])
        synchronize(run.ctx.device)
        out.append(time.perf_counter() - t0)
    return out


def _check_async(run: _Run, *, path: Path, expected: dict[str, torch.Tensor]) -> None:
    """Load the sampled model tensors back: the values at the call, not after later steps."""
    import torch.distributed.checkpoint as dcp

    model = run.state["model"]
    target = {"model": {k: torch.zeros_like(model[k]) for k in expected}}
    dcp.load(target, checkpoint_id=path, process_group=run.group)
    io.check({f"model/{k}": v for k, v in expected.items()}, target, fmt="dcp_async")


def _free_space(run: _Run) -> Measurement:
    usage = shutil.disk_usage(run.root)
    if usage.free < run.size_bytes:
        raise RuntimeError(
            f"checkpoint: {run.root} has {usage.free / 1e9:.1f} GB free, the "
            f"checkpoint needs {run.size_bytes / 1e9:.3g} GB"
        )
    params: dict[str, ParamValue] = {
        "directory": str(run.root.parent),
        "filesystem": io.filesystem_of(run.root),
        "checkpoint_bytes": run.size_bytes,
    }
    return run.ctx.measurement(
        CheckpointMetrics.free_space_gb, value=usage.free / 1e9, params=params
    )


_FORMATS: dict[Format, Callable[[_Run], Iterator[Measurement]]] = {
    "torch": _torch_format,
    "safetensors": _safetensors_format,
    "dcp": _dcp_format,
    "dcp_async": _dcp_async_format,
}
