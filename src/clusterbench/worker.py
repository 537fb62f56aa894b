"""One worker: join the world, probe the node, run each benchmark under a deadline, record.

There is one per-rank loop, however the run started.  Every record goes to this rank's partial
file as it happens; how records reach results.json is the run's :class:`Collector`:

- :class:`FileCollector` when clusterbench started the workers: the parent reads every rank's
  file when they end, however they end, and assembles the run;
- :class:`GatherCollector` under torchrun/srun/mpirun: there is no parent, so rank 0 gathers
  every rank's new records after each benchmark and rewrites results.json, and says what
  happened when a rank fails.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from clusterbench import registry
from clusterbench.assemble import dedupe
from clusterbench.config import ConfigError
from clusterbench.finalize import finalize
from clusterbench.runspec import EXIT_RUN_ERROR, RunSpec, prepare_run_dir
from clusterbench.runtime.dist import DistContext, NullProgress, init_distributed, set_rank_threads
from clusterbench.runtime.nccl_debug import debug_env, debug_log_path, parse_nccl_log
from clusterbench.runtime.records import (
    End,
    Error,
    FindingRecord,
    Hello,
    HostRecord,
    Interrupted,
    MeasurementRecord,
    NcclRecord,
    RankLog,
    Record,
    Skip,
    Start,
    read_rank_file,
    read_records,
)
from clusterbench.runtime.watchdog import Deadline
from clusterbench.schema import Finding, NcclRankInfo, Results

__all__ = ["BenchmarkFailed", "worker_main"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C


def worker_main(spec: RunSpec) -> None:
    """Entry point of one worker (spawned by launch_local, or the process itself when joined)."""
    for module in spec.plugin_modules:
        importlib.import_module(module)
    ctx = make_context(spec)
    if not spec.run_dir:
        _share_run_dir(ctx, spec)
    collector: Collector = FileCollector() if spec.self_launched else GatherCollector(spec)
    log = RankLog(Path(spec.run_dir), ctx.rank, keep_unsent=collector.gathers)
    try:
        run_benchmarks(ctx, spec=spec, log=log, collector=collector)
    except KeyboardInterrupt:
        log.write(Interrupted(benchmark=ctx.benchmark or None))
        collector.interrupted(ctx)
        hard_exit(collector.interrupted_exit_code)
    except BenchmarkFailed as failure:
        collector.failed(ctx, log)
        if failure.while_waiting:
            # A peer failed first; let the launcher see its exit before ours, so it is named.
            time.sleep(1.0)
        hard_exit(EXIT_RUN_ERROR)
    finally:
        log.close()


class BenchmarkFailed(Exception):
    def __init__(self, *, while_waiting: bool) -> None:
        super().__init__()
        self.while_waiting = while_waiting


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


def _share_run_dir(ctx: DistContext, spec: RunSpec) -> None:
    """Under a launcher: rank 0 makes the run folder (or says why not); every rank learns it."""
    run_dir, error = "", None
    if ctx.rank == 0:
        try:
            run_dir = str(prepare_run_dir(spec.out))
        except ConfigError as exc:
            error = str(exc)
    run_dir, error = ctx.broadcast_from_root((run_dir, error))
    if error:
        raise ConfigError(error)
    spec.run_dir, spec.run_id = run_dir, Path(run_dir).name
    ctx.run_dir = Path(run_dir)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)  # other nodes' local copy


# ----------------------------------------------------------------------------- the loop


def run_benchmarks(ctx: DistContext, *, spec: RunSpec, log: RankLog, collector: Collector) -> None:
    log.write(Hello(host=ctx.host, local_rank=ctx.local_rank, device=ctx.device_label))
    _probe(ctx, log)
    with _progress_for(ctx) as progress:
        for name, cfg in spec.config.benchmarks.items():
            bench = registry.get(name)
            if not bench.supports(spec.device_type):
                log.write(Skip(benchmark=name, reason=f"no {spec.device_type} form"))
                continue
            bar = progress.bar(name)
            ctx.progress, ctx.benchmark = bar, name
            _run_one(ctx, bench=bench, cfg=cfg, log=log, timeout_s=spec.config.timeout_s)
            bar.finish()
            collector.after_benchmark(ctx, log)
    if spec.nccl_debug and spec.device_type == "cuda":
        _keep_nccl_log(ctx, run_dir=Path(spec.run_dir), log=log)
    ctx.barrier()
    collector.finished(ctx)
    if dist.is_initialized():
        dist.destroy_process_group()


def _probe(ctx: DistContext, log: RankLog) -> None:
    from clusterbench.hardware.probe import probe_host

    info = ctx.host_info = probe_host()
    if ctx.is_cuda:
        ctx.gpu = next((g for g in info.gpus if g.index == ctx.local_rank), None)
    if ctx.local_rank == 0:
        log.write(HostRecord(data=info))


def _run_one(
    ctx: DistContext, *, bench: registry.Benchmark, cfg: Any, log: RankLog, timeout_s: float
) -> None:
    def on_timeout() -> None:
        message = f"no result after {timeout_s:g} s (timeout)"
        log.write(
            Error(benchmark=bench.name, message=message, while_waiting=ctx.waiting, timeout=True)
        )

    log.write(Start(benchmark=bench.name))
    ctx.wait_failed = False
    with Deadline(timeout_s, on_timeout, grace_s=_grace(timeout_s), grace_if=lambda: ctx.waiting):
        try:
            ctx.barrier()
            for item in bench.run(ctx, cfg):
                log.write(
                    FindingRecord(data=item)
                    if isinstance(item, Finding)
                    else MeasurementRecord(data=item)
                )
            ctx.barrier()
        except Exception as exc:
            while_waiting = ctx.waiting or ctx.wait_failed
            log.write(
                Error(
                    benchmark=bench.name,
                    message=f"{type(exc).__name__}: {exc}".strip(),
                    while_waiting=while_waiting,
                    traceback=traceback.format_exc(),
                )
            )
            raise BenchmarkFailed(while_waiting=while_waiting) from exc
    log.write(End(benchmark=bench.name))


def _grace(timeout_s: float) -> float:
    """Extra time a rank that is only waiting gets, so the hung rank reports itself first."""
    return min(10.0, 0.25 * timeout_s)


def _progress_for(ctx: DistContext) -> Any:
    from clusterbench.report.progress import RunProgress

    return RunProgress() if ctx.rank == 0 else NullProgress()


def _keep_nccl_log(ctx: DistContext, *, run_dir: Path, log: RankLog) -> None:
    source = debug_log_path(ctx.rank)
    if not source.exists():
        return
    target = run_dir / "nccl" / f"rank-{ctx.rank:05d}.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), target)
    info = parse_nccl_log(target.read_text(encoding="utf-8", errors="replace"))
    rel = str(target.relative_to(run_dir))
    log.write(NcclRecord(data=NcclRankInfo(rank=ctx.rank, host=ctx.host, log=rel, **info)))


# ----------------------------------------------------------------------------- collectors


class Collector(Protocol):
    """How this rank's records reach results.json."""

    gathers: bool
    """Records also travel over the network (RankLog keeps them until gathered)."""
    interrupted_exit_code: int

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None: ...

    def finished(self, ctx: DistContext) -> None: ...

    def failed(self, ctx: DistContext, log: RankLog) -> None: ...

    def interrupted(self, ctx: DistContext) -> None: ...


