"""The end of a run, once: ``finish()`` turns the ranks' records into the run's results,
analyses them, compares them with the baseline and the history when asked, writes
results.json, summary.md and report.html (each once), records the run in the history and runs
the exports; and the exit code of the results."""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench import registry
from clusterbench._version import __version__
from clusterbench.analyses.run import RunAnalysis, analyze
from clusterbench.compare_io import compare_with, previous_runs, write_comparison
from clusterbench.exits import EXIT_FAIL_FINDING, EXIT_OK, EXIT_RUN_ERROR
from clusterbench.pipeline.assemble import RunMeta, assemble_results
from clusterbench.pipeline.spec import FinishOptions, RunSpec, now_utc
from clusterbench.report.run_folder import (
    REPORT_FILE,
    ResultsWriteError,
    replace_all,
    write_results,
)
from clusterbench.runtime.flight import FlightState, read_flights, read_stacks
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.phases import ordered_phases
from clusterbench.runtime.records import Record, describe_write_error
from clusterbench.schema import Results

__all__ = [
    "REPORT_FILE",
    "Finished",
    "ResultsWriteError",
    "exit_code_for",
    "finish",
    "finish_results",
    "prepare_finish",
    "write_partial",
    "write_results",
]


def prepare_finish() -> None:
    """Import what finishing a run reads (the benchmarks' and the run parts' findings,
    sections and figures, which finish resolves by name) and pack the page's plotly.js, ahead
    of the finish: a run's own launch calls this in a thread while its workers run, and so
    takes it off the time from the last benchmark to the printed verdict (on lease G's H100
    machine the first run's page took 0.31 s, the second's, with plotly.js packed, 0.05 s:
    docs/results/command-startup.md)."""
    for part in (*registry.all_benchmarks(), *registry.run_parts()):
        for what in ("findings", "section", "figures", "compute"):
            ref = getattr(part, what, None)
            if isinstance(ref, str):
                registry.resolve(ref)
    from clusterbench.report.console import render_summary  # noqa: F401  (the print's)
    from clusterbench.report.html_assets import plotly_packed

    plotly_packed()


@dataclass(kw_only=True)
class Finished:
    """A finished run: its analysis (results, comparison, ...) and what became of the rest."""

    run: RunAnalysis
    exit_code: int
    history: Path | None = None
    """The history database the run was recorded in (None: not recorded)."""
    exported: list[str] = field(default_factory=list)
    """Where each export went (``csv: <path>``), to print after the run's summary."""

    @property
    def results(self) -> Results:
        return self.run.results


def finish(
    spec: RunSpec,
    *,
    records: list[Record],
    failures: list[WorkerFailure],
    world_size: int,
    interrupted: bool = False,
    flights: dict[int, FlightState] | None = None,
) -> Finished:
    """Assemble the run from ``records``, analyse it once, compare it with ``spec.finish``'s
    baseline, write its folder, record it in the history and export it.

    Raises :class:`ResultsWriteError` when results.json or summary.md cannot be written (the
    run is neither recorded nor exported then: its folder holds the ranks' records).  The
    comparison, the history and the exports cost one warning line each when they fail, not
    the run.
    """
    entered = time.monotonic()
    results = _assembled(spec, records=records, failures=failures, world_size=world_size,
                         interrupted=interrupted, flights=flights)  # fmt: skip
    return finish_results(results, run_dir=Path(spec.run_dir), options=spec.finish,
                          entered=entered)  # fmt: skip


