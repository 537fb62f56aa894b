"""Turn a run's records into results.json, summary.md and, once the run has ended,
report.html; map results to an exit code."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.assemble import RunMeta, assemble_results
from clusterbench.exits import EXIT_FAIL_FINDING, EXIT_OK, EXIT_RUN_ERROR
from clusterbench.report.drain import DRAIN_FILE, drain_json, run_drain_list
from clusterbench.report.html import render_html
from clusterbench.report.markdown import render_markdown
from clusterbench.runspec import RunSpec, now_utc
from clusterbench.runtime.flight import FlightState, read_flights, read_stacks
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.phases import ordered_phases
from clusterbench.runtime.records import Record, describe_write_error
from clusterbench.schema import Results
from clusterbench.views.cells import Section

__all__ = ["REPORT_FILE", "ResultsWriteError", "exit_code_for", "finalize", "write_results"]

REPORT_FILE = "report.html"


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
    """Assemble, analyse and write the run.  ``running``: more benchmarks are still to come
    (results.json and summary.md are rewritten; report.html waits for the end of the run)."""
    entered = time.monotonic()
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
        plan=spec.plan,
        phases=spec.phases,
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
    results.run.phase_seconds = ordered_phases(
        results.run.phase_seconds, {"finish": time.monotonic() - entered}
    )
    write_results(Path(spec.run_dir), results, html=results.run.status != "running")
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


def write_results(run_dir: Path, results: Results, *, html: bool = False) -> None:
    """results.json and summary.md (and drain.json after node-pair tests among three or more
    nodes), replaced together and atomically; with ``html``, then report.html.

    Each file is written to a temporary file first (flushed to the disk) and renamed over the
    old one only when complete.  Raises :class:`ResultsWriteError` when results.json or
    summary.md cannot be written: the temporary files are removed and the previous ones stay.
    report.html comes after them and never costs the results: a page that cannot be written (a
    disk with room for results.json but not for the page) or built is one warning line on
    stderr, and ``clusterbench report RUN`` builds it later.  ``html`` is for a run that has
    ended: the page inlines plotly (some 5 MB) and is not rebuilt after every benchmark.  The
    page is built first, so that results.json holds the time it took (``page``).
    """
    sections = registry.summary_sections(results, run_dir=run_dir)
    page = _build_report(run_dir, results, sections) if html else None  # timed: before results
    files = [
        (run_dir / "results.json", results.model_dump_json(indent=2)),
        (run_dir / "summary.md", render_markdown(results, sections)),
    ]
    drain = run_drain_list(results)
    if drain.judged:  # node pairs among 3+ nodes: the drain list, empty or not
        files.append((run_dir / DRAIN_FILE, drain_json(drain)))
    failing = _replace_all(files)
    if failing is not None:
        path, exc = failing
        raise ResultsWriteError(path, exc, results)
    if page is not None:
        _write_report(run_dir, page)


def _build_report(run_dir: Path, results: Results, sections: list[Section]) -> str | None:
    """report.html's text, its build timed into ``run.phase_seconds`` (page); None, with one
    warning line, when it cannot be built."""
    entered = time.monotonic()
    try:
        page = render_html(results, sections, registry.report_plots(results, run_dir=run_dir))
    except Exception as exc:  # a page that cannot be built must not cost the run its results
        _warn(f"cannot build {REPORT_FILE}: {type(exc).__name__}: {exc}")
        return None
    results.run.phase_seconds = ordered_phases(
        results.run.phase_seconds, {"page": time.monotonic() - entered}
    )
    return page


def _write_report(run_dir: Path, page: str) -> None:
    path = run_dir / REPORT_FILE
    failing = _replace_all([(path, page)])
    if failing is not None:
        _warn(
            f"cannot write {REPORT_FILE}: {describe_write_error(failing[1], path)}; results.json "
            f"is complete (clusterbench report {run_dir} builds the page)"
        )


def _warn(line: str) -> None:
    print(f"clusterbench: warning: {line}", file=sys.stderr)


def _replace_all(files: list[tuple[Path, str]]) -> tuple[Path, OSError] | None:
    """Write every file to a temporary beside it, then rename them all over the old ones; on
    an OSError remove the temporaries and return the path that failed and why."""
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
        return failing, exc
    return None


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
