"""``clusterbench history``: the recorded runs, a metric's trend over them (``show``, the
default command) and ``import`` of run folders into the history database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from clusterbench.cli.common import PlainUsage, WholeSummaryGroup, _console, _usage_error, app
from clusterbench.exits import EXIT_RUN_ERROR
from clusterbench.thresholds import Thresholds

__all__ = ["history_app", "history_import", "history_show"]

_HISTORY_HELP = """Recorded runs and a metric's trend over them.

Every 'clusterbench run' is recorded in a local SQLite database: its metadata and every
measurement, with its whole results.json.  The database is $CLUSTERBENCH_HISTORY, else
$XDG_DATA_HOME/clusterbench/history.sqlite, else ~/.local/share/clusterbench/history.sqlite;
--history PATH picks another (for 'run' too) and 'run --no-history' records nothing.  The run
folders stay the record: 'import' rebuilds the database from them.

\b
  clusterbench history                       the newest runs (--limit N, --json)
  clusterbench history SELECTOR              a metric's trend per host and device
  clusterbench history import DIR...         record run folders (or folders of them)

\b
SELECTOR is BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE; the brackets and @ are optional:
  gemm.tflops_best                           every dtype, host and device
  gemm.tflops[dtype=bf16,m=8192]             only these params
  memory.bandwidth@node7                     one host (shell wildcards: @node*)
  gemm.tflops_best@node7/cuda:3              one device of one host

A change point is where the series moved to a new level: the medians before and after it
differ by more than both the practical limit (thresholds.regression_min_rel, 5%; on CPU
workers regression_min_rel_cpu, 30%; for latencies and durations also regression_min_abs_us /
_s) and regression_noise_sigmas (3) x the run-to-run noise (1.4826 x the median change from
one run to the next / sqrt 2), with at least 3 runs before it and 2 from it on.  --config FILE
or --set thresholds.KEY=VALUE change them.

Exit codes: 0 done; 1 import skipped some folders; 2 bad usage (an unknown selector: one line
naming close matches); 3 the database could not be read or written.  'clusterbench history
show --help' and 'clusterbench history import --help' list the options.
"""


class _HistoryGroup(WholeSummaryGroup):
    """``history [SELECTOR]`` is ``history show [SELECTOR]``; ``history import`` imports."""

    # ctx: click's Context, which typer vendors in some versions and imports in others
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


history_app = typer.Typer(
    cls=_HistoryGroup, help=_HISTORY_HELP, rich_markup_mode=None, add_completion=False
)
app.add_typer(history_app, name="history")

HistoryOption = Annotated[
    Path | None,
    typer.Option(
        "--history",
        metavar="FILE",
        help="The history database (default: $CLUSTERBENCH_HISTORY, else "
        "$XDG_DATA_HOME/clusterbench/history.sqlite, else "
        "~/.local/share/clusterbench/history.sqlite).",
    ),
]
_DEFAULT_LIST_LIMIT = 20


@history_app.command("show", cls=PlainUsage)
def history_show(
    selector: Annotated[
        str | None,
        typer.Argument(
            metavar="SELECTOR",
            help="BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE; without it, list runs.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help=f"The newest N runs (default: {_DEFAULT_LIST_LIMIT} in the list, all in a trend).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
    history: HistoryOption = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help="TOML file whose [thresholds] judge the change points."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="A threshold: thresholds.KEY=VALUE, e.g. thresholds.regression_min_rel=0.1",
        ),
    ] = None,
) -> None:
    """The default command: list runs, or with SELECTOR a metric's trend (see 'history --help')."""
    from clusterbench.analyses.trend import parse_selector, select, trends
    from clusterbench.history_db import HistoryError, open_history
    from clusterbench.report.history import render_runs, render_trends, runs_json, trends_json

    if limit is not None and limit < 1:
        raise _usage_error(f"--limit must be at least 1, got {limit}")
    try:
        thresholds = _history_thresholds(config, set_ or [])
        with open_history(history) as store:
            if selector is None:
                rows = store.runs(limit=limit or _DEFAULT_LIST_LIMIT)
                if as_json:
                    typer.echo(runs_json(rows))
                    return
                render_runs(rows, _console(), where=str(store.path), cwd=Path.cwd())
                total = store.num_runs()
                if total > len(rows):
                    _console().print(f"{len(rows)} of {total} runs shown (--limit N for more)")
                return
            chosen = parse_selector(selector)
            _check_metric(chosen.name, store.metric_names(), where=str(store.path))
            points = select(store.points(chosen.benchmark, chosen.metric), chosen)
    except HistoryError as exc:
        typer.echo(f"clusterbench: error: {exc}", err=True)
        raise typer.Exit(EXIT_RUN_ERROR) from None
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    found = trends(points, thresholds=thresholds, last=limit)
    if as_json:
        typer.echo(trends_json(found))
        return
    render_trends(found, _console(), noise_sigmas=thresholds.regression_noise_sigmas)


def _check_metric(name: str, known: list[str], *, where: str) -> None:
    import difflib

    if name in known:
        return
    if not known:
        raise ValueError(f"no runs recorded in {where}")
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    close += [k for k in known if k.startswith(name.split(".")[0] + ".") and k not in close]
    hint = (
        f"close matches: {', '.join(close[:8])}" if close else f"recorded: {', '.join(known[:8])}"
    )
    raise ValueError(f"no measurements of {name!r} in {where}; {hint}")


def _history_thresholds(config: Path | None, sets: list[str]) -> Thresholds:
    from clusterbench.config import build_run_config

    for item in sets:
        if not item.startswith("thresholds."):
            raise ValueError(f"--set {item}: history takes only thresholds.KEY=VALUE")
    if config is None and not sets:
        return Thresholds()
    run_config = build_run_config(
        suite=None, device_type="cpu", config_file=config, sets=sets, only=[], skip=[],
        timeout_s=None,
    )  # fmt: skip
    return run_config.thresholds


@history_app.command("import", cls=PlainUsage)
def history_import(
    dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR",
            help="Run folders, results.json files, or folders holding run folders.",
        ),
    ],
    history: HistoryOption = None,
) -> None:
    """Record run folders in the history (again): the database rebuilt from the run folders.
    A run already recorded is replaced; folders that cannot be read are listed, one line each."""
    from clusterbench.compare_io import load_run
    from clusterbench.history_db import HistoryError, open_history
    from clusterbench.history_import import find_run_folders
    from clusterbench.report.history import import_progress

    folders, problems = find_run_folders(dirs)
    imported = 0
    try:
        with open_history(history) as store, import_progress(len(folders)) as advance:
            for folder in folders:
                try:
                    results = load_run(folder)
                except ValueError as exc:  # one line, naming the folder or file
                    problems.append(str(exc))
                else:
                    store.record(results, folder)
                    imported += 1
                advance()
    except HistoryError as exc:
        typer.echo(f"clusterbench: error: {exc} ({imported} run(s) imported before)", err=True)
        raise typer.Exit(EXIT_RUN_ERROR) from None
    for line in problems:
        typer.echo(f"clusterbench: skipped: {line}", err=True)
    typer.echo(f"imported {imported} run(s) into {store.path}" + (
        f"; {len(problems)} skipped" if problems else ""))  # fmt: skip
    raise typer.Exit(1 if problems else 0)
