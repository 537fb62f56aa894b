"""What every command shares: the typer app, the console, one-line usage errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
import typer.core
from rich.console import Console

from clusterbench.exits import EXIT_USAGE
from clusterbench.thresholds import Thresholds

__all__ = [
    "PlainUsage",
    "_compare_thresholds",
    "_console",
    "_split",
    "_usage_error",
    "app",
]


class PlainUsage(typer.core.TyperCommand):
    """A command whose usage line names its required arguments bare (``compare [OPTIONS] BASE
    NEW``), as most tools do, not in braces, which read like placeholders to fill."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [_unbraced(piece) for piece in super().collect_usage_pieces(ctx)]


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


def _console() -> Console:
    # Logs and pipes get 80 columns by default, which wraps the tables; give them room,
    # unless COLUMNS says how wide the reader's screen is (rich reads it).
    return Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=120)


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"clusterbench: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _print_version(value: bool) -> None:
    if value:
        from clusterbench._version import __version__

        typer.echo(f"clusterbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Benchmark a GPU cluster for AI workloads, find what makes it slow, say what to fix."""


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
