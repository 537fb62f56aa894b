"""``clusterbench baseline build``: a fleet baseline from runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clusterbench.cli.common import PlainUsage, WholeSummaryGroup, _usage_error, app

__all__ = ["baseline_app", "baseline_build"]


baseline_app = typer.Typer(
    cls=WholeSummaryGroup,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)
app.add_typer(baseline_app, name="baseline")


@baseline_app.callback()
def _baseline() -> None:
    """Fleet baselines: the median and spread of every figure per GPU model, from runs.

    Compare a run with one by 'clusterbench compare FLEET.json RUN' or
    'clusterbench run --baseline FLEET.json'."""


@baseline_app.command("build", cls=PlainUsage)
def baseline_build(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN",
            help="Run folders or results.json files: many runs, or one run of many nodes.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "-o", "--out", "--output", metavar="FILE", help="The baseline file to write (JSON)."
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Its name in comparisons (default: the file's stem)."),
    ] = None,
) -> None:
    """Build a fleet baseline: per (benchmark, metric, params, GPU model) the median, the MAD
    and the count over every device of every run given, with the runs it came from."""
    from clusterbench.analyses.baseline import build_baseline
    from clusterbench.compare_io import load_run, write_baseline

    loaded = []
    for path in runs:
        try:
            loaded.append(load_run(path))
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
    try:
        built = build_baseline(loaded, name=name or output.stem)
        write_baseline(built, output)
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    except OSError as exc:
        raise _usage_error(f"cannot write {output}: {exc.strerror}") from None
    spread = sum(e.count >= 3 for e in built.entries)
    typer.echo(
        f"wrote {output}: {len(built.entries)} figures from {len(loaded)} run(s) "
        f"({', '.join(built.models())}); {spread} of them over 3 or more devices or runs "
        "(a spread to judge against)"
    )
