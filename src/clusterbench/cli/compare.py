"""``clusterbench compare``: two runs, or a run and a baseline; the verdict, then the
regressions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli.common import PlainUsage, _compare_thresholds, _console, _usage_error, app

if TYPE_CHECKING:
    from clusterbench.analyses.baseline import Baseline
    from clusterbench.schema import Results

__all__ = ["compare_runs"]


def _load_base(source: str, *, option: str, history: Path | None = None) -> Results | Baseline:
    """A run (or a run id of the history), a baseline file or ``builtin``; a bad one is one
    line and exit 2."""
    from clusterbench.compare_io import load_compared

    try:
        return load_compared(source, history=history)
    except ValueError as exc:
        raise _usage_error(f"{option}: {exc}") from None


_COMPARE_HELP = """Compare two runs, or a run and a baseline: the verdict, then the regressions.

BASE is a run folder or results.json, a baseline file ('clusterbench baseline build') or
'builtin' (known-good figures per GPU model); NEW is a run folder or results.json.  Either run
may also be named by the run id 'clusterbench history' prints (the newest run of that id).  Figures
are matched by benchmark, metric, params and host/device (--match gpu: GPU index and model,
hostname ignored).  A change is a regression or improvement only beyond both the practical
limit of its unit (thresholds.regression_min_rel, 5%; on CPU workers regression_min_rel_cpu;
microsecond and second floors for latencies and durations) and the noise: with 3 or more
earlier comparable runs in the history, a Student t test of the change against the figure's
run-to-run spread (never below that of its kind: one metric on one device); else, on GPUs
only and beyond regression_min_rel_unknown (15%), a Mann-Whitney test of the two runs'
repeats.  The false alarms of all rows are held at thresholds.regression_false_alarms (1%,
Benjamini-Hochberg): with nothing changed, a comparison reports any change at most that
often.  Tails (max, p99) are shown, not judged.  With no estimate of the noise a row stays
unchanged and says so.

By default: the verdict line, the regressions by benchmark (at most 10 rows each, worst
first) and a count of the rest; --all lists every row with its noise.

Exit codes: 0 no fail regression; 1 some fail regression (beyond regression_fail_rel, 20%, and
only with the run-to-run noise known); 2 bad input (one line).
"""


@app.command("compare", cls=PlainUsage, help=_COMPARE_HELP)
def compare_runs(
    base: Annotated[
        str,
        typer.Argument(
            metavar="BASE",
            help="Run folder or results.json, a run id of the history, a baseline file, or "
            "'builtin'.",
            show_default=False,
        ),
    ],
    new: Annotated[
        str,
        typer.Argument(
            metavar="NEW",
            help="Run folder or results.json of the new run, or its run id in the history.",
            show_default=False,
        ),
    ],
    match: Annotated[
        str,
        typer.Option(
            metavar="host|gpu",
            help="host: match figures by host and device; gpu: by GPU index and model, "
            "hostname ignored (one node against another).",
        ),
    ] = "host",
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            help="List every row with its noise, and the findings (default: the regressions "
            "by benchmark, the rest counted).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="The whole comparison as JSON, every row.")
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help="TOML file whose [thresholds] judge the changes."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="A threshold, repeatable: thresholds.KEY=VALUE, e.g. "
            "thresholds.regression_min_rel=0.1 (default: the built-in thresholds).",
        ),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="FILE",
            help="History database whose earlier comparable runs give the run-to-run noise "
            "(default: as 'clusterbench run' records them).",
        ),
    ] = None,
    no_history: Annotated[
        bool, typer.Option("--no-history", help="Judge without earlier runs from the history.")
    ] = False,
) -> None:
    from clusterbench.compare_io import compare_with, load_recorded, previous_runs
    from clusterbench.report.compare import render_comparison

    if match not in ("host", "gpu"):
        raise _usage_error(f"--match must be host or gpu, got {match!r}")
    if history is not None and no_history:
        raise _usage_error("--history and --no-history together: choose one")
    try:
        thresholds = _compare_thresholds(config, set_ or [])
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    against = _load_base(base, option="BASE", history=history)
    try:
        results = load_recorded(new, history=history)
    except ValueError as exc:
        raise _usage_error(f"NEW: {exc}") from None
    previous, warning = previous_runs(results, path=history, enabled=not no_history)
    if warning is not None:
        typer.echo(f"clusterbench: warning: {warning}", err=True)
    comparison = compare_with(
        against, results, thresholds, match="gpu" if match == "gpu" else "host", previous=previous
    )
    if as_json:
        typer.echo(comparison.model_dump_json(indent=2))
    else:
        render_comparison(comparison, _console(), show_all=show_all)
    raise typer.Exit(1 if comparison.failed else 0)
