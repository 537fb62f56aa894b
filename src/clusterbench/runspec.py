"""What a run is before it starts: its spec, its folder, its exit codes."""

from __future__ import annotations

import datetime as dt
import socket
from dataclasses import dataclass
from pathlib import Path

from clusterbench.config import ConfigError, RunConfig

__all__ = [
    "EXIT_FAIL_FINDING",
    "EXIT_OK",
    "EXIT_RUN_ERROR",
    "EXIT_USAGE",
    "RunSpec",
    "default_run_dir",
    "now_utc",
    "prepare_run_dir",
]

EXIT_OK = 0
"""No ``fail`` finding."""
EXIT_FAIL_FINDING = 1
"""Some ``fail`` finding."""
EXIT_USAGE = 2
"""Bad usage or configuration: nothing ran."""
EXIT_RUN_ERROR = 3
"""The run failed or was interrupted; what finished is kept."""


@dataclass(kw_only=True)
class RunSpec:
    """Everything a worker needs; pickled to spawned workers."""

    run_id: str
    run_dir: str
    """The run folder; empty under an external launcher until rank 0 has made it."""
    config: RunConfig
    device_type: str
    started: str
    command: str
    self_launched: bool
    """True when clusterbench started the workers (the parent reads their files); False under
    torchrun/srun/mpirun (rank 0 gathers every rank's records after each benchmark)."""
    out: str | None = None
    """``--out``: where rank 0 makes the run folder under an external launcher."""
    nccl_debug: bool = False
    """Log NCCL at INFO on every rank, keep the logs and record transport/algorithm/protocol."""
    plugin_modules: tuple[str, ...] = ()
    """Modules to import in each worker before the run: they register benchmarks that are not
    built in (a spawned worker starts with only the built-in ones)."""


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_run_dir() -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("clusterbench-runs") / f"{stamp}-{socket.gethostname()}"


def prepare_run_dir(out: Path | str | None) -> Path:
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
