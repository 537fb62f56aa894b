"""Start workers, or join as one.

Outside a launcher, ``clusterbench run`` starts one worker per GPU (or 2 CPU workers) through
torch's elastic launch API, the engine behind ``torchrun``.  Under ``torchrun``, ``srun`` or
``mpirun`` each process joins the run as a worker, its rank read from the launcher's variables.

A launcher ends its workers with SIGTERM (torchrun, when one of a node's workers dies, stops
the others); :func:`on_sigterm` lets a joined worker say what happened before it goes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "LauncherEnv",
    "WorkerFailure",
    "detect_launcher",
    "export_dist_env",
    "launch_local",
    "on_sigterm",
    "start_fork_server",
]

LauncherKind = Literal["torchrun", "slurm", "mpi"]
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True, slots=True, kw_only=True)
class LauncherEnv:
    kind: LauncherKind
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerFailure:
    """A worker that ended badly, as the launcher saw it."""

    rank: int
    exitcode: int
    message: str


def _int(env: Mapping[str, str], *names: str, default: int | None = None) -> int | None:
    for name in names:
        if env.get(name, "").strip():
            return int(env[name])
    return default


def detect_launcher(env: Mapping[str, str] | None = None) -> LauncherEnv | None:
    """The launcher this process runs under, or None when started by hand."""
    env = os.environ if env is None else env
    port = _int(env, "MASTER_PORT")
    if "RANK" in env and "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        return LauncherEnv(
            kind="torchrun",
            rank=int(env["RANK"]),
            world_size=world,
            local_rank=_int(env, "LOCAL_RANK", default=0) or 0,
            local_world_size=_int(env, "LOCAL_WORLD_SIZE", default=world) or world,
            master_addr=env.get("MASTER_ADDR"),
            master_port=port,
        )
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        return LauncherEnv(
            kind="mpi",
            rank=int(env["OMPI_COMM_WORLD_RANK"]),
            world_size=int(env["OMPI_COMM_WORLD_SIZE"]),
            local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", default=0) or 0,
            local_world_size=_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", default=1) or 1,
            master_addr=env.get("MASTER_ADDR"),
            master_port=port,
        )
    # srun sets the step's variables; a batch script alone (no srun) has no SLURM_STEP_NUM_TASKS
    if "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env and "SLURM_LOCALID" in env:
        return LauncherEnv(
            kind="slurm",
            rank=int(env["SLURM_PROCID"]),
            world_size=int(env["SLURM_STEP_NUM_TASKS"]),
            local_rank=int(env["SLURM_LOCALID"]),
            local_world_size=_slurm_tasks_on_node(env),
            master_addr=env.get("MASTER_ADDR") or env.get("SLURM_LAUNCH_NODE_IPADDR"),
            master_port=port or DEFAULT_MASTER_PORT + int(env.get("SLURM_JOB_ID", "0")) % 1000,
        )
    return None


def _slurm_tasks_on_node(env: Mapping[str, str]) -> int:
    # SLURM_STEP_TASKS_PER_NODE looks like "4(x2),3"; the node's own count is SLURM_TASKS_PER_NODE
    # only on homogeneous steps, so fall back to the first entry.
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "1"
    return int(spec.split(",")[0].split("(")[0])


def export_dist_env(launcher: LauncherEnv) -> None:
    """Set the variables torch.distributed's env:// rendezvous reads."""
    if launcher.world_size > 1 and not launcher.master_addr:
        raise ValueError(
            f"running under {launcher.kind} but MASTER_ADDR is not set: export MASTER_ADDR "
            "(the first node's address) and MASTER_PORT on every rank"
        )
    os.environ.update(
        {
            "RANK": str(launcher.rank),
            "WORLD_SIZE": str(launcher.world_size),
            "LOCAL_RANK": str(launcher.local_rank),
            "LOCAL_WORLD_SIZE": str(launcher.local_world_size),
            "MASTER_ADDR": launcher.master_addr or "127.0.0.1",
            "MASTER_PORT": str(launcher.master_port or DEFAULT_MASTER_PORT),
        }
    )


def launch_local(
    entrypoint: Callable[..., Any],
    *args: Any,
    nproc: int,
    run_id: str,
    log_dir: Path,
) -> list[WorkerFailure]:
    """Run ``entrypoint(*args)`` in ``nproc`` local workers; return the failures (empty: fine).

    Rank 0 keeps the terminal (for its progress bars); the other ranks' output goes to files
    under ``log_dir``.  A worker that fails ends the others: no restarts.

    Workers are forked from a fork server that imported ``entrypoint``'s module (and torch with
    it) once, instead of each spawned worker importing them again: on a 2-core machine three
    concurrent ``--only memory`` CPU runs took 13.4-13.5 s against 16.2-18.7 s spawned.  A fork
    server is started once per process and never initialises CUDA; each worker still sees this
    process's environment and working directory as they are now (:func:`_as_launched`).

    CPU workers are not forked from this process itself, though that spares the fork server's
    import of torch (1.5 CPU-s a run): by then torch's elastic agent runs threads (its
    store's), and a clean CI pass hung in the rendezvous of three CPU workers forked so (not
    seen again in 12 runs: a lock held across a fork hangs at random).
    """
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    logs = DefaultLogsSpecs(
        log_dir=str(log_dir), redirects={r: Std.ALL for r in range(1, nproc)}, tee=Std.NONE
    )
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=run_id,
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        rdzv_configs={"timeout": 120},
        max_restarts=0,
        monitor_interval=0.1,
        start_method="forkserver",
        logs_specs=logs,
    )
    start_fork_server(entrypoint.__module__)
    try:
        with _torch_launcher_logs_held():
            elastic_launch(config, _as_launched)(dict(os.environ), os.getcwd(), entrypoint, *args)
    except ChildFailedError as exc:
        return [
            WorkerFailure(rank=rank, exitcode=f.exitcode, message=_failure_message(f))
            for rank, f in sorted(exc.failures.items())
        ]
    return []