class FileCollector:
    """clusterbench started the workers: the parent reads each rank's file when they end."""

    gathers = False
    interrupted_exit_code = EXIT_INTERRUPTED

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None:
        pass

    def finished(self, ctx: DistContext) -> None:
        pass

    def failed(self, ctx: DistContext, log: RankLog) -> None:
        pass

    def interrupted(self, ctx: DistContext) -> None:
        pass


class GatherCollector:
    """A launcher started the workers: rank 0 gathers and writes results.json as the run goes."""

    gathers = True
    interrupted_exit_code = EXIT_RUN_ERROR

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.gathered: list[Record] = []

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None:
        """Rank 0 collects every rank's new records and rewrites results.json."""
        everyone = ctx.gather_to_root(log.take_unsent())
        if ctx.rank != 0 or everyone is None:
            return
        for recs in everyone:
            self.gathered.extend(recs)
        finalize(self.spec, records=self.gathered, failures=[], world_size=ctx.world_size,
                 running=True)  # fmt: skip

    def finished(self, ctx: DistContext) -> None:
        if ctx.rank == 0:
            self._finish(ctx.world_size)

    def failed(self, ctx: DistContext, log: RankLog) -> None:
        """No parent assembles the run: the ranks say what happened.

        A rank that failed on its own says so on stderr; rank 0 rewrites results.json from what
        it gathered and what the partial files it can see hold, and names the first cause.
        """
        mine = [r for r in read_rank_file(log.path) if isinstance(r, Error)]
        if mine and not mine[-1].while_waiting:
            print(f"clusterbench: rank {ctx.rank} on host {ctx.host} failed in "
                  f"{mine[-1].benchmark}: {mine[-1].message}", file=sys.stderr)  # fmt: skip
        if ctx.rank != 0:
            return
        if not mine or mine[-1].while_waiting:
            time.sleep(1.0)  # let the rank that failed first write its record
        results = self._finish(ctx.world_size)
        if results.errors:
            print(f"clusterbench: run failed: {results.errors[0].message}; results kept in "
                  f"{self.spec.run_dir}", file=sys.stderr)  # fmt: skip

    def interrupted(self, ctx: DistContext) -> None:
        if ctx.rank == 0:
            self._finish(ctx.world_size, interrupted=True)
            print(f"clusterbench: interrupted; results kept in {self.spec.run_dir}",
                  file=sys.stderr)  # fmt: skip

    def _finish(self, world_size: int, *, interrupted: bool = False) -> Results:
        records = dedupe([*self.gathered, *read_records(Path(self.spec.run_dir))])
        return finalize(self.spec, records=records, failures=[], world_size=world_size,
                        interrupted=interrupted)  # fmt: skip
