"""One worker: join the world, probe the node, run each benchmark under a deadline, record.

There is one per-rank loop, however the run started (a soak runs it round after round, rank 0
deciding each round for all: ``runtime/rounds.py``).  Every record goes to this rank's partial
file as it happens; how records reach results.json is the run's collector (:mod:`.collect`:
the parent reads the files, or rank 0 gathers them as the run goes).

Before the loop the ranks join and agree that they may start (:mod:`.join`).  Under a launcher
a SIGTERM (the launcher ending the survivors of a rank that died) is caught in a thread of its
own, so that rank 0 still writes who caused it.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from clusterbench import registry
from clusterbench.doctor.run_health import RunHealth
from clusterbench.exits import EXIT_RUN_ERROR
from clusterbench.pipeline.collect import (
    Collector,
    FileCollector,
    GatherCollector,
    flight_store,
)
from clusterbench.pipeline.join import (
    check_agreement,
    check_nodes,
    hard_exit,
    join_world,
    nccl_logging,
    open_rank_log,
    share_run_dir,
)
from clusterbench.pipeline.spec import RunSpec
from clusterbench.runtime.budget import BudgetSchedule
from clusterbench.runtime.dist import DistContext, NullProgress
from clusterbench.runtime.flight import (
    FlightRecorder,
    end_stalled_ranks,
    flight_path,
    store_key,
)
from clusterbench.runtime.launch import on_sigterm
from clusterbench.runtime.nccl_debug import debug_log_path, keep_log, parse_nccl_log
from clusterbench.runtime.records import (
    End,
    Error,
    FindingRecord,
    Hello,
    HostRecord,
    Interrupted,
    MeasurementRecord,
    NcclRecord,
    Phase,
    RankLog,
    RankLogWriteError,
    Skip,
    Start,
    TelemetryRecord,
    describe_write_error,
)
from clusterbench.runtime.rounds import RoundPolicy, rounds
from clusterbench.runtime.telemetry import TelemetrySampler
from clusterbench.runtime.watchdog import Deadline
from clusterbench.schema import Finding, Measurement, NcclRankInfo

if TYPE_CHECKING:
    from clusterbench.pipeline.finish import Finished
from clusterbench.units import format_seconds

__all__ = ["BenchmarkFailed", "worker_main"]

TERMINATED = "terminated by the launcher (SIGTERM)"

IMPORTED_AT = time.time()
"""When this module's imports (torch's with them) were done: in a worker of clusterbench's own
launch, when its fork server had imported them."""

_FINAL = threading.Lock()
"""Taken by whichever says how this rank ends, the main thread or the SIGTERM watcher: one
report, then the process exits."""


def worker_main(spec: RunSpec) -> Finished | None:
    """Entry point of one worker (spawned by launch_local, or the process itself when joined).
    Under a launcher, rank 0 returns the run it finished; every other rank (and every spawned
    worker: their parent finishes the run) None."""
    entered = time.time()
    for module in spec.plugin_modules:
        importlib.import_module(module)
    ctx = join_world(spec)
    ctx.phases = {"device init": time.time() - entered}
    if spec.launched_at is not None:  # clusterbench's own launch: from it to this worker
        # the fork server imported this module before it forked this worker: what of its
        # import came after the launch, the launch waited for
        imported = min(max(spec.launched_at, IMPORTED_AT), entered)
        ctx.phases["worker imports"] = imported - spec.launched_at
        ctx.phases["worker start"] = max(0.0, entered - imported)
    check_agreement(ctx, spec)
    check_nodes(ctx, spec)
    if not spec.run_dir:
        share_run_dir(ctx, spec)
    store = None if spec.self_launched else flight_store()
    collector: Collector = FileCollector() if spec.self_launched else GatherCollector(spec, store)
    log = open_rank_log(ctx, spec, keep_unsent=collector.gathers)
    key = store_key(ctx.rank)
    ctx.flight = FlightRecorder(
        flight_path(Path(spec.run_dir), ctx.rank),
        rank=ctx.rank,
        host=ctx.host,
        publish=None if store is None else (lambda text: store.set(key, text)),
    )
    if not spec.self_launched:  # clusterbench's own launch reads the ranks' files instead
        on_sigterm(lambda interrupted: _terminated(ctx, log=log, collector=collector,
                                                   interrupted=interrupted))  # fmt: skip
    elif ctx.rank == 0:  # the rank that draws the bars on the launcher's terminal
        on_sigterm(lambda interrupted: _end_display_and_exit())
    try:
        run_benchmarks(ctx, spec=spec, log=log, collector=collector)
    except KeyboardInterrupt:
        with _FINAL:
            with contextlib.suppress(RankLogWriteError):  # a full disk: the launcher knows
                log.write(Interrupted(benchmark=ctx.benchmark or None))
            collector.interrupted(ctx)
            hard_exit(collector.interrupted_exit_code)
    except BenchmarkFailed as failure:
        with _FINAL:
            collector.failed(ctx, log)
            if failure.while_waiting or failure.in_collective:
                # A peer may have failed first; let the launcher see its exit before ours.
                time.sleep(1.0)
            hard_exit(EXIT_RUN_ERROR)
    except RankLogWriteError as exc:  # the disk under --out is full or failing
        with _FINAL:
            if not spec.self_launched:  # else the parent reports it
                print(f"clusterbench: rank {ctx.rank} on host {ctx.host}: {exc}", file=sys.stderr)
            with contextlib.suppress(RankLogWriteError):  # it may fit now, or still not
                where = "" if ctx.benchmark else f"rank {ctx.rank} on host {ctx.host}: "
                log.write(Error(benchmark=ctx.benchmark or None, message=f"{where}{exc}"))
            collector.failed(ctx, log)
            hard_exit(EXIT_RUN_ERROR)
    finally:
        ctx.flight.close()
        log.close()
    return collector.finished_run if isinstance(collector, GatherCollector) else None


def _end_display_and_exit() -> None:
    """clusterbench's own launcher ends this rank (another rank failed, or the launcher was
    stopped): end the progress bars' line first, so that the launcher's own lines on the
    terminal begin on a line of their own, then exit as a rank ended by SIGTERM.  The
    launcher reads how the run ended from the ranks' files, not from this exit code."""
    from clusterbench.report.progress import end_displays

    end_displays()
    if _FINAL.acquire(blocking=False):  # else the main thread is ending the rank: it exits
        hard_exit(128 + signal.SIGTERM)