_TORCH_LAUNCHER_LOGGERS = ("torch.distributed.elastic", "torch.distributed.launcher")


@contextlib.contextmanager
def _torch_launcher_logs_held() -> Iterator[None]:
    """Keep torch's elastic agent and launcher from logging to the terminal what the run says
    itself, one line each: a worker's failure, or on Ctrl-C ``Received 2 death signal,
    shutting down workers``.  Each of their loggers sets its own level (``LOGLEVEL``, else
    WARNING), so a level on the parent logger does not reach them; their records are stopped
    at the parents instead, which send them nowhere (a NullHandler) and not further up."""
    held = [logging.getLogger(name) for name in _TORCH_LAUNCHER_LOGGERS]
    propagate = [logger.propagate for logger in held]
    nowhere = logging.NullHandler()
    for logger in held:
        logger.addHandler(nowhere)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, was in zip(held, propagate, strict=True):
            logger.removeHandler(nowhere)
            logger.propagate = was


def start_fork_server(worker_module: str = "clusterbench.pipeline.rank") -> None:
    """Start the fork server that the workers are forked from, importing ``worker_module``
    (and torch with it), unless it runs already.  Started early, its import overlaps this
    process's own (ensure_running returns once the server process exists; a worker asked of
    it waits for the import)."""
    import multiprocessing.forkserver

    multiprocessing.set_forkserver_preload([worker_module, __name__])
    multiprocessing.forkserver.ensure_running()


_ENV_AT_START = dict(os.environ)
"""This process's environment when it imported this module: in a fork server, the one its
workers inherit before the launcher adds their own variables (RANK, MASTER_ADDR, ...)."""


def _as_launched(
    environ: dict[str, str], cwd: str, entrypoint: Callable[..., Any], *args: Any
) -> Any:
    """In a worker: take the launching process's environment and directory as they were at the
    launch (the fork server's are those of its own start), keep the variables the launcher set
    for this worker, then run ``entrypoint(*args)``."""
    own = {k: v for k, v in os.environ.items() if _ENV_AT_START.get(k) != v}
    os.environ.clear()
    os.environ.update(environ)
    os.environ.update(own)
    os.chdir(cwd)
    return entrypoint(*args)


def _failure_message(failure: Any) -> str:
    message = getattr(failure, "message", "") or ""
    if isinstance(message, dict):
        message = str(message.get("message", "")) or ""
    text = str(message).strip()
    # torch's placeholder when the worker left no error file: not information
    if not text or text.startswith("To enable traceback"):
        return ""
    return text.splitlines()[0]


SIGINT_BEFORE_S = 5.0
"""A SIGTERM this soon after a SIGINT is the launcher passing on a Ctrl-C."""


def on_sigterm(callback: Callable[[bool], None]) -> None:
    """Call ``callback(interrupted)`` in a thread of its own when this process gets SIGTERM;
    ``interrupted``: a SIGINT came just before it (Ctrl-C, which torchrun passes on as SIGTERM).

    A Python signal handler runs only when the main thread gets back to Python, which it may
    not do while it waits in a collective for a peer that died; Python's own C-level handler
    writes the signal's number to the wakeup file at once, and a thread reads it from there.
    Call from the main thread.  After a fork the child drops the wakeup file (it is not this
    process's to write).
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # the thread does the work
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    os.register_at_fork(after_in_child=_drop_wakeup_fd)
    watcher = threading.Thread(target=_watch_signals, args=(read_fd, callback),
                               name="clusterbench-sigterm", daemon=True)  # fmt: skip
    watcher.start()


def _drop_wakeup_fd() -> None:
    with contextlib.suppress(ValueError):  # forked from another thread than the main one
        signal.set_wakeup_fd(-1)


def _watch_signals(fd: int, callback: Callable[[bool], None]) -> None:
    sigint_at: float | None = None
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        for signum in data:
            if signum == signal.SIGINT:
                sigint_at = time.monotonic()
            elif signum == signal.SIGTERM:
                callback(sigint_at is not None and time.monotonic() - sigint_at < SIGINT_BEFORE_S)
                return
