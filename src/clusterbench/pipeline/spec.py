"""What a run is before it starts: its spec, its folder, its exit codes."""

from __future__ import annotations

import datetime as dt
import errno
import os
import re
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterbench.config import ConfigError, RunConfig
from clusterbench.schema import PlanInfo
from clusterbench.units import format_bytes

if TYPE_CHECKING:
    from clusterbench.analyses.baseline import Baseline
    from clusterbench.report.export_request import ExportRequest
    from clusterbench.schema import Results

__all__ = [
    "MIN_FREE_BYTES",
    "MIN_FREE_BYTES_PER_WORKER",
    "FinishOptions",
    "RunSpec",
    "check_run_dir",
    "default_run_dir",
    "finish_options",
    "min_free_bytes",
    "now_utc",
    "prepare_run_dir",
    "run_id_for",
]


@dataclass(kw_only=True)
class FinishOptions:
    """What the run's finish does besides writing the run folder, asked for before the run
    starts and held by the process that finishes it (the one started by hand, or rank 0 under
    a launcher)."""

    baseline: Results | Baseline | None = None
    """``--baseline``, read before the run: the run is compared with it (comparison.json, its
    regressions among the findings)."""
    history: Path | None = None
    """The history database (None: the default one)."""
    record_history: bool = False
    """Record the run in the history (and judge the comparison's noise by its earlier runs)."""
    exports: ExportRequest | None = None
    """``--export``/``--pushgateway``."""

    def __getstate__(self) -> dict[str, Any]:
        # a spawned worker never finishes the run: the baseline (a whole run's results) stays
        return {**self.__dict__, "baseline": None}


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
    expect_nodes: int | None = None
    """``--expect-nodes``: the nodes the run must span; with fewer, rank 0 names those that came
    and the run ends failed (torchrun's rendezvous may start with the nodes that came)."""
    join_timeout_s: float = 300.0
    """``--join-timeout``: under srun/mpirun, how long rank 0 waits for every rank to join."""
    plan: PlanInfo | None = None
    """The plan printed before the run (expected seconds, the budget, the cuts to fit it); each
    benchmark's ``budget_s`` is the deadline it stops at."""
    phases: dict[str, float] = field(default_factory=dict)
    """The phases the starting process timed before the workers (start, plan), seconds."""
    launched_at: float | None = None
    """When (s since the epoch) clusterbench's own launch started the workers; None under an
    external launcher."""
    budget_ends_at: float | None = None
    """With ``--budget``: when (wall clock, s since the epoch) the last benchmark must be done
    for the command to end within its budget; each benchmark gets its share of what is left."""
    launcher: str | None = None
    """The external launcher that started the ranks, where it cannot be told from their
    environment alone (``ray``: Ray Train sets torchrun's variables)."""
    finish: FinishOptions = field(default_factory=FinishOptions)


def finish_options(
    baseline: str | Results | Baseline | None,
    exports: Sequence[str],
    pushgateway: str | None,
    *,
    history: Path | None,
    use_history: bool,
    finishes: bool,
) -> FinishOptions:
    """What the finish does besides writing the run, checked now (a bad baseline or export is
    a ConfigError before anything runs).  The baseline is read by the process that finishes
    the run only (other nodes need not have the file); the export formats are checked by every
    rank, so that a mistyped one stops them all rather than rank 0 alone."""
    from clusterbench.compare_io import load_compared
    from clusterbench.report.export import parse_formats
    from clusterbench.report.export_request import export_request

    options = FinishOptions(history=history, record_history=use_history)
    try:
        if not finishes:
            if exports:
                parse_formats(exports)
            return options
        options.exports = export_request(list(exports), pushgateway=pushgateway)
    except ValueError as exc:
        raise ConfigError(f"--export: {exc}") from None
    if isinstance(baseline, str):
        try:
            options.baseline = load_compared(baseline, history=history)
        except ValueError as exc:
            raise ConfigError(f"--baseline: {exc}") from None
    else:
        options.baseline = baseline
    return options


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


