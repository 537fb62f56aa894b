"""Turn a run's records into results.json and summary.md; map results to an exit code."""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterbench import __version__
from clusterbench.analysis import analyze
from clusterbench.assemble import RunMeta, assemble_results
from clusterbench.config import RunConfig
from clusterbench.report.markdown import render_markdown
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.schema import Results

__all__ = ["RunSpec", "exit_code_for", "finalize", "now_utc", "write_results"]

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
    nccl_debug: bool = False
    """Log NCCL at INFO on every rank, keep the logs and record transport/algorithm/protocol."""


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


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
        finished=now_utc(),
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
    # Findings benchmarks recorded themselves (e.g. doctor's checks) come first, then analysis.
    recorded = results.findings
    results.findings = [*recorded, *analyze(results, spec.config.thresholds)]
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