def finish_results(
    results: Results, *, run_dir: Path, options: FinishOptions, entered: float | None = None
) -> Finished:
    """The finish of results assembled already (a run's, or another tool's output imported by
    ``clusterbench import``): analyse them once, compare them with ``options.baseline``, write
    the folder ``run_dir``, record them in the history and export them.  ``entered``: when the
    finish began (time.monotonic()), for the ``finish`` phase.  Raises
    :class:`ResultsWriteError` as :func:`finish` does."""
    if entered is None:
        entered = time.monotonic()
    run = RunAnalysis(results, run_dir=run_dir)
    # Findings benchmarks recorded themselves (e.g. doctor's checks) come first, then analysis.
    results.findings = [*results.findings, *analyze(run)]
    if options.baseline is not None:
        previous, warning = previous_runs(
            results, path=options.history, enabled=options.record_history
        )
        if warning is not None:
            _warn(warning)
        run.add_comparison(
            compare_with(options.baseline, results, run.thresholds, previous=previous)
        )
    results.run.phase_seconds = ordered_phases(
        results.run.phase_seconds, {"finish": time.monotonic() - entered}
    )
    write_results(run, html=True)
    if run.comparison is not None:
        _write_comparison(run)
    code = exit_code_for(results)
    if code == EXIT_OK and run.comparison is not None and run.comparison.failed:
        code = EXIT_FAIL_FINDING
    recorded = _record(run, options) if options.record_history else None
    exported: list[str] = []
    if options.exports is not None:
        from clusterbench.report.export_request import do_exports

        failed = do_exports(results, options.exports, run_dir=run_dir, say=exported.append)
        for line in failed:
            _warn(f"export not done: {line}")
    return Finished(run=run, exit_code=code, history=recorded, exported=exported)


def write_partial(
    spec: RunSpec, *, records: list[Record], world_size: int, flights: dict[int, FlightState]
) -> None:
    """results.json of a run still going (status ``running``): what its ranks have measured so
    far, assembled, not analysed; written under a launcher after each benchmark, so that a run
    whose rank 0 dies keeps what it had gathered.  Raises :class:`ResultsWriteError`."""
    results = _assembled(spec, records=records, failures=[], world_size=world_size,
                         running=True, flights=flights)  # fmt: skip
    path = Path(spec.run_dir) / "results.json"
    failing = replace_all([(path, results.model_dump_json(indent=2))])
    if failing is not None:
        raise ResultsWriteError(failing[0], failing[1], results)


def _assembled(
    spec: RunSpec,
    *,
    records: list[Record],
    failures: list[WorkerFailure],
    world_size: int,
    interrupted: bool = False,
    running: bool = False,
    flights: dict[int, FlightState] | None = None,
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
        plan=spec.plan,
        phases=spec.phases,
        not_applicable=_not_applicable(spec),
    )
    return assemble_results(
        records=records,
        meta=meta,
        failures=failures,
        flights=read_flights(Path(spec.run_dir)) if flights is None else flights,
        stacks=read_stacks(Path(spec.run_dir)),
        interrupted=interrupted,
        running=running,
    )


def _not_applicable(spec: RunSpec) -> dict[str, str]:
    """The run's benchmarks that its device has no form of, with the reason a rank gives when
    it skips them (pipeline/rank.py)."""
    found = {name: registry.find(name) for name in spec.config.benchmarks}
    return {
        name: f"no {spec.device_type} form"
        for name, bench in found.items()
        if bench is not None and not bench.supports(spec.device_type)
    }


def _write_comparison(run: RunAnalysis) -> None:
    assert run.comparison is not None and run.run_dir is not None
    try:
        write_comparison(run.run_dir, run.comparison)
    except OSError as exc:
        _warn(f"comparison.json not written: {describe_write_error(exc, run.run_dir)}")


def _record(run: RunAnalysis, options: FinishOptions) -> Path | None:
    """Record the run; a history that cannot take it costs one warning line, not the run."""
    from clusterbench.history_db import HistoryError, open_history

    assert run.run_dir is not None
    try:
        with open_history(options.history) as store:
            store.record(run.results, run.run_dir)
    except HistoryError as exc:
        _warn(f"history not recorded: {exc}; the run folder {run.run_dir} is the record; "
              "rebuild with 'clusterbench history import DIR...'")  # fmt: skip
        return None
    return store.path


def _warn(line: str) -> None:
    print(f"clusterbench: warning: {line}", file=sys.stderr)


def exit_code_for(results: Results) -> int:
    if results.run.status in ("failed", "interrupted"):
        return EXIT_RUN_ERROR
    if any(f.severity == "fail" for f in results.findings):
        return EXIT_FAIL_FINDING
    return EXIT_OK