_STAMPED = re.compile(r"^\d{8}T\d{6}Z(-|$)")
"""A folder name that starts with a UTC time stamp (clusterbench's own: 20261206T071500Z-node7)."""


def run_id_for(run_dir: Path | str, started: str) -> str:
    """The run's id: its folder's name where that starts with a time stamp (clusterbench's own
    folders), else the name and the run's start (``run-20261206T071500Z``), so that runs written
    to folders of one name (``--out /scratch/cb/run`` every week) keep ids of their own."""
    name = Path(run_dir).name
    if _STAMPED.match(name):
        return name
    when = dt.datetime.fromisoformat(started).astimezone(dt.timezone.utc)
    return f"{name}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def default_run_dir() -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("clusterbench-runs") / f"{stamp}-{socket.gethostname()}"


MIN_FREE_BYTES = 1 << 20
"""Free space a run folder needs at least, besides :data:`MIN_FREE_BYTES_PER_WORKER`."""
MIN_FREE_BYTES_PER_WORKER = 64 << 10
"""Free space each worker's rank file, flight record and logs need at least.

The floor is far below what a run writes (the CPU quick suite on 2 workers writes ~650 KiB, a
GPU suite more): it catches only a folder that is obviously too small to hold a run.
"""


def min_free_bytes(workers: int) -> int:
    """The free space under ``--out`` below which a run of ``workers`` ranks is refused."""
    return MIN_FREE_BYTES + MIN_FREE_BYTES_PER_WORKER * max(1, workers)


def prepare_run_dir(out: Path | str | None, *, workers: int = 1) -> Path:
    """Create the run folder; refuse one that already holds a run, cannot be written or lies
    on a disk with less than :func:`min_free_bytes` free (then nothing is created)."""
    run_dir = Path(out) if out is not None else default_run_dir()
    check_run_dir(run_dir)
    _check_free_space(run_dir, workers)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--out {run_dir}: cannot write there ({exc.strerror})") from None
    return run_dir


def check_run_dir(out: Path | str | None) -> None:
    """ConfigError where :func:`prepare_run_dir` would refuse the folder whatever the number
    of workers (it holds a run; it, or the nearest folder above it that exists, is a file or
    cannot be written), with the same line; told without creating anything, before torch is
    imported.  The write test of :func:`prepare_run_dir` stays the judge of the rest."""
    run_dir = Path(out) if out is not None else default_run_dir()
    if (run_dir / "results.json").exists() or (run_dir / "ranks").exists():
        raise ConfigError(f"--out {run_dir}: already holds a run; choose another folder")
    try:
        error = _unwritable(run_dir)
    except OSError:  # a folder we may not look into: the write test says why
        return
    if error is not None:
        raise ConfigError(f"--out {run_dir}: cannot write there ({os.strerror(error)})")


def _unwritable(run_dir: Path) -> int | None:
    """The errno that making ``run_dir`` and writing in it would meet, else None."""
    existing = run_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():  # mkdir says EEXIST of the folder itself, ENOTDIR above it
        return errno.EEXIST if existing == run_dir else errno.ENOTDIR
    if os.statvfs(existing).f_flag & os.ST_RDONLY:
        return errno.EROFS
    if not os.access(existing, os.W_OK | os.X_OK, effective_ids=_EFFECTIVE_IDS):
        return errno.EACCES
    return None


_EFFECTIVE_IDS = os.access in os.supports_effective_ids


def _check_free_space(run_dir: Path, workers: int) -> None:
    existing = run_dir.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return  # not a folder we can look at: the write test below says why
    need = min_free_bytes(workers)
    if free < need:
        raise ConfigError(
            f"--out {run_dir}: only {format_bytes(free)} free on {existing}; a run of "
            f"{workers} worker(s) needs at least {format_bytes(need)} "
            f"({format_bytes(MIN_FREE_BYTES)} + {format_bytes(MIN_FREE_BYTES_PER_WORKER)} a worker)"
        )
