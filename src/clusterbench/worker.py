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

import contextlib
import importlib
import json
import os
import shutil
import socket
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.assemble import dedupe
from clusterbench.config import ConfigError
from clusterbench.finalize import ResultsWriteError, finalize
from clusterbench.runspec import EXIT_RUN_ERROR, RunSpec, prepare_run_dir
from clusterbench.runtime.dist import DistContext, NullProgress, init_distributed, set_rank_threads
from clusterbench.runtime.flight import (
    FlightRecorder,
    FlightState,
    flight_path,
    parse_flight,
    read_flights,
    store_key,
)
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
    RankLogWriteError,
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
    _check_agreement(ctx, spec)
    if not spec.run_dir:
        _share_run_dir(ctx, spec)
    store = None if spec.self_launched else _flight_store()
    collector: Collector = FileCollector() if spec.self_launched else GatherCollector(spec, store)
    log = RankLog(Path(spec.run_dir), ctx.rank, keep_unsent=collector.gathers)
    key = store_key(ctx.rank)
    ctx.flight = FlightRecorder(
        flight_path(Path(spec.run_dir), ctx.rank),
        rank=ctx.rank,
        host=ctx.host,
        publish=None if store is None else (lambda text: store.set(key, text)),
    )
    try:
        run_benchmarks(ctx, spec=spec, log=log, collector=collector)
    except KeyboardInterrupt:
        with contextlib.suppress(RankLogWriteError):  # a full disk: the launcher still knows
            log.write(Interrupted(benchmark=ctx.benchmark or None))
        collector.interrupted(ctx)
        hard_exit(collector.interrupted_exit_code)
    except BenchmarkFailed as failure:
        collector.failed(ctx, log)
        if failure.while_waiting or failure.in_collective:
            # A peer may have failed first; let the launcher see its exit before ours.
            time.sleep(1.0)
        hard_exit(EXIT_RUN_ERROR)
    except RankLogWriteError as exc:  # the disk under --out is full or failing
        if not spec.self_launched:  # else the parent reports it
            print(f"clusterbench: rank {ctx.rank} on host {ctx.host}: {exc}", file=sys.stderr)
        collector.failed(ctx, log)
        hard_exit(EXIT_RUN_ERROR)
    finally:
        ctx.flight.close()
        log.close()


class BenchmarkFailed(Exception):
    def __init__(self, *, while_waiting: bool, in_collective: bool = False) -> None:
        super().__init__()
        self.while_waiting = while_waiting
        self.in_collective = in_collective


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


def _check_agreement(ctx: DistContext, spec: RunSpec) -> None:
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


def _share_run_dir(ctx: DistContext, spec: RunSpec) -> None:
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
    if ctx.flight is not None:
        ctx.flight.set(activity="running", benchmark=bench.name)
    ctx.wait_failed = ctx.failed_in_collective = False
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
            while_waiting, in_collective = ctx.waiting or ctx.wait_failed, ctx.failed_in_collective
            disk = isinstance(exc, RankLogWriteError)  # its message is the one line to show
            log.write(  # raises RankLogWriteError again when even this line does not fit
                Error(
                    benchmark=bench.name,
                    message=str(exc) if disk else f"{type(exc).__name__}: {exc}".strip(),
                    while_waiting=while_waiting,
                    in_collective=in_collective,
                    traceback=None if disk else traceback.format_exc(),
                )
            )
            raise BenchmarkFailed(while_waiting=while_waiting, in_collective=in_collective) from exc
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

    def __init__(self, spec: RunSpec, store: dist.Store | None = None) -> None:
        self.spec = spec
        self.store = store
        """The run's store, where every rank also keeps its flight record (other nodes'
        files are not visible to rank 0)."""
        self.gathered: list[Record] = []

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None:
        """Rank 0 collects every rank's new records and rewrites results.json."""
        everyone = ctx.gather_to_root(log.take_unsent())
        if ctx.rank != 0 or everyone is None:
            return
        for recs in everyone:
            self.gathered.extend(recs)
        # A full disk does not stop the measuring: the final write tries again and a failure
        # there reaches the CLI (with the results from memory).
        with contextlib.suppress(ResultsWriteError):
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
        if mine and not (mine[-1].while_waiting or mine[-1].in_collective):
            print(f"clusterbench: rank {ctx.rank} on host {ctx.host} failed in "
                  f"{mine[-1].benchmark}: {mine[-1].message}", file=sys.stderr)  # fmt: skip
        if ctx.rank != 0:
            return
        if not mine or mine[-1].while_waiting or mine[-1].in_collective:
            # let the rank that failed first write its record, and the heartbeats of the ranks
            # still alive go on past the error (a dead rank's stopped before it)
            time.sleep(2.0)
        try:
            results = self._finish(ctx.world_size)
        except ResultsWriteError as exc:
            if exc.results.errors:
                print(f"clusterbench: run failed: {exc.results.errors[0].message}",
                      file=sys.stderr)  # fmt: skip
            print(f"clusterbench: error: {exc}", file=sys.stderr)
            return
        if results.errors:
            print(f"clusterbench: run failed: {results.errors[0].message}; results kept in "
                  f"{self.spec.run_dir}", file=sys.stderr)  # fmt: skip

    def interrupted(self, ctx: DistContext) -> None:
        if ctx.rank == 0:
            try:
                self._finish(ctx.world_size, interrupted=True)
            except ResultsWriteError as exc:
                print(f"clusterbench: interrupted; error: {exc}", file=sys.stderr)
                return
            print(f"clusterbench: interrupted; results kept in {self.spec.run_dir}",
                  file=sys.stderr)  # fmt: skip

    def _finish(self, world_size: int, *, interrupted: bool = False) -> Results:
        records = dedupe([*self.gathered, *read_records(Path(self.spec.run_dir))])
        flights = {**self._stored_flights(world_size), **read_flights(Path(self.spec.run_dir))}
        return finalize(self.spec, records=records, failures=[], world_size=world_size,
                        interrupted=interrupted, flights=flights)  # fmt: skip

    def _stored_flights(self, world_size: int) -> dict[int, FlightState]:
        out: dict[int, FlightState] = {}
        if self.store is None:
            return out
        for rank in range(world_size):
            try:
                if self.store.check([store_key(rank)]):
                    state = parse_flight(self.store.get(store_key(rank)))
                    if state is not None:
                        out[rank] = state
            except RuntimeError:  # the store went with its host: what the files say must do
                break
        return out


def _flight_store() -> dist.Store | None:
    """A client of the run's store (the launcher's MASTER_ADDR:MASTER_PORT), its own connection
    so that the heartbeat thread never shares one with the main thread."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    try:
        return dist.TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=10))
    except (RuntimeError, ValueError):
        return None