def _terminated(ctx: DistContext, *, log: RankLog, collector: Collector, interrupted: bool) -> None:
    """The launcher ends this rank (torchrun does when another of its node's workers died):
    say so in the flight record and the rank file; rank 0 then writes results.json naming the
    rank that caused it (its heartbeat stopped first) and the ranks that waited for it."""
    if ctx.rank == 0:  # its bars' line ends before any other line is written
        from clusterbench.report.progress import end_displays

        end_displays()
    if ctx.flight is not None:
        ctx.flight.end("interrupted (SIGINT, then SIGTERM)" if interrupted else TERMINATED)
    if not _FINAL.acquire(blocking=False):
        return  # the main thread is saying how the run ended; it exits when done
    with contextlib.suppress(RankLogWriteError):
        bench = ctx.benchmark or None
        log.write(Interrupted(benchmark=bench) if interrupted else
                  Error(benchmark=bench, message=TERMINATED, while_waiting=True))  # fmt: skip
    if interrupted:
        collector.interrupted(ctx)
        hard_exit(collector.interrupted_exit_code)
    collector.failed(ctx, log)
    hard_exit(EXIT_RUN_ERROR)


class BenchmarkFailed(Exception):
    def __init__(self, *, while_waiting: bool, in_collective: bool = False) -> None:
        super().__init__()
        self.while_waiting = while_waiting
        self.in_collective = in_collective


# ----------------------------------------------------------------------------- the loop


