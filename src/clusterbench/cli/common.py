"""What every command shares: the typer app, the console, one-line usage errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
from rich.console import Console

from clusterbench.exits import EXIT_USAGE
from clusterbench.thresholds import Thresholds

if TYPE_CHECKING:
    from clusterbench.pipeline.start import RunOutcome

__all__ = [
    "PlainUsage",
    "WholeSummaryGroup",
    "_compare_thresholds",
    "_console",
    "_print_run",
    "_split",
    "_usage_error",
    "app",
]


class PlainUsage(typer.core.TyperCommand):
    """A command whose usage line names its required arguments bare (``compare [OPTIONS] BASE
    NEW``), as most tools do, not in braces, which read like placeholders to fill."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [_unbraced(piece) for piece in super().collect_usage_pieces(ctx)]

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        # an argument's metavar names its value (RUN, FILE...): no "<path>" or "<list[Path]>"
        # of its Python type beside it
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument):
                setattr(param, "display_type_rich", _no_type)  # noqa: B010
        super().format_help(ctx, formatter)

    def get_short_help_str(self, limit: int = 45) -> str:
        # the command lists (clusterbench --help) show the first sentence whole, wrapped, where
        # click cuts it at the screen's width mid-phrase ("or join...")
        return super().get_short_help_str(limit=sys.maxsize)


class WholeSummaryGroup(typer.core.TyperGroup):
    """A command group shown in its parent's list by its first sentence whole (see
    ``PlainUsage.get_short_help_str``)."""

    def get_short_help_str(self, limit: int = 45) -> str:
        return super().get_short_help_str(limit=sys.maxsize)


def _no_type(ctx: Any) -> str:
    return ""


def _unbraced(piece: str) -> str:
    if piece.startswith("{") and "}" in piece:
        name, _, rest = piece[1:].partition("}")
        return name + rest
    return piece


app = typer.Typer(
    name="clusterbench",
    help="Benchmark a GPU cluster for AI workloads, find what makes it slow, say what to fix.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _split(values: list[str] | None) -> list[str]:
    """Accept both ``--only a,b`` and ``--only a --only b``."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


class _PipeConsole(Console):
    """A console whose reader may stop early (``| head``): that ends the command quietly with
    exit 0, where rich's own ``on_broken_pipe`` exits 1, the code of a ``fail`` finding."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        # the interpreter's last flush at exit would meet the closed pipe again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)


def _console() -> Console:
    # Logs and pipes get 80 columns by default, which wraps the tables; give them room,
    # unless COLUMNS says how wide the reader's screen is (rich reads it).
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return _PipeConsole()
    return _PipeConsole(width=120)


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"clusterbench: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _print_version(value: bool) -> None:
    if value:
        from clusterbench._version import __version__

        typer.echo(f"clusterbench {__version__}")
        raise typer.Exit(0)


_WITHOUT_CATALOG = frozenset({"info", "schema"})
"""Commands that look up no benchmark: they start without loading the catalog."""


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Benchmark a GPU cluster for AI workloads, find what makes it slow, say what to fix."""
    # a command's --help answers at once, without the catalog (it names no benchmark)
    if ctx.invoked_subcommand not in _WITHOUT_CATALOG and "--help" not in sys.argv[1:]:
        from clusterbench import catalog

        catalog.register_builtin()


def _compare_thresholds(config: Path | None, sets: list[str]) -> Thresholds:
    """The built-in thresholds, with a TOML file's [thresholds] and --set thresholds.KEY=...
    (``compare`` and ``report BASE NEW``)."""
    from clusterbench.config import build_run_config

    for item in sets:
        if not item.startswith("thresholds."):
            raise ValueError(f"--set {item}: compare takes only thresholds.KEY=VALUE")
    if config is None and not sets:
        return Thresholds()
    run_config = build_run_config(device_type="cpu", config_file=config, sets=sets)
    return run_config.thresholds


def _print_run(outcome: RunOutcome, *, verbose: bool) -> None:
    """The run's summary, its comparison, where its files went; or why nothing ran."""
    from clusterbench.analyses.run import RunAnalysis
    from clusterbench.report.console import render_summary

    results = outcome.results
    if results is None:
        if outcome.error is not None:  # nothing ran (the workers could not be started)
            typer.echo(f"clusterbench: error: {outcome.error}", err=True)
        return
    console = _console()
    run = outcome.analysis or RunAnalysis(results, run_dir=outcome.run_dir)
    render_summary(run, console, verbose=verbose)
    if run.comparison is not None:
        from clusterbench.report.compare import render_comparison

        render_comparison(run.comparison, console, findings=False)
    if outcome.error is not None:  # a full or failing disk: the summary above is from memory
        console.print(
            f"results: not written; the ranks' records are in {outcome.run_dir}", soft_wrap=True
        )
        typer.echo(f"clusterbench: error: {outcome.error}", err=True)
        return
    console.print(f"results: {outcome.run_dir / 'results.json'}", soft_wrap=True)
    page = outcome.run_dir / "report.html"
    if page.is_file():
        console.print(f"report: {page}", soft_wrap=True)
    if outcome.history is not None:
        console.print(f"history: {outcome.history}", soft_wrap=True)
    for line in outcome.exported:  # csv: <path>, ...
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    if results.run.status == "interrupted":  # Ctrl-C: said once, as under a launcher
        typer.echo(f"clusterbench: interrupted; results kept in {outcome.run_dir}", err=True)
    for err in results.errors[:1]:
        typer.echo(f"clusterbench: run failed: {err.message}", err=True)
