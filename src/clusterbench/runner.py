"""One run: pick benchmarks, run them on every rank, gather, analyse, write the results.

Started by hand, the runner launches local workers (elastic launch) and assembles the run from
their partial files when they end, however they end.  Under torchrun/srun/mpirun every process
is a worker; rank 0 gathers each benchmark's records and rewrites results.json after each one.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clusterbench import __version__
from clusterbench.analysis import analyze
from clusterbench.assemble import RunMeta, assemble_results, dedupe
from clusterbench.benchmarks import registry
from clusterbench.config import ConfigError, RunConfig, build_run_config
from clusterbench.report.markdown import render_markdown
from clusterbench.runtime.dist import DistContext, init_distributed
from clusterbench.runtime.launch import (
    LauncherEnv,
    WorkerFailure,
    detect_launcher,
    export_dist_env,
    launch_local,
)
from clusterbench.runtime.records import RankLog, read_rank_file, read_records
from clusterbench.runtime.watchdog import Deadline
from clusterbench.schema import Results

__all__ = ["RunOutcome", "RunSpec", "exit_code_for", "run", "worker_main", "write_results"]

EXIT_OK, EXIT_FAIL_FINDING, EXIT_USAGE, EXIT_RUN_ERROR = 0, 1, 2, 3


@dataclass(kw_only=True)
class RunSpec:
    """Everything a worker needs; pickled to spawned workers."""

    run_id: str
    run_dir: str
    config: RunConfig
    device_type: str
    started: str
    command: str
    self_launched: bool


@dataclass(kw_only=True)
class RunOutcome:
    results: Results | None
    """None on ranks other than 0 under an external launcher."""
    run_dir: Path
    exit_code: int


def run(
    *,
    suite: str | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    config_file: Path | None = None,
    sets: list[str] | None = None,
    out: Path | None = None,
    nproc: int | None = None,
    device: str = "auto",
    timeout_s: float | None = None,
) -> RunOutcome:
    """Run a suite and return its results (the library form of ``clusterbench run``).

    Raises :class:`ConfigError` (a ValueError) for bad input before anything is written.
    """
    device_type = resolve_device(device)
    config = build_run_config(
        suite=suite,
        device_type=device_type,
        config_file=config_file,
        sets=sets or [],
        only=only or [],
        skip=skip or [],
        timeout_s=timeout_s,
    )
    launcher = detect_launcher()
    started = _now()
    command = shlex.join(["clusterbench", *sys.argv[1:]])
    if launcher is not None:
        return _join(
            launcher,
            config=config,
            device_type=device_type,
            out=out,
            started=started,
            command=command,
        )
    num_workers = _num_workers(nproc, device_type)
    run_dir = prepare_run_dir(out)
    spec = RunSpec(
        run_id=run_dir.name,
        run_dir=str(run_dir),
        config=config,
        device_type=device_type,
        started=started,
        command=command,
        self_launched=True,
    )
    return _launch(spec, num_workers=num_workers)


def resolve_device(device: str) -> str:
    if device not in ("auto", "cuda", "cpu"):
        raise ConfigError(f"--device must be auto, cuda or cpu, got {device!r}")
    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise ConfigError("--device cuda: no CUDA GPU is visible on this machine")
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    return device


def _num_workers(nproc: int | None, device_type: str) -> int:
    if nproc is not None and nproc < 1:
        raise ConfigError(f"--nproc must be at least 1, got {nproc}")
    if device_type == "cpu":
        return nproc or 2
    count = torch.cuda.device_count()
    if nproc is not None and nproc > count:
        raise ConfigError(f"--nproc {nproc}: only {count} GPU(s) visible on this machine")
    return nproc or count


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_run_dir() -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("clusterbench-runs") / f"{stamp}-{socket.gethostname()}"


def prepare_run_dir(out: Path | None) -> Path:
    """Create the run folder; refuse one that already holds a run or cannot be written."""
    run_dir = Path(out) if out is not None else default_run_dir()
    if (run_dir / "results.json").exists() or (run_dir / "ranks").exists():
        raise ConfigError(f"--out {run_dir}: already holds a run; choose another folder")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--out {run_dir}: cannot write there ({exc.strerror})") from None
    return run_dir


# ----------------------------------------------------------------------------- self-launched


def _launch(spec: RunSpec, *, num_workers: int) -> RunOutcome:
    run_dir = Path(spec.run_dir)
    failures: list[WorkerFailure] = []
    interrupted = False
    try:
        failures = launch_local(
            worker_main, spec, nproc=num_workers, run_id=spec.run_id, log_dir=run_dir / "logs"
        )
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:  # the agent itself failed (e.g. rendezvous): keep what ranks wrote
        if type(exc).__name__ != "SignalException":
            raise
        interrupted = True
    results = finalize(
        spec,
        records=read_records(run_dir),
        failures=failures,
        world_size=num_workers,
        interrupted=interrupted,
    )
    return RunOutcome(results=results, run_dir=run_dir, exit_code=exit_code_for(results))


def finalize(
    spec: RunSpec,
    *,
    records: list[dict[str, Any]],
    failures: list[WorkerFailure],
    world_size: int,
    interrupted: bool = False,
    running: bool = False,
) -> Results:
    meta = RunMeta(
        id=spec.run_id,
        started=spec.started,
        finished=_now(),
        suite=spec.config.suite,
        world_size=world_size,
        backend="nccl" if spec.device_type == "cuda" else "gloo",
        command=spec.command,
        config=spec.config.to_dict(),
        benchmarks=list(spec.config.benchmarks),
        version=__version__,
        fallback_host=socket.gethostname(),
    )
    results = assemble_results(
        records=records, meta=meta, failures=failures, interrupted=interrupted
    )
    if running and results.run.status == "failed" and not results.errors:
        results.run.status = "running"
        results.run.finished = None
    results.findings = analyze(results, spec.config.thresholds)
    write_results(Path(spec.run_dir), results)
    return results


def write_results(run_dir: Path, results: Results) -> None:
    """results.json and summary.md, each replaced atomically."""
    for name, text in (
        ("results.json", results.model_dump_json(indent=2)),
        ("summary.md", render_markdown(results)),
    ):
        tmp = run_dir / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, run_dir / name)


def exit_code_for(results: Results) -> int:
    if results.run.status in ("failed", "interrupted"):
        return EXIT_RUN_ERROR
    if any(f.severity == "fail" for f in results.findings):
        return EXIT_FAIL_FINDING
    return EXIT_OK


# ----------------------------------------------------------------------------- workers


def worker_main(spec: RunSpec) -> None:
    """Entry point of one worker (spawned by launch_local, or the process itself when joined)."""
    ctx = _make_context(spec)
    log = RankLog(Path(spec.run_dir), ctx.rank)
    try:
        _run_benchmarks(ctx, spec=spec, log=log)
    except KeyboardInterrupt:
        log.write("interrupted", benchmark=ctx.benchmark or None)
        _hard_exit(130)
    except _BenchmarkFailed as failure:
        _exit_after_failure(failure)
    finally:
        log.close()


class _BenchmarkFailed(Exception):
    def __init__(self, *, while_waiting: bool) -> None:
        super().__init__()
        self.while_waiting = while_waiting


def _exit_after_failure(failure: _BenchmarkFailed) -> None:
    if failure.while_waiting:
        # A peer died first; let the launcher see its exit before ours, so it is the one named.
        time.sleep(1.0)
    _hard_exit(EXIT_RUN_ERROR)


def _hard_exit(code: int) -> None:
    # Skip interpreter teardown: a peer may be gone, and NCCL/gloo destructors can block on it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _make_context(spec: RunSpec) -> DistContext:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
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
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    backend = "nccl" if spec.device_type == "cuda" else "gloo"
    init_distributed(backend=backend, device=device, timeout_s=spec.config.timeout_s)
    host = socket.gethostname()
    ctx = DistContext(
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

    info = probe_host()
    if ctx.is_cuda:
        ctx.gpu = next((g for g in info.gpus if g.index == ctx.local_rank), None)
    if ctx.local_rank == 0:
        log.write("host", data=info.model_dump(mode="json"))


def _run_benchmarks(ctx: DistContext, *, spec: RunSpec, log: RankLog) -> None:
    log.write("hello", host=ctx.host, local_rank=ctx.local_rank, device=ctx.device_label)
    _probe(ctx, log)
    gathered: list[dict[str, Any]] = []
    progress = _progress_for(ctx)
    with progress:
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
    ctx.barrier()
    if not spec.self_launched and ctx.rank == 0:
        _finish_joined(spec, gathered=gathered, world_size=ctx.world_size)


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
            for m in bench.fn(ctx, cfg):
                log.write("measurement", data=m.model_dump(mode="json"))
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
            raise _BenchmarkFailed(while_waiting=while_waiting) from exc
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


# ----------------------------------------------------------------------------- joined


def _join(
    launcher: LauncherEnv,
    *,
    config: RunConfig,
    device_type: str,
    out: Path | None,
    started: str,
    command: str,
) -> RunOutcome:
    export_dist_env(launcher)
    spec = RunSpec(
        run_id="",
        run_dir="",
        config=config,
        device_type=device_type,
        started=started,
        command=command,
        self_launched=False,
    )
    ctx = _make_context(spec)
    run_dir: Path | None = None
    error: str | None = None
    if ctx.rank == 0:
        try:
            run_dir = prepare_run_dir(out)
        except ConfigError as exc:
            error = str(exc)
    run_dir_name, error = ctx.broadcast_from_root((str(run_dir) if run_dir else "", error))
    if error:
        raise ConfigError(error)
    spec.run_dir, spec.run_id = run_dir_name, Path(run_dir_name).name
    Path(spec.run_dir).mkdir(parents=True, exist_ok=True)  # other nodes' local copy
    log = RankLog(Path(spec.run_dir), ctx.rank)
    try:
        _run_benchmarks(ctx, spec=spec, log=log)
    except _BenchmarkFailed as failure:
        _exit_after_failure(failure)
    finally:
        log.close()
    results = _read_final(Path(spec.run_dir)) if ctx.rank == 0 else None
    code = exit_code_for(results) if results else EXIT_OK
    return RunOutcome(results=results, run_dir=Path(spec.run_dir), exit_code=code)


def _gather_and_write(
    ctx: DistContext, *, spec: RunSpec, log: RankLog, gathered: list[dict[str, Any]]
) -> None:
    """Rank 0 collects every rank's records so far and rewrites results.json."""
    mine = read_rank_file(log.path)
    everyone = ctx.gather_to_root(mine)
    if ctx.rank != 0 or everyone is None:
        return
    for recs in everyone:
        gathered.extend(recs)
    gathered[:] = dedupe(gathered)
    finalize(spec, records=gathered, failures=[], world_size=ctx.world_size, running=True)


def _finish_joined(spec: RunSpec, *, gathered: list[dict[str, Any]], world_size: int) -> None:
    records = dedupe([*gathered, *read_records(Path(spec.run_dir))])
    finalize(spec, records=records, failures=[], world_size=world_size)


def _read_final(run_dir: Path) -> Results:
    return Results.model_validate_json((run_dir / "results.json").read_text(encoding="utf-8"))
