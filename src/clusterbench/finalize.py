"""Turn a run's records into results.json and summary.md; map results to an exit code."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.assemble import RunMeta, assemble_results
from clusterbench.report.markdown import render_markdown
from clusterbench.runspec import EXIT_FAIL_FINDING, EXIT_OK, EXIT_RUN_ERROR, RunSpec, now_utc
from clusterbench.runtime.flight import FlightState, read_flights, read_stacks
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.records import Record, describe_write_error
from clusterbench.schema import Results

__all__ = ["ResultsWriteError", "exit_code_for", "finalize", "write_results"]


def finalize(
    spec: RunSpec,
    *,
    records: list[Record],
    failures: list[WorkerFailure],
    world_size: int,
    interrupted: bool = False,
    running: bool = False,
    flights: dict[int, FlightState] | None = None,
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
        records=records,
        meta=meta,
        failures=failures,
        flights=read_flights(Path(spec.run_dir)) if flights is None else flights,
        stacks=read_stacks(Path(spec.run_dir)),
        interrupted=interrupted,
        running=running,
    )
    # Findings benchmarks recorded themselves (e.g. doctor's checks) come first, then analysis.
    recorded = results.findings
    results.findings = [*recorded, *registry.analyze(results, spec.config.thresholds)]
    write_results(Path(spec.run_dir), results)
    return results


class ResultsWriteError(Exception):
    """results.json or summary.md could not be written (a full or failing disk).

    The files already there are left as they were and no temporary file is left behind;
    ``results`` are the run's results as they are in memory.  ``str()``: one line,
    ``cannot write results: no space left on <path>``.
    """

    def __init__(self, path: Path, exc: OSError, results: Results) -> None:
        super().__init__(f"cannot write results: {describe_write_error(exc, path)}")
        self.path = path
        self.errno = exc.errno
        self.strerror = exc.strerror
        self.results = results


def write_results(run_dir: Path, results: Results) -> None:
    """results.json and summary.md, replaced together and atomically.

    Both are written to temporary files first (flushed to the disk) and renamed over the old
    ones only when both are complete.  Raises :class:`ResultsWriteError` when a write fails:
    the temporary files are removed and the previous results.json and summary.md stay.
    """
    summary = render_markdown(results, registry.summary_sections(results))
    files = [
        (run_dir / "results.json", results.model_dump_json(indent=2)),
        (run_dir / "summary.md", summary),
    ]
    tmps = [path.with_name(f".{path.name}.tmp") for path, _ in files]
    failing = files[0][0]
    try:
        for (path, text), tmp in zip(files, tmps, strict=True):
            failing = path
            _write_synced(tmp, text)
        for (path, _), tmp in zip(files, tmps, strict=True):
            failing = path
            os.replace(tmp, path)
    except OSError as exc:
        for tmp in tmps:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise ResultsWriteError(failing, exc, results) from None


def _write_synced(path: Path, text: str) -> None:
    # fsync: a disk that fails only when the data reaches it (NFS, a quota) fails here, before
    # the rename would have replaced a good file with a bad one.
    with open(path, "wb") as fh:
        fh.write(text.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def exit_code_for(results: Results) -> int:
    if results.run.status in ("failed", "interrupted"):
        return EXIT_RUN_ERROR
    if any(f.severity == "fail" for f in results.findings):
        return EXIT_FAIL_FINDING
    return EXIT_OK
