"""One round of each checkpoint format: save a state, load it back, check it; seconds of each.

- ``torch``: ``torch.save`` / ``torch.load(map_location="cpu")`` on rank 0, as DDP scripts do;
- ``safetensors``: the model weights (shared tensors once) with ``save_file`` / ``load_file``,
  each loaded tensor copied into the host tensors it restores (what ``load_state_dict`` does):
  ``load_file`` maps the file and reads a tensor's bytes only when it is touched, so without
  the copy its clock would stop before most of the file is read (on a 256 MiB file: 0.09 s
  to map it, 0.2 s more to touch every tensor, against 0.14 s to read it whole);
- ``dcp``: ``torch.distributed.checkpoint.save`` / ``load`` on every rank.  The state is
  replicated (plain DDP-style): DCP's planner de-duplicates replicated tensors and spreads the
  writes over the ranks, so each tensor is written once; every rank loads the whole state;
- ``dcp_async``: ``async_save``: how long it blocks (staging to host memory), how long until
  its files are written, and how much slower training steps run meanwhile.

Every save is made durable (fsync) before its clock stops, and its files are dropped from the
page cache (posix_fadvise DONTNEED) before the load, so loads read the storage, not memory; on
tmpfs both are memory copies.  Loaded tensors are compared with a sample of the saved ones.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from clusterbench.benchmarks.checkpoint import io as io
from clusterbench.benchmarks.training.strategies import Trainer
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import synchronize, wall_clock

if TYPE_CHECKING:
    from clusterbench.benchmarks.training.workload import Batch

__all__ = [
    "SPECS",
    "FormatSpec",
    "Run",
    "gloo_group",
    "replicate",
    "shared_dir",
    "state_dict_of",
]

Expected = dict[str, torch.Tensor]


@dataclass(kw_only=True)
class Run:
    """What every format needs: the context, the training step and state, the folder, DCP's
    process group."""

    ctx: DistContext
    step: Trainer
    batch: Batch
    state: dict[str, Any]
    root: Path
    group: Any
    num_checked: int
    stall_steps: int
    quiet_step_s: list[float] = field(default_factory=list)
    """Step times without a save running, measured once (the async rounds' baseline)."""


Round = Callable[[Run, Any, Path, Expected], dict[str, float]]


@dataclass(frozen=True, kw_only=True, slots=True)
class FormatSpec:
    """One format's facts: what it saves, who runs it, what one round times."""

    name: str
    ops: tuple[str, ...]
    """The seconds one round returns, fitted over the sizes (the stopping rule watches them)."""
    weights_only: bool
    """Saves the model's weights (safetensors), not the optimizer state."""
    collective: bool
    """Every rank takes part (DCP); otherwise rank 0 alone."""
    round_: Round


def state_dict_of(step: Trainer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(step.model, step.optimizer)
    return {"model": model_sd, "optim": optim_sd}


@contextmanager
def shared_dir(ctx: DistContext, directory: str) -> Iterator[Path]:
    """One folder for all ranks under ``directory`` ('' = the temp dir), made by rank 0;
    every rank removes it at the end."""
    if directory and not Path(directory).is_dir():
        raise ValueError(f"checkpoint: directory {directory!r} is not an existing folder")
    made = (
        tempfile.mkdtemp(prefix="clusterbench-ckpt-", dir=directory or None)
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
def gloo_group(ctx: DistContext) -> Iterator[Any]:
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


def _torch_save(state: Any, path: Path) -> None:
    with open(path, "wb") as fh:
        torch.save(state, fh)
    io.fsync_files([path])


def _safetensors_save(weights: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    save_file(weights, str(path))
    io.fsync_files([path])


def _file_round(
    *, fmt: str, tree: Any, path: Path, expected: Expected, save: Callable[[Any, Path], None],
    load: Callable[[Path], Any],
) -> dict[str, float]:  # fmt: skip
    """Rank 0 saves ``tree`` to one file and loads it back, checked (as DDP scripts do)."""
    save_s = wall_clock(lambda: save(tree, path))[1]
    io.drop_cache([path])  # outside the clock, as for DCP
    loaded, load_s = wall_clock(lambda: load(path))
    io.check(expected, loaded, fmt=fmt)
    del loaded
    path.unlink()
    return {"save": save_s, "load": load_s}


def _torch_round(run: Run, tree: Any, path: Path, expected: Expected) -> dict[str, float]:
    return _file_round(
        fmt="torch", tree=tree, path=path, expected=expected, save=_torch_save,
        load=lambda p: torch.load(p, map_location="cpu", weights_only=True),
    )  # fmt: skip


def _safetensors_round(run: Run, tree: Any, path: Path, expected: Expected) -> dict[str, float]:
    from safetensors.torch import load_file

    # the host tensors the load restores, made (and their pages touched) outside the clock
    target = {k: torch.zeros(v.shape, dtype=v.dtype) for k, v in tree.items()}

    def restore(p: Path) -> dict[str, torch.Tensor]:
        for key, t in load_file(str(p), device="cpu").items():
            target[key].copy_(t)
        return target

    return _file_round(
        fmt="safetensors", tree=tree, path=path, expected=expected, save=_safetensors_save,
        load=restore,
    )  # fmt: skip


def _dcp_round(run: Run, tree: Any, path: Path, expected: Expected) -> dict[str, float]:
    """One synchronous DCP save and load into zeroed tensors, checked; seconds of each."""
    import torch.distributed.checkpoint as dcp

    save_s = _collective_time(
        run, lambda: dcp.save(tree, checkpoint_id=path, process_group=run.group)
    )
    io.drop_cache(io.files(path))  # DCP fsyncs its files itself, inside the clock
    target = io.zeros_like(tree)
    load_s = _collective_time(
        run, lambda: dcp.load(target, checkpoint_id=path, process_group=run.group)
    )
    io.check(expected, target, fmt="dcp")
    run.ctx.barrier()
    if run.ctx.rank == 0:
        shutil.rmtree(path)
    return {"save": save_s, "load": load_s}


def replicate(run: Run) -> None:
    """Rank 0's values on every rank, as DDP keeps them (each rank trains on its own batch
    here): DCP then writes each replicated tensor once and any rank's copy is the right one."""
    if run.group is None or run.ctx.world_size == 1:
        return
    with run.ctx.waiting_for_peers():
        for t in io.tensors(run.state).values():  # CPU tensors (AdamW's step) go through gloo
            dist.broadcast(t, src=0, group=run.group if t.device.type == "cpu" else None)


def _collective_time(run: Run, fn: Callable[[], Any]) -> float:
    """Seconds from a common start until the last rank is done."""
    run.ctx.barrier()
    t0 = time.perf_counter()
    fn()
    run.ctx.barrier()
    return time.perf_counter() - t0


def _async_round(run: Run, tree: Any, path: Path, expected: Expected) -> dict[str, float]:
    """Seconds async_save blocks and until its files are written, and the % by which steps
    slow down meanwhile (training changes the state: ``expected`` is sampled here)."""
    import torch.distributed.checkpoint as dcp

    if not run.quiet_step_s:
        run.quiet_step_s = _step_times(run)
    replicate(run)
    expected = io.sample(tree["model"], run.num_checked)
    run.ctx.barrier()
    done_at: list[float] = []
    t0 = time.perf_counter()
    response: Any = dcp.async_save(tree, checkpoint_id=path, process_group=run.group)
    block_s = time.perf_counter() - t0
    # a Future, or an AsyncSaveResponse holding one (upload_completion)
    future = getattr(response, "upload_completion", response)
    future.add_done_callback(lambda _: done_at.append(time.perf_counter()))
    busy = _step_times(run)
    future.result()
    total_s = (done_at[0] if done_at else time.perf_counter()) - t0
    run.ctx.barrier()
    _check_async(run, tree=tree, path=path, expected=expected)
    run.ctx.barrier()
    if run.ctx.rank == 0:
        shutil.rmtree(path)
    # stall % = (mean step time during the save / mean step time without one - 1) x 100
    stall_pct = 100.0 * (statistics.fmean(busy) / statistics.fmean(run.quiet_step_s) - 1.0)
    return {"async_block": block_s, "async_total": total_s, "stall_pct": stall_pct}


def _step_times(run: Run) -> list[float]:
    out = []
    for _ in range(run.stall_steps):
        synchronize(run.ctx.device)
        t0 = time.perf_counter()
        run.step.step([run.batch])
        synchronize(run.ctx.device)
        out.append(time.perf_counter() - t0)
    return out


def _check_async(run: Run, *, tree: Any, path: Path, expected: Expected) -> None:
    """Load the sampled model tensors back: the values at the call, not after later steps."""
    import torch.distributed.checkpoint as dcp

    model = tree["model"]
    target = {"model": {k: torch.zeros_like(model[k]) for k in expected}}
    dcp.load(target, checkpoint_id=path, process_group=run.group)
    io.check({f"model/{k}": v for k, v in expected.items()}, target, fmt="dcp_async")


SPECS: dict[str, FormatSpec] = {
    spec.name: spec
    for spec in (
        FormatSpec(name="torch", ops=("save", "load"), weights_only=False, collective=False,
                   round_=_torch_round),
        FormatSpec(name="safetensors", ops=("save", "load"), weights_only=True,
                   collective=False, round_=_safetensors_round),
        FormatSpec(name="dcp", ops=("save", "load"), weights_only=False, collective=True,
                   round_=_dcp_round),
        FormatSpec(name="dcp_async", ops=("async_block", "async_total"), weights_only=False,
                   collective=True, round_=_async_round),
    )
}  # fmt: skip
"""Every format by name (checkpoint.FORMATS)."""