def run_benchmarks(ctx: DistContext, *, spec: RunSpec, log: RankLog, collector: Collector) -> None:
    log.write(Hello(host=ctx.host, local_rank=ctx.local_rank, device=ctx.device_label))
    for phase, seconds in ctx.phases.items():
        log.write(Phase(name=phase, seconds=seconds))
    started = time.monotonic()
    _probe(ctx, log)
    log.write(Phase(name="probe", seconds=time.monotonic() - started))
    health = RunHealth.start(ctx)  # Xid events and link-error counters, start to end
    schedule = BudgetSchedule.from_plan(spec.plan, ends_at=spec.budget_ends_at)  # deadlines
    started = time.monotonic()
    with _progress_for(ctx) as progress, _telemetry(ctx, spec=spec, log=log):
        log.write(Phase(name="telemetry start", seconds=time.monotonic() - started))
        for soak_round in rounds(ctx, _round_policy(spec), on_round_end=_round_note(progress)):
            ctx.round = soak_round  # None outside a soak
            for name, cfg in spec.config.benchmarks.items():
                bench = registry.get(name)
                if not bench.supports(spec.device_type):
                    if not soak_round:  # once, not every round
                        log.write(Skip(benchmark=name, reason=f"no {spec.device_type} form"))
                    continue
                bar = progress.bar(name if soak_round is None else f"round {soak_round}: {name}")
                ctx.progress, ctx.benchmark = bar, name
                ctx.budget = schedule.start(name)
                _run_one(ctx, bench=bench, cfg=cfg, log=log, timeout_s=spec.config.timeout_s)
                schedule.finish(name, ctx.budget)
                bar.finish()
                collector.after_benchmark(ctx, log)
    ctx.benchmark = ""
    if nccl_logging(spec):
        _keep_nccl_log(ctx, run_dir=Path(spec.run_dir), log=log)
    try:
        ctx.barrier()
    except Exception as exc:  # a peer failed after its last benchmark (e.g. a full disk)
        log.write(Error(message=f"{type(exc).__name__}: {exc}", while_waiting=True))
        raise BenchmarkFailed(while_waiting=True) from exc
    _record_health(ctx, health, spec=spec, log=log, collector=collector)
    with _FINAL:
        collector.finished(ctx)
    if dist.is_initialized():
        dist.destroy_process_group()


def _round_policy(spec: RunSpec) -> RoundPolicy | None:
    """A soak's rounds (``--soak``/``--repeat``); None: one pass, as any run."""
    config = spec.config
    if config.soak_s is None and config.repeat is None:
        return None
    return RoundPolicy(duration_s=config.soak_s, repeat=config.repeat)


def _round_note(progress: Any) -> Callable[[int, float], None]:
    def note(done: int, seconds: float) -> None:
        progress.clear(f"soak: round {done} done in {format_seconds(seconds)}")

    return note


def _probe(ctx: DistContext, log: RankLog) -> None:
    from clusterbench.hardware.probe import probe_host

    info = ctx.host_info = probe_host()
    if ctx.is_cuda:
        ctx.gpu = next((g for g in info.gpus if g.index == ctx.local_rank), None)
    if ctx.local_rank == 0:
        log.write(HostRecord(data=info))


def _record_health(
    ctx: DistContext, health: RunHealth, *, spec: RunSpec, log: RankLog, collector: Collector
) -> None:
    """The run's Xid events and link-error growth, written and gathered like a benchmark's."""
    for item in health.finish(ctx, thresholds=spec.config.thresholds):
        log.write(FindingRecord(data=item) if isinstance(item, Finding)
                  else MeasurementRecord(data=item))  # fmt: skip
    try:
        collector.after_benchmark(ctx, log)  # rank 0 gathers them (other nodes' files)
    except Exception as exc:  # a peer went away after the last barrier
        log.write(Error(message=f"{type(exc).__name__}: {exc}", while_waiting=True))
        raise BenchmarkFailed(while_waiting=True) from exc


