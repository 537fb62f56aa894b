"""One run: pick benchmarks, run them on every rank, gather, analyse, write the results.

Started by hand, the runner launches local workers (elastic launch) and assembles the run from
their partial files when they end, however they end.  Under torchrun/srun/mpirun every process
is a worker; rank 0 gathers each benchmark's records and rewrites results.json after each one.
"""

from __future__ import annotations

import datetime as dt
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from clusterbench.config import ConfigError, RunConfig, build_run_config
from clusterbench.finalize import EXIT_OK, RunSpec, exit_code_for, finalize, now_utc
from clusterbench.runtime.launch import (
    LauncherEnv,
    WorkerFailure,
    detect_launcher,
    export_dist_env,
    launch_local,
)
from clusterbench.runtime.records import RankLog, read_records
from clusterbench.schema import Results
from clusterbench.worker import (
    BenchmarkFailed,
    exit_after_failure,
    make_context,
    run_benchmarks,
    worker_main,
)

__all__ = ["RunOutcome", "prepare_run_dir", "resolve_device", "run"]


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
    nccl_debug: bool = False,
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
    started = now_utc()
    command = shlex.join(["clusterbench", *sys.argv[1:]])
    if launcher is not None:
        return _join(
            launcher,
            config=config,
            device_type=device_type,
            out=out,
            started=started,
            command=command,
            nccl_debug=nccl_debug,
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
        nccl_debug=nccl_debug,
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


# ----------------------------------------------------------------------------- joined


def _join(
    launcher: LauncherEnv,
    *,
    config: RunConfig,
    device_type: str,
    out: Path | None,
    started: str,
    command: str,
    nccl_debug: bool,
) -> RunOutcome:
    try:
        export_dist_env(launcher)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    spec = RunSpec(
        run_id="",
        run_dir="",
        config=config,
        device_type=device_type,
        started=started,
        command=command,
        self_launched=False,
        nccl_debug=nccl_debug,
    )
    ctx = make_context(spec)
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
    ctx.run_dir = Path(spec.run_dir)
    Path(spec.run_dir).mkdir(parents=True, exist_ok=True)  # other nodes' local copy
    log = RankLog(Path(spec.run_dir), ctx.rank, keep_unsent=True)
    try:
        run_benchmarks(ctx, spec=spec, log=log)
    except BenchmarkFailed as failure:
        exit_after_failure(failure)
    finally:
        log.close()
    results = _read_final(Path(spec.run_dir)) if ctx.rank == 0 else None
    code = exit_code_for(results) if results else EXIT_OK
    return RunOutcome(results=results, run_dir=Path(spec.run_dir), exit_code=code)


def _read_final(run_dir: Path) -> Results:
    return Results.model_validate_json((run_dir / "results.json").read_text(encoding="utf-8"))
