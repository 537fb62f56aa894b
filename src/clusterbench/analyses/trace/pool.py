"""Many ranks' traces read at once: a pool of processes on this machine, or Ray tasks on a
cluster whose nodes see the traces on shared storage, each file read by
:func:`~clusterbench.analyses.trace.file.read_trace` and sent back as its compact
:class:`~clusterbench.analyses.trace.file.RankTrace` (flat arrays: some 22 bytes per activity
kept, about 1 MB for a 100 MB trace).

The pool's processes start from a fork server (``forkserver``), not by forking this process:
the caller may hold threads (a progress bar's, Ray's), and a fork copies their locks in
whatever state they are in; a fork server is a clean, single-threaded process, and starting a
worker from it costs a fork, not a fresh interpreter (``spawn``, the only way on Windows and
where no fork server is, is used there).  Each worker reads at most
``_FILES_PER_WORKER`` files before a fresh one replaces it (``max_tasks_per_child``), so
that what a large trace left in its heap does not stay for the run.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from clusterbench.analyses.trace.file import RankTrace, TraceError, read_trace

__all__ = ["Progress", "default_jobs", "process_pool", "read_traces"]

Progress = Callable[[int, int, Path], None]
"""Called as each file is read (in the order they finish): files done, files in all, the file."""

Read = RankTrace | TraceError

_FILES_PER_WORKER = 64
"""Files a pool worker reads before a fresh one takes its place."""
_BYTES_PER_WORKER = 16 << 20
"""Without ``jobs``, one process per 16 MiB of trace at most: starting the pool (its fork
server and workers) takes some 0.35 s on a 2-core machine, the time one core reads 20 MB in,
so smaller jobs are read in this process."""


def default_jobs() -> int:
    """The cores this process may run on (its affinity: a Slurm or cgroup share, not the
    machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def read_traces(
    files: Sequence[Path],
    *,
    jobs: int | None = None,
    ray_address: str | None = None,
    default_rank: int | None = None,
    progress: Progress | None = None,
) -> list[Read]:
    """Every file read as :func:`~clusterbench.analyses.trace.file.read_trace` reads it, one
    entry per file in the files' order: its RankTrace, or the TraceError that names it (a
    file that cannot be read, or whose reading process died: killed, out of memory).

    ``jobs`` processes at once (default: the usable cores, at most one per 16 MiB of trace;
    never more than the files; 1: in this process).  ``ray_address``: as Ray tasks on that
    cluster instead (``ray.init(address=...)``; every node must see the files at the same
    paths and have clusterbench installed).  ValueError for ``jobs`` below 1."""
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    if ray_address is not None:
        return _on_ray(files, address=ray_address, default_rank=default_rank, progress=progress)
    workers = min(jobs or default_jobs(), len(files))
    if jobs is None:
        workers = min(workers, max(1, _size(files) // _BYTES_PER_WORKER))
    if workers <= 1:
        return _in_process(files, default_rank=default_rank, progress=progress)
    return _in_pool(files, workers=workers, default_rank=default_rank, progress=progress)


def _size(files: Sequence[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += Path(path).stat().st_size
        except OSError:
            continue  # read_trace says what is wrong with it
    return total


def _read_one(path: Path, default_rank: int | None) -> Read:
    """What a worker runs: the file's RankTrace, or its TraceError (returned, so that it
    crosses back without a traceback)."""
    try:
        return read_trace(path, default_rank=default_rank)
    except TraceError as exc:
        return exc
    except MemoryError:
        return TraceError(f"{path}: out of memory reading it")


def _in_process(
    files: Sequence[Path], *, default_rank: int | None, progress: Progress | None
) -> list[Read]:
    out: list[Read] = []
    for path in files:
        out.append(_read_one(path, default_rank))
        if progress is not None:
            progress(len(out), len(files), path)
    return out


def _context() -> BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes started as the reading's are (fork server, no cyclic
    garbage collection), for other per-rank work.  Its workers are not replaced after a number
    of tasks: a pool whose workers left after ``max_tasks_per_child`` was seen to wait forever
    for results no worker was left to give (Python 3.11, 256 tasks, 2 workers)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=gc.disable)


def _pool(workers: int) -> ProcessPoolExecutor:
    # the reader makes no reference cycles: the collector's passes over each batch's
    # dicts cost some 7% of a read (1.63 s against 1.51 s for 100 MB) and free nothing
    options: dict[str, Any] = {"mp_context": _context(), "initializer": gc.disable}
    if sys.version_info >= (3, 11):
        options["max_tasks_per_child"] = _FILES_PER_WORKER
    return ProcessPoolExecutor(max_workers=workers, **options)


def _in_pool(
    files: Sequence[Path], *, workers: int, default_rank: int | None, progress: Progress | None
) -> list[Read]:
    """The files read ``workers`` at a time, at most that many handed out at once: where a
    worker dies, the pool breaks (concurrent.futures fails every file it holds), and only
    those handed out are suspects; each is read again alone, so that the one that killed its
    worker is the one that gets the error."""
    out: dict[int, Read] = {}

    def done(i: int, read: Read) -> None:
        out[i] = read
        if progress is not None:
            progress(len(out), len(files), files[i])

    todo = list(range(len(files)))[::-1]
    while todo:
        suspects = _until_broken(files, todo, workers=workers, default_rank=default_rank, done=done)
        for i, read in _alone(files, suspects, workers=workers, default_rank=default_rank):
            done(i, read)
    return [out[i] for i in range(len(files))]


def _until_broken(
    files: Sequence[Path],
    todo: list[int],
    *,
    workers: int,
    default_rank: int | None,
    done: Callable[[int, Read], None],
) -> list[int]:
    """Read the files ``todo`` (popped from its end) in one pool until they are read or the
    pool breaks; the files it held when it broke."""
    held: dict[Future[Read], int] = {}
    with _pool(workers) as pool:
        while todo or held:
            while todo and len(held) < workers:
                i = todo.pop()
                held[pool.submit(_read_one, files[i], default_rank)] = i
            finished, _ = wait(held, return_when=FIRST_COMPLETED)
            broken = False
            for future in finished:
                try:
                    read = future.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                done(held.pop(future), read)
            if broken:
                return sorted(held.values())
    return []


def _alone(
    files: Sequence[Path], suspects: list[int], *, workers: int, default_rank: int | None
) -> list[tuple[int, Read]]:
    """Each file read in a pool of its own (``workers`` such pools at once)."""
    out: list[tuple[int, Read]] = []
    for first in range(0, len(suspects), workers):
        batch = suspects[first : first + workers]
        pools = [_pool(1) for _ in batch]
        try:
            futures = [
                p.submit(_read_one, files[i], default_rank)
                for p, i in zip(pools, batch, strict=True)
            ]
            for i, future in zip(batch, futures, strict=True):
                try:
                    out.append((i, future.result()))
                except BrokenProcessPool:
                    why = "the process reading it ended abruptly (killed, or out of memory)"
                    out.append((i, TraceError(f"{files[i]}: {why}")))
        finally:
            for p in pools:
                p.shutdown()
    return out


def _on_ray(
    files: Sequence[Path], *, address: str, default_rank: int | None, progress: Progress | None
) -> list[Read]:
    """One Ray task per file (one CPU each, not retried), the results gathered as they end."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(_read_one)
        refs = {task.remote(Path(p).absolute(), default_rank): i for i, p in enumerate(files)}
        out: dict[int, Read] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            i = refs[ready[0]]
            read = out[i] = _ray_result(ray, ready[0], files[i])
            if isinstance(read, RankTrace):
                read.path = files[i]  # as given, not as the nodes were sent it
            if progress is not None:
                progress(len(out), len(files), files[i])
        return [out[i] for i in range(len(files))]
    finally:
        if started:
            ray.shutdown()


def _ray_result(ray: Any, ref: Any, path: Path) -> Read:
    """The task's result; a TraceError naming the file where Ray lost its worker, its node or
    its result."""
    try:
        result: Read = ray.get(ref)
    except ray.exceptions.RayTaskError:
        raise  # an error of the reading code itself, not of the file: shown whole
    except ray.exceptions.RayError as exc:
        why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        return TraceError(f"{path}: the Ray task reading it failed ({type(exc).__name__}: {why})")
    return result