def _run_one(
    ctx: DistContext, *, bench: registry.Benchmark, cfg: Any, log: RankLog, timeout_s: float
) -> None:
    def on_timeout() -> None:
        if ctx.run_dir is not None:  # the stack of the rank that hangs (py-spy, where installed)
            end_stalled_ranks(ctx.run_dir, rank=ctx.rank, host=ctx.host,
                                include_self=not ctx.waiting)  # fmt: skip
        message = f"no result after {timeout_s:g} s (timeout)"
        log.write(
            Error(benchmark=bench.name, message=message, while_waiting=ctx.waiting, timeout=True)
        )

    log.write(Start(benchmark=bench.name, round=ctx.round, at=time.time()))
    started = time.monotonic()
    if ctx.telemetry is not None:
        ctx.telemetry.begin(bench.name, round=ctx.round)
    if ctx.flight is not None:
        ctx.flight.set(activity="running", benchmark=bench.name)
    ctx.wait_failed = ctx.failed_in_collective = False
    with Deadline(timeout_s, on_timeout, grace_s=_grace(timeout_s), grace_if=lambda: ctx.waiting):
        try:
            ctx.barrier()
            for item in _with_telemetry(ctx, bench.measure()(ctx, cfg)):
                log.write(
                    FindingRecord(data=item)
                    if isinstance(item, Finding)
                    else MeasurementRecord(data=_stamped(item, ctx))
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
    log.write(End(benchmark=bench.name, seconds=time.monotonic() - started, round=ctx.round,
                  budget_stop=ctx.budget.stop))  # fmt: skip
    if ctx.telemetry is not None:
        log.write(TelemetryRecord(data=ctx.telemetry.end()))


def _stamped(m: Measurement, ctx: DistContext) -> Measurement:
    """``m`` with when it was recorded and, in a soak, its round."""
    return m.model_copy(update={"round": ctx.round, "time": time.time()})


@contextlib.contextmanager
def _telemetry(ctx: DistContext, *, spec: RunSpec, log: RankLog) -> Iterator[None]:
    """This rank's GPU telemetry sampler (``ctx.telemetry``) for the block, stopped after it
    however it ends; without one (CPU workers, no NVML, ``--no-telemetry``) a ``telemetry``
    skip says why: rank 0's when no rank samples, else each rank's that cannot."""
    config = spec.config
    why = None if config.telemetry else "off (--no-telemetry)"
    why = why or (None if ctx.is_cuda else "no NVML: CPU workers")
    if why is not None:
        if ctx.rank == 0:
            log.write(Skip(benchmark="telemetry", reason=why))
        yield
        return
    from clusterbench.hardware.gpu_telemetry import open_reader
    from clusterbench.hardware.topology import torch_pci_bus_id

    try:  # this rank's own GPU by its PCI address: NVML's indices ignore CUDA_VISIBLE_DEVICES
        bus_id = torch_pci_bus_id(ctx.device.index or 0)
    except (RuntimeError, AssertionError):  # torch sees no such device: NVML's index then
        bus_id = None
    reader = open_reader(ctx.local_rank, amd=torch.version.hip is not None, pci_bus_id=bus_id)
    if isinstance(reader, str):
        where = f"rank {ctx.rank} on host {ctx.host}"
        log.write(Skip(benchmark="telemetry", reason=f"{where}: {reader}"))
        yield
        return
    ctx.telemetry = TelemetrySampler(
        reader,
        interval_s=config.telemetry_interval_s,
        rank=ctx.rank,
        host=ctx.host,
        device=ctx.device_label,
        run_dir=ctx.run_dir,
    )
    ctx.telemetry.start()
    try:
        yield
    finally:
        ctx.telemetry.stop()
        ctx.telemetry = None


def _with_telemetry(ctx: DistContext, items: Iterable[Any]) -> Iterator[Any]:
    """``items`` as the benchmark yields them, each measurement with the summary of the GPU's
    telemetry since the benchmark's previous record (or its start)."""
    for item in items:
        summary = ctx.telemetry.mark() if ctx.telemetry is not None else None
        if summary is not None and isinstance(item, Measurement):
            item = item.model_copy(update={"telemetry": summary})
        yield item


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
    try:
        keep_log(source, target)
    except OSError as exc:  # a full or failing disk: one line, the log stays where NCCL wrote it
        raise RankLogWriteError(
            f"cannot keep the NCCL log: {describe_write_error(exc, target)} (it stays in {source})"
        ) from None
    info = parse_nccl_log(target.read_text(encoding="utf-8", errors="replace"))
    rel = str(target.relative_to(run_dir))
    log.write(NcclRecord(data=NcclRankInfo(rank=ctx.rank, host=ctx.host, log=rel, **info)))
