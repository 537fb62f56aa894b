"""One worker: join the world, probe the node, run each benchmark under a deadline, record.

Every record goes to this rank's partial file as it happens.  Under an external launcher rank 0
also gathers every rank's records after each benchmark and rewrites results.json.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from clusterbench.assemble import dedupe
from clusterbench.benchmarks import registry
from clusterbench.finalize import EXIT_RUN_ERROR, RunSpec, finalize
from clusterbench.runtime.dist import DistContext, init_distributed, set_rank_threads
from clusterbench.runtime.nccl_debug import debug_env, debug_log_path, parse_nccl_log
from clusterbench.runtime.records import RankLog, read_rank_file, read_records
from clusterbench.runtime.watchdog import Deadline
from clusterbench.schema import Finding, Results

__all__ = ["BenchmarkFailed", "exit_after_failure", "make_context", "run_benchmarks", "worker_main"]


def worker_main(spec: RunSpec) -> None:
    """Entry point of one worker (spawned by launch_local, or the process itself when joined)."""
    ctx = make_context(spec)
    log = RankLog(Path(spec.run_dir), ctx.rank, keep_unsent=not spec.self_launched)
    try:
        run_benchmarks(ctx, spec=spec, log=log)
    except KeyboardInterrupt:
        log.write("interrupted", benchmark=ctx.benchmark or None)
        hard_exit(130)
    except BenchmarkFailed as failure:
        exit_after_failure(failure)
    finally:
        log.close()


class BenchmarkFailed(Exception):
    def __init__(self, *, while_waiting: bool) -> None:
        super().__init__()
        self.while_waiting = while_waiting


def exit_after_failure(failure: BenchmarkFailed) -> None:
    if failure.while_waiting:
        # A peer died first; let the launcher see its exit before ours, so it is the one named.
        time.sleep(1.0)
    hard_exit(EXIT_RUN_ERROR)


def hard_exit(code: int) -> None:
    # Skip interpreter teardown: a peer may be gone, and NCCL/gloo destructors can block on it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def make_context(spec: RunSpec) -> DistContext:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if spec.nccl_debug and spec.device_type == "cuda":
        os.environ.update(debug_env(rank))  # read by NCCL when the communicator starts
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
    init_distributed(backend=backend, device=device, timeout_s=spec.config.timeout_s)
    host = socket.gethostname()
    ctx = DistContext(
        run_dir=Path(spec.run_dir) if spec.run_dir else None,
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
    hosts = list(dict.fromkeys(ctx.all_gather(host)))
    ctx.node_rank, ctx.num_nodes = hosts.index(host), len(hosts)
    return ctx


def _probe(ctx: DistContext, log: RankLog) -> None:
    from clusterbench.hardware.probe import probe_host

    info = ctx.host_info = probe_host()
    if ctx.is_cuda:
        ctx.gpu = next((g for g in info.gpus if g.index == ctx.local_rank), None)
    if ctx.local_rank == 0:
        log.write("host", data=info.model_dump(mode="json"))


def run_benchmarks(ctx: DistContext, *, spec: RunSpec, log: RankLog) -> None:
    log.write("hello", host=ctx.host, local_rank=ctx.local_rank, device=ctx.device_label)
    _probe(ctx, log)
    gathered: list[dict[str, Any]] = []
    try:
        _benchmark_loop(ctx, spec=spec, log=log, gathered=gathered)
    except BenchmarkFailed:
        if not spec.self_launched:
            _report_joined_failure(ctx, spec=spec, log=log, gathered=gathered)
        raise
    if spec.nccl_debug and spec.device_type == "cuda":
        _keep_nccl_log(ctx, run_dir=Path(spec.run_dir), log=log)
    ctx.barrier()
    if not spec.self_launched and ctx.rank == 0:
        _finish_joined(spec, gathered=gathered, world_size=ctx.world_size)
    if dist.is_initialized():
        dist.destroy_process_group()


def _benchmark_loop(
    ctx: DistContext, *, spec: RunSpec, log: RankLog, gathered: list[dict[str, Any]]
) -> None:
    with _progress_for(ctx) as progress:
        for name, cfg in spec.config.benchmarks.items():
            bench = registry.get(name)
            if not bench.supports(spec.device_type):
                log.write("skip", benchmark=name, reason=f"no {spec.device_type} form")
                continue
            bar = progress.bar(name)
            ctx.progress, ctx.benchmark = bar, name
            _run_one(ctx, bench=bench, cfg=cfg, log=log, timeout_s=spec.config.timeout_s)
            bar.finish()
            if not spec.self_launched:
                _gather_and_write(ctx, spec=spec, log=log, gathered=gathered)


def _report_joined_failure(
    ctx: DistContext, *, spec: RunSpec, log: RankLog, gathered: list[dict[str, Any]]
) -> None:
    """Under an external launcher no parent assembles the run: the ranks say what happened.

    A rank that failed on its own says so on stderr; rank 0 rewrites results.json from what it
    gathered and what the partial files it can see hold, and names the first cause.
    """
    mine = [r for r in read_rank_file(log.path) if r["kind"] == "error"]
    if mine and not mine[-1].get("while_waiting"):
        print(f"clusterbench: rank {ctx.rank} on host {ctx.host} failed in "
              f"{mine[-1].get('benchmark')}: {mine[-1]['message']}", file=sys.stderr)  # fmt: skip
    if ctx.rank != 0:
        return
    if not mine or mine[-1].get("while_waiting"):
        time.sleep(1.0)  # let the rank that failed first write its record
    results = _finish_joined(spec, gathered=gathered, world_size=ctx.world_size)
    if results.errors:
        print(f"clusterbench: run failed: {results.errors[0].message}; results kept in "
              f"{spec.run_dir}", file=sys.stderr)  # fmt: skip


def _keep_nccl_log(ctx: DistContext, *, run_dir: Path, log: RankLog) -> None:
    source = debug_log_path(ctx.rank)
    if not source.exists():
        return
    target = run_dir / "nccl" / f"rank-{ctx.rank:05d}.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), target)
    info = parse_nccl_log(target.read_text(encoding="utf-8", errors="replace"))
    rel = str(target.relative_to(run_dir))
    log.write("nccl", data={"rank": ctx.rank, "host": ctx.host, "log": rel, **info})


def _run_one(
    ctx: DistContext, *, bench: registry.BenchmarkSpec, cfg: Any, log: RankLog, timeout_s: float
) -> None:
    def on_timeout() -> None:
        log.write(
            "error",
            benchmark=bench.name,
            message=f"no result after {timeout_s:g} s (timeout)",
            while_waiting=ctx.waiting,
            timeout=True,
        )

    log.write("start", benchmark=bench.name)
    ctx.wait_failed = False
    with Deadline(timeout_s, on_timeout, grace_s=_grace(timeout_s), grace_if=lambda: ctx.waiting):
        try:
            ctx.barrier()
            for item in bench.fn(ctx, cfg):
                kind = "finding" if isinstance(item, Finding) else "measurement"
                log.write(kind, data=item.model_dump(mode="json"))
            ctx.barrier()
        except Exception as exc:
            while_waiting = ctx.waiting or ctx.wait_failed
            log.write(
                "error",
                benchmark=bench.name,
                message=f"{type(exc).__name__}: {exc}".strip(),
                while_waiting=while_waiting,
                traceback=traceback.format_exc(),
            )
            raise BenchmarkFailed(while_waiting=while_waiting) from exc
    log.write("end", benchmark=bench.name)


def _grace(timeout_s: float) -> float:
    """Extra time a rank that is only waiting gets, so the hung rank reports itself first."""
    return min(10.0, 0.25 * timeout_s)


def _progress_for(ctx: DistContext) -> Any:
    from clusterbench.report.progress import RunProgress

    return RunProgress() if ctx.rank == 0 else _NoBars()


class _NoBars:
    def __enter__(self) -> _NoBars:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def bar(self, name: str) -> _NoBar:
        return _NoBar()


class _NoBar:
    def start(self, total: float) -> None:
        pass

    def advance(self, amount: float = 1.0) -> None:
        pass

    def finish(self, note: str = "") -> None:
        pass


def _gather_and_write(
    ctx: DistContext, *, spec: RunSpec, log: RankLog, gathered: list[dict[str, Any]]
) -> None:
    """Rank 0 collects every rank's new records and rewrites results.json."""
    everyone = ctx.gather_to_root(log.take_unsent())
    if ctx.rank != 0 or everyone is None:
        return
    for recs in everyone:
        gathered.extend(recs)
    finalize(spec, records=gathered, failures=[], world_size=ctx.world_size, running=True)


def _finish_joined(spec: RunSpec, *, gathered: list[dict[str, Any]], world_size: int) -> Results:
    records = dedupe([*gathered, *read_records(Path(spec.run_dir))])
    return finalize(spec, records=records, failures=[], world_size=world_size)
