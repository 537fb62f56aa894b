"""Start workers, or join as one.

Outside a launcher, ``clusterbench run`` starts one worker per GPU (or 2 CPU workers) itself:
processes of a multiprocessing fork server (:func:`launch_local`), on the standard library, so
that the starting process never imports torch.  Under ``torchrun``, ``srun`` or ``mpirun`` each
process joins the run as a worker, its rank read from the launcher's variables.

A launcher ends its workers with SIGTERM (torchrun, when one of a node's workers dies, stops
the others); :func:`on_sigterm` lets a joined worker say what happened before it goes.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

__all__ = [
    "Interrupted",
    "LauncherEnv",
    "WorkerFailure",
    "detect_launcher",
    "export_dist_env",
    "in_fork_server",
    "launch_local",
    "on_sigterm",
    "start_fork_server",
    "stop_fork_server",
    "wait_for_workers",
]

T = TypeVar("T")
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
    entrypoint: Callable[..., Any] | str,
    *args: Any,
    nproc: int,
    log_dir: Path,
) -> list[WorkerFailure]:
    """Run ``entrypoint(*args)`` in ``nproc`` local workers; return the failure (empty: fine).

    ``entrypoint``: a function, or ``"module:name"`` of one, so that this process need not
    import a module that imports torch (``clusterbench run`` never does: the workers' fork
    server imports it once, beside this process's own start, which then saves its own import
    and its exit; see docs/architecture.md).

    Each worker is a process of the fork server of :func:`start_fork_server`, given this
    process's environment and working directory as they are now plus torch.distributed's
    env:// variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT: rank 0 hosts the world's store there).  Rank 0 keeps the terminal (for its
    progress bars); rank r's stdout and stderr go to ``log_dir/rank-NNNNN.stdout.log`` and
    ``.stderr.log`` (made here: a disk with no room for them is this function's OSError,
    before any worker starts).

    A worker is done once ``entrypoint`` returned: it says so through a pipe, and this
    function returns once every worker is done, while their processes still end (a GPU
    process's end tears down its CUDA context): their exit overlaps what the caller does
    next, and this process waits for them at its own exit (multiprocessing
    joins its children then), or at :func:`wait_for_workers`.

    When a worker ends with an exit code other than 0, the others get SIGTERM (SIGKILL
    :data:`STOP_GRACE_S` later): no restarts, and the one failure returned is the first seen.
    SIGINT or SIGTERM to this process stops the workers with the same signal (SIGINT after
    :data:`SIGINT_GRACE_S`, since a terminal's Ctrl-C reaches them already) and raises
    :class:`Interrupted` (from the main thread; see :func:`_signals_raise_interrupted`).
    """
    wait_for_workers()  # an earlier launch's workers: their devices free before the next
    module = entrypoint.partition(":")[0] if isinstance(entrypoint, str) else entrypoint.__module__
    start_fork_server(module)
    streams = _open_logs(log_dir, nproc=nproc)
    ctx = multiprocessing.get_context("forkserver")
    environ, cwd, port = dict(os.environ), os.getcwd(), _free_port()
    workers: list[multiprocessing.process.BaseProcess] = []
    done: list[multiprocessing.connection.Connection] = []
    try:
        with _signals_raise_interrupted():
            for rank in range(nproc):
                env = {**environ, **_rank_env(rank, nproc=nproc, port=port)}
                reader, writer = ctx.Pipe(duplex=False)
                worker = ctx.Process(
                    target=_run_worker, name=f"clusterbench-rank-{rank}",
                    args=(env, cwd, streams.get(rank), _error_path(log_dir, rank), entrypoint,
                          args, writer),
                )  # fmt: skip
                worker.start()
                writer.close()  # the worker holds its own end: at its end, this end reads EOF
                workers.append(worker)
                done.append(reader)
            failure = _first_failure(workers, done, log_dir=log_dir)
    except BaseException as exc:
        _stop(workers, exc.signum if isinstance(exc, Interrupted) else signal.SIGTERM)
        raise
    finally:
        for reader in done:
            reader.close()
    if failure is not None:
        _stop(workers, signal.SIGTERM)
        return [failure]
    _ending.extend(workers)  # every one is done; their processes end by themselves
    return []


_ending: list[multiprocessing.process.BaseProcess] = []
"""Workers done with their work whose processes may still be ending."""


def wait_for_workers() -> None:
    """Wait until the processes of the workers that are done have ended; one that has not
    ended :data:`STOP_GRACE_S` after its word is killed (its work was done)."""
    while _ending:
        worker = _ending.pop()
        worker.join(STOP_GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join()


STOP_GRACE_S = 30.0
"""How long a stopped worker has to end before SIGKILL (torch's elastic agent waits as long)."""
SIGINT_GRACE_S = 2.0
"""On Ctrl-C, how long the workers have to end by themselves before this process passes the
SIGINT on: a terminal's Ctrl-C reaches every process of the group, and a second SIGINT could
interrupt a worker while it writes how it ended."""


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the process that launched the workers; they are stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise_interrupted() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` while this holds; only the main thread
    can hold them (from another thread, a Ctrl-C stays the main thread's KeyboardInterrupt)."""

    def interrupted(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    signums = (signal.SIGINT, signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    held = {sig: signal.signal(sig, interrupted) for sig in signums} if main else {}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def _rank_env(rank: int, *, nproc: int, port: int) -> dict[str, str]:
    """torch.distributed's env:// variables of a local worker (one node: group rank 0)."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        # torch's elastic agent sets this for its workers where it is not set (TearDown)
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


def _free_port() -> int:
    """A TCP port free on this host now, for rank 0's store.  Another process could take it
    before rank 0 binds it (torch's launchers choose their MASTER_PORT the same way); rank 0
    then fails and the run says so."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _open_logs(log_dir: Path, *, nproc: int) -> dict[int, tuple[str, str]]:
    """rank -> its stdout and stderr files, for ranks 1 and up, made now (empty)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    streams = {}
    for rank in range(1, nproc):
        paths = tuple(str(log_dir / f"rank-{rank:05d}.{name}.log") for name in ("stdout", "stderr"))
        for path in paths:
            Path(path).touch()
        streams[rank] = (paths[0], paths[1])
    return streams


def _error_path(log_dir: Path, rank: int) -> str:
    return str(log_dir / f"rank-{rank:05d}.error.txt")


def _first_failure(
    workers: list[multiprocessing.process.BaseProcess],
    done: list[multiprocessing.connection.Connection],
    *,
    log_dir: Path,
) -> WorkerFailure | None:
    """Wait until every worker is done (None: it said so, or it ended with exit code 0), or
    one has ended otherwise: the first seen (the lowest rank of those that end at once)."""
    waiting: dict[Any, int] = {}
    for rank, worker in enumerate(workers):
        waiting[worker.sentinel] = waiting[done[rank]] = rank
    finished: set[int] = set()
    while len(finished) < len(workers):
        ready = multiprocessing.connection.wait(list(waiting))
        for obj in sorted(ready, key=lambda obj: waiting[obj]):
            rank = waiting.pop(obj)
            if rank in finished:
                continue
            if obj is done[rank]:
                if _said_done(done[rank]):
                    finished.add(rank)
                continue  # it ended without a word: its exit code tells
            workers[rank].join()
            exitcode = workers[rank].exitcode
            if exitcode != 0:
                assert exitcode is not None
                message = _error_message(_error_path(log_dir, rank))
                return WorkerFailure(rank=rank, exitcode=exitcode, message=message)
            finished.add(rank)
    return None


def _said_done(reader: multiprocessing.connection.Connection) -> bool:
    try:
        return reader.recv_bytes() == _DONE
    except (EOFError, OSError):
        return False


_DONE = b"done"


def _stop(workers: list[multiprocessing.process.BaseProcess], signum: int) -> None:
    """End the workers still running with ``signum``; SIGKILL those left after STOP_GRACE_S,
    or at once when a second Ctrl-C cuts the wait short."""
    alive = [worker for worker in workers if worker.is_alive()]
    try:
        if alive and signum == signal.SIGINT:
            _join_all(alive, timeout_s=SIGINT_GRACE_S)
            alive = [worker for worker in alive if worker.is_alive()]
        for worker in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signum)  # type: ignore[arg-type]
        _join_all(alive, timeout_s=STOP_GRACE_S)
    finally:
        for worker in alive:
            if worker.is_alive():
                worker.kill()
                worker.join()


def _join_all(workers: list[multiprocessing.process.BaseProcess], *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))


def start_fork_server(worker_module: str = "clusterbench.pipeline.rank") -> None:
    """Start the fork server that the workers are forked from, importing ``worker_module``
    (and torch with it), unless it runs already.  Started early, its import overlaps this
    process's own (ensure_running returns once the server process exists; a worker asked of
    it waits for the import)."""
    import multiprocessing.forkserver

    multiprocessing.set_forkserver_preload([worker_module, __name__])
    multiprocessing.forkserver.ensure_running()


def stop_fork_server() -> None:
    """Stop the fork server started here, at once, where no worker will be asked of it (its
    import of torch would otherwise run on after this process ended)."""
    import multiprocessing.forkserver

    # the module's one server and its process id: CPython's, not a public name
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def in_fork_server(function: Callable[[], T]) -> T:
    """``function()`` run in a process of the workers' fork server, with this process's
    environment and working directory: a question only torch can answer, asked without this
    process importing torch (the server did)."""
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(_as_launched, dict(os.environ), os.getcwd(), function).result()


def _as_launched(environ: dict[str, str], cwd: str, function: Callable[[], T]) -> T:
    """In a process of the fork server (whose environment and directory are those of its own
    start): take the launching process's as they are at the launch, then run ``function``."""
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    return function()


def _run_worker(
    environ: dict[str, str],
    cwd: str,
    streams: tuple[str, str] | None,
    error_path: str,
    entrypoint: Callable[..., Any] | str,
    args: tuple[Any, ...],
    done: multiprocessing.connection.Connection,
) -> None:
    """One worker: its environment and directory, its output to ``streams`` (None: the
    terminal's, as the fork server has it), then ``entrypoint(*args)``, and then a word on
    ``done`` (the launcher goes on while this process ends).  An exception that ends it
    leaves its first line in ``error_path`` for the launcher, then ends the worker as it
    would have (its traceback on stderr, exit code 1)."""
    if streams is not None:
        for fd, path in zip((1, 2), streams, strict=True):
            target = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.dup2(target, fd)  # the file descriptors themselves: C libraries write there too
            os.close(target)
    function = _resolve(entrypoint)
    try:
        _as_launched(environ, cwd, lambda: function(*args))
    except Exception as exc:
        Path(error_path).write_text(f"{type(exc).__name__}: {exc}\n", encoding="utf-8")
        raise
    sys.stdout.flush()  # what it printed goes out before the launcher's next lines
    sys.stderr.flush()
    with contextlib.suppress(OSError):  # the launcher is gone: nobody to tell
        done.send_bytes(_DONE)


def _resolve(entrypoint: Callable[..., Any] | str) -> Callable[..., Any]:
    if not isinstance(entrypoint, str):
        return entrypoint
    module, _, name = entrypoint.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


def _error_message(path: str) -> str:
    """The first line of what ended a worker with an exception; '' where none was left."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text.splitlines()[0] if text else ""


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
