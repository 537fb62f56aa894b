"""The run folder's pages, written together and once: results.json and summary.md (and
drain.json after node-pair tests among three or more nodes), then report.html."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from clusterbench.analyses.run import RunAnalysis
from clusterbench.report.drain import DRAIN_FILE, drain_json
from clusterbench.report.html import render_html
from clusterbench.report.markdown import render_markdown
from clusterbench.runtime.phases import ordered_phases
from clusterbench.runtime.records import describe_write_error
from clusterbench.schema import Results

__all__ = ["REPORT_FILE", "ResultsWriteError", "replace_all", "write_results"]

REPORT_FILE = "report.html"


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


def write_results(run: RunAnalysis, *, html: bool = False) -> None:
    """results.json and summary.md (and drain.json after node-pair tests among three or more
    nodes) of ``run`` into its folder, replaced together and atomically; with ``html``, then
    report.html.

    Each file is written to a temporary file first (flushed to the disk) and renamed over the
    old one only when complete.  Raises :class:`ResultsWriteError` when results.json or
    summary.md cannot be written: the temporary files are removed and the previous ones stay.
    report.html comes after them and never costs the results: a page that cannot be written (a
    disk with room for results.json but not for the page) or built is one warning line on
    stderr, and ``clusterbench report RUN`` builds it later.  The page is built first, so that
    results.json holds the time it took (``page``).
    """
    assert run.run_dir is not None
    run_dir, results = run.run_dir, run.results
    page = _build_report(run) if html else None  # timed: before results.json is written
    files = [
        (run_dir / "results.json", results.model_dump_json(indent=2)),
        (run_dir / "summary.md", render_markdown(run)),
    ]
    if run.drain.judged:  # node pairs among 3+ nodes: the drain list, empty or not
        files.append((run_dir / DRAIN_FILE, drain_json(run.drain)))
    failing = replace_all(files)
    if failing is not None:
        path, exc = failing
        raise ResultsWriteError(path, exc, results)
    if page is not None:
        _write_report(run_dir, page)


def _build_report(run: RunAnalysis) -> str | None:
    """report.html's text, its build timed into ``run.phase_seconds`` (page); None, with one
    warning line, when it cannot be built."""
    entered = time.monotonic()
    try:
        page = render_html(run)
    except Exception as exc:  # a page that cannot be built must not cost the run its results
        _warn(f"cannot build {REPORT_FILE}: {type(exc).__name__}: {exc}")
        return None
    run.results.run.phase_seconds = ordered_phases(
        run.results.run.phase_seconds, {"page": time.monotonic() - entered}
    )
    return page


def _write_report(run_dir: Path, page: str) -> None:
    path = run_dir / REPORT_FILE
    failing = replace_all([(path, page)])
    if failing is not None:
        _warn(
            f"cannot write {REPORT_FILE}: {describe_write_error(failing[1], path)}; results.json "
            f"is complete (clusterbench report {run_dir} builds the page)"
        )


def _warn(line: str) -> None:
    print(f"clusterbench: warning: {line}", file=sys.stderr)


def replace_all(files: list[tuple[Path, str]]) -> tuple[Path, OSError] | None:
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
