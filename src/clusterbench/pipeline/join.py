"""A worker's start, before its first benchmark: join the world, agree that the run may start.

The ranks agree that they may start: every rank (every node) came, they run the same
configuration, each could open its rank file; else rank 0 says why in one line (and, where it
can, in a results.json that says ``failed``) and every rank exits 3.  Under a launcher rank 0
makes the run folder and every rank learns it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.config import ConfigError
from clusterbench.exits import EXIT_RUN_ERROR
from clusterbench.pipeline.spec import RunSpec, prepare_run_dir, run_id_for
from clusterbench.runtime.dist import DistContext, JoinTimeout, init_distributed, set_rank_threads
from clusterbench.runtime.nccl_debug import debug_env
from clusterbench.runtime.records import (
    Error,
    Hello,
    RankLog,
    describe_write_error,
    read_rank_file,
)

__all__ = [
    "check_agreement",
    "check_nodes",
    "hard_exit",
    "join_world",
    "make_context",
    "nccl_logging",
    "open_rank_log",
    "share_run_dir",
]


def hard_exit(code: int) -> None:
    # Skip interpreter teardown: a peer may be gone, and NCCL/gloo destructors can block on it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def join_world(spec: RunSpec) -> DistContext:
    """The context of this rank once every rank has joined, or (srun/mpirun) one line naming
    the ranks that came within the join timeout, results.json failed, and exit 3."""
    try:
        return make_context(spec)
    except JoinTimeout as exc:
        if exc.report and int(os.environ["RANK"]) == 0:
            _report_start_failure(spec, message=str(exc), world_size=int(os.environ["WORLD_SIZE"]))
        elif exc.report:
            print(f"clusterbench: run failed: {exc}", file=sys.stderr)
        hard_exit(EXIT_RUN_ERROR)
        raise  # not reached: for the type checker


def check_nodes(ctx: DistContext, spec: RunSpec) -> None:
    """Fewer nodes than ``--expect-nodes`` joined (torchrun's rendezvous gave up waiting for
    the others): rank 0 names the nodes that came, every rank stops with exit 3."""
    expected = spec.expect_nodes
    if expected is None or ctx.num_nodes >= expected:
        return
    message = (
        f"only {ctx.num_nodes} of {expected} nodes joined the run: {', '.join(ctx.hosts)}; "
        f"the other {expected - ctx.num_nodes} did not join within the rendezvous' join "
        "timeout (start every node within it: clusterbench launch --join-timeout)"
    )
    try:
        if ctx.rank == 0:
            _report_start_failure(spec, message=message, world_size=ctx.world_size)
    finally:
        ctx.barrier()  # the other ranks wait for rank 0's report: their end would end it
    hard_exit(EXIT_RUN_ERROR)


def _report_start_failure(spec: RunSpec, *, message: str, world_size: int) -> None:
    """Rank 0, when the run cannot start: a run folder whose results.json says ``failed``
    with this one error, and one line on stderr."""
    from clusterbench.pipeline.finish import ResultsWriteError, finish  # the parent's, mostly

    local_rank = os.environ.get("LOCAL_RANK", "0")
    device = f"{'cuda' if spec.device_type == 'cuda' else 'cpu'}:{local_rank}"
    try:
        run_dir = prepare_run_dir(spec.out, workers=world_size)
        spec.run_dir, spec.run_id = str(run_dir), run_id_for(run_dir, spec.started)
        log = RankLog(run_dir, 0)
        log.write(Hello(host=socket.gethostname(), local_rank=int(local_rank), device=device))
        log.write(Error(benchmark=None, message=message))
        log.close()
        finish(spec, records=read_rank_file(log.path), failures=[], world_size=world_size,
                 flights={})  # fmt: skip
    except (ConfigError, ResultsWriteError, OSError) as exc:
        print(f"clusterbench: run failed: {message}; results not written: {exc}", file=sys.stderr)
        return
    print(f"clusterbench: run failed: {message}; results kept in {run_dir}", file=sys.stderr)


def open_rank_log(ctx: DistContext, spec: RunSpec, *, keep_unsent: bool) -> RankLog:
    """Every rank opens its partial file, and they agree on it: a rank that cannot (a full or
    failing disk) stops them all, rank 0 saying in one line which and why; exit 3."""
    run_dir = Path(spec.run_dir)
    log, error = None, None
    try:
        log = RankLog(run_dir, ctx.rank, keep_unsent=keep_unsent)
    except OSError as exc:
        path = run_dir / "ranks" / f"rank-{ctx.rank:05d}.jsonl"
        error = f"rank {ctx.rank} on host {ctx.host}: cannot write rank file: " + (
            describe_write_error(exc, path)
        )
    failed = [e for e in ctx.all_gather(error) if e]
    if log is not None and not failed:
        return log
    if ctx.rank == 0:
        more = f" (and {len(failed) - 1} other rank(s))" if len(failed) > 1 else ""
        print(f"clusterbench: error: {failed[0]}{more}", file=sys.stderr)
    if log is not None:
        log.close()
    hard_exit(EXIT_RUN_ERROR)
    raise AssertionError("not reached")


def nccl_logging(spec: RunSpec) -> bool:
    """Whether NCCL logs INFO to a file per rank, kept in the run folder: with --nccl-debug, and
    where a selected benchmark's settings ask for it (``Benchmark.nccl_log``: a tuning sweep,
    whose proof that a setting took effect is that log)."""
    wanted = any(
        registry.get(name).wants_nccl_log(settings)
        for name, settings in spec.config.benchmarks.items()
    )
    return (spec.nccl_debug or wanted) and spec.device_type == "cuda"


def make_context(spec: RunSpec) -> DistContext:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if nccl_logging(spec):
        # read once, at NCCL's first log line; the sweep alone needs no per-op (TUNING) lines
        os.environ.update(debug_env(rank, per_op=spec.nccl_debug))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if spec.device_type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"local rank {local_rank} has no GPU (only {torch.cuda.device_count()} visible)"
            )
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    set_rank_threads(local_world)  # without: 21 images/s decoded (docs/results/H200-level3.md)
    backend = "nccl" if spec.device_type == "cuda" else "gloo"
    host = socket.gethostname()
    init_distributed(backend=backend, device=device, timeout_s=spec.config.timeout_s,
                     join_timeout_s=spec.join_timeout_s, host=host)  # fmt: skip
    ctx = DistContext(
        run_dir=Path(spec.run_dir) if spec.run_dir else None,
        launcher=spec.launcher,
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        local_world_size=local_world,
        node_rank=0,
        num_nodes=1,
        host=host,
        device=device,
        backend=backend,
    )
    ctx.hosts = list(dict.fromkeys(ctx.all_gather(host)))
    ctx.node_rank, ctx.num_nodes = ctx.hosts.index(host), len(ctx.hosts)
    return ctx


def check_agreement(ctx: DistContext, spec: RunSpec) -> None:
    """Every rank must run the same clusterbench with the same configuration (nodes started
    by hand can differ); a mismatch stops every rank at once, before anything is written."""
    config = spec.config.to_dict()
    benchmarks = config.pop("benchmarks")  # their keys as --set names them: gemm.dtypes
    mine = _flat({"version": __version__, "device": spec.device_type, **config, **benchmarks})
    mine[_SELECTED] = ",".join(spec.config.benchmarks)
    everyone = ctx.all_gather((ctx.host, mine))
    _, first = everyone[0]
    differ: dict[str, list[str]] = {}
    for rank, (host, theirs) in enumerate(everyone):
        keys = sorted(k for k in first.keys() | theirs.keys() if first.get(k) != theirs.get(k))
        if _SELECTED in keys:  # the settings of benchmarks only one side runs say nothing more
            keys = [f"{_SELECTED} ({theirs[_SELECTED]} against {first[_SELECTED]})"]
        if keys:
            differ.setdefault(", ".join(keys[:4]) + (" ..." if len(keys) > 4 else ""), []).append(
                f"rank {rank} (host {host})"
            )
    if differ:
        host0 = everyone[0][0]
        what = "; ".join(f"{', '.join(who)}: {keys}" for keys, who in differ.items())
        if dist.is_initialized():
            dist.destroy_process_group()
        raise ConfigError(
            f"the ranks' configurations differ from rank 0's (host {host0}): {what}; start "
            "every node with the same clusterbench version and arguments"
        )


_SELECTED = "the benchmarks selected"


def _flat(value: Any, prefix: str = "") -> dict[str, str]:
    """Nested settings as ``section.key`` -> its JSON text."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        if not value and prefix:
            out[prefix.rstrip(".")] = "{}"
        return out
    return {prefix.rstrip("."): json.dumps(value, sort_keys=True, default=str)}


def share_run_dir(ctx: DistContext, spec: RunSpec) -> None:
    """Under a launcher: rank 0 makes the run folder (or says why not); every rank learns it."""
    run_dir, error = "", None
    if ctx.rank == 0:
        try:
            run_dir = str(prepare_run_dir(spec.out, workers=ctx.world_size))
        except ConfigError as exc:
            error = str(exc)
    run_dir, error = ctx.broadcast_from_root((run_dir, error))
    if error:
        raise ConfigError(error)
    spec.run_dir, spec.run_id = run_dir, run_id_for(run_dir, spec.started)
    ctx.run_dir = Path(run_dir)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)  # other nodes' local copy
