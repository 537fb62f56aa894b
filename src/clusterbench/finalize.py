"""Turn a run's records into results.json and summary.md; map results to an exit code."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.assemble import RunMeta, assemble_results
from clusterbench.report.markdown import render_markdown
from clusterbench.runspec import EXIT_FAIL_FINDING, EXIT_OK, EXIT_RUN_ERROR, RunSpec, now_utc
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.records import Record
from clusterbench.schema import Results

__all__ = ["exit_code_for", "finalize", "write_results"]


def finalize(
    spec: RunSpec,
    *,
    records: list[Record],
    failures: list[WorkerFailure],
    world_size: int,
    interrupted: bool = False,
    running: bool = False,
) -> Results:
    """Assemble, analyse and write the run.  ``running``: more benchmarks are still to come."""
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
        records=records, meta=meta, failures=failures, interrupted=interrupted, running=running
    )
    # Findings benchmarks recorded themselves (e.g. doctor's checks) come first, then analysis.
    recorded = results.findings
    results.findings = [*recorded, *registry.analyze(results, spec.config.thresholds)]
    write_results(Path(spec.run_dir), results)
    return results


def write_results(run_dir: Path, results: Results) -> None:
    """results.json and summary.md, each replaced atomically."""
    summary = render_markdown(results, registry.summary_sections(results))
    for name, text in (
        ("results.json", results.model_dump_json(indent=2)),
        ("summary.md", summary),
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
