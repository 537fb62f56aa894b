"""``clusterbench report``: the HTML report of a run, or of a comparison of two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clusterbench.cli.common import PlainUsage, _compare_thresholds, _usage_error, app
from clusterbench.runtime.atomic import write_text_atomic
from clusterbench.thresholds import Thresholds

__all__ = ["report"]

_REPORT_HELP = """Build the HTML report of a run, or of a comparison of two runs.

'clusterbench report RUN' rebuilds the run's report.html from its results.json (RUN: the run
folder or its results.json; written into the run folder unless -o names another file).
Every run writes one at its end; this is for a run whose results.json was changed, or one
written by an older clusterbench.

'clusterbench report BASE NEW' renders the comparison of NEW with BASE as 'clusterbench
compare BASE NEW' judges it (the same matching, the thresholds --config and --set give, the
run-to-run noise of earlier comparable runs in the history): the comparison's verdict and
table at the top, then NEW's report with BASE drawn beside it where a plot can show it.
BASE is a run folder or results.json, a baseline file or 'builtin'; written to
comparison.html in NEW's folder unless -o names another file.

The page is one file that opens offline, from a file share or a laptop: plotly's JavaScript
is inlined and nothing is fetched.  The path written is printed.

Exit codes: 0 written (whatever the run's findings or the comparison's verdicts); 2 bad input
or an output that cannot be written (one line).
"""


@app.command("report", cls=PlainUsage, help=_REPORT_HELP)
def report(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN|BASE",
            help="Run folder or results.json; with NEW: the base (also a baseline file or "
            "'builtin').",
            show_default=False,
        ),
    ],
    new: Annotated[
        Path | None,
        typer.Argument(
            metavar="NEW",
            help="Run folder or results.json of the new run: renders the comparison.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            "--output",
            metavar="FILE",
            help="The HTML file to write (default: report.html in RUN's folder, or "
            "comparison.html in NEW's).",
        ),
    ] = None,
    match: Annotated[
        str,
        typer.Option(
            metavar="host|gpu",
            help="With NEW: host (match figures by host and device) or gpu (by GPU index and "
            "model, hostname ignored), as in 'clusterbench compare'.",
        ),
    ] = "host",
    show_all: Annotated[
        bool,
        typer.Option("--all", help="With NEW: list the unchanged rows too (default: counted)."),
    ] = False,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="FILE",
            help="With NEW: the history database whose earlier comparable runs give the "
            "run-to-run noise (default: as 'clusterbench run' records them).",
        ),
    ] = None,
    no_history: Annotated[
        bool,
        typer.Option("--no-history", help="With NEW: judge without earlier runs from the history."),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="With NEW: TOML file whose [thresholds] judge the changes.",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="With NEW: a threshold, repeatable: thresholds.KEY=VALUE (default: the "
            "built-in thresholds).",
        ),
    ] = None,
) -> None:
    # The built-in benchmarks (their sections and figures) are registered: cli imports config.
    if new is None:
        for given, option in (
            (match != "host", "--match"),
            (show_all, "--all"),
            (history is not None, "--history"),
            (no_history, "--no-history"),
            (config is not None, "--config"),
            (bool(set_), "--set"),
        ):
            if given:
                raise _usage_error(f"{option} needs two runs: clusterbench report BASE NEW")
        page, default = _run_page(run)
    else:
        if match not in ("host", "gpu"):
            raise _usage_error(f"--match must be host or gpu, got {match!r}")
        if history is not None and no_history:
            raise _usage_error("--history and --no-history together: choose one")
        try:
            thresholds = _compare_thresholds(config, set_ or [])
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
        page, default = _comparison_page(
            run,
            new,
            thresholds,
            match=match,
            show_all=show_all,
            history=history,
            use_history=not no_history,
        )
    path = output if output is not None else default
    try:
        write_text_atomic(path, page)
    except OSError as exc:
        raise _usage_error(f"cannot write {path}: {exc.strerror or exc}") from None
    typer.echo(str(path))


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def _run_page(source: str) -> tuple[str, Path]:
    from clusterbench.analyses.run import RunAnalysis
    from clusterbench.compare_io import load_run
    from clusterbench.report.html import render_html
    from clusterbench.report.run_folder import REPORT_FILE

    try:
        results = load_run(source)
    except ValueError as exc:
        raise _usage_error(f"RUN: {exc}") from None
    folder = _folder(Path(source))
    return render_html(RunAnalysis(results, run_dir=folder)), folder / REPORT_FILE


def _comparison_page(
    base_source: str,
    new_source: Path,
    thresholds: Thresholds,
    *,
    match: str,
    show_all: bool,
    history: Path | None,
    use_history: bool,
) -> tuple[str, Path]:
    """The comparison as ``clusterbench compare`` makes it, on top of
    NEW's report whose figures get BASE's measurements (when BASE is a run)."""
    from clusterbench.analyses.run import RunAnalysis
    from clusterbench.compare_io import compare_with, load_compared, load_run, previous_runs
    from clusterbench.report.html import render_html
    from clusterbench.schema import Results

    try:
        against = load_compared(base_source)
    except ValueError as exc:
        raise _usage_error(f"BASE: {exc}") from None
    try:
        results = load_run(new_source)
    except ValueError as exc:
        raise _usage_error(f"NEW: {exc}") from None
    previous, warning = previous_runs(results, path=history, enabled=use_history)
    if warning is not None:
        typer.echo(f"clusterbench: warning: {warning}", err=True)
    comparison = compare_with(
        against,
        results,
        thresholds,
        match="gpu" if match == "gpu" else "host",
        previous=previous,
    )
    base = against if isinstance(against, Results) else None
    run = RunAnalysis(results, run_dir=_folder(new_source), comparison=comparison, base=base)
    page = render_html(run, show_all=show_all)
    return page, _folder(new_source) / "comparison.html"
