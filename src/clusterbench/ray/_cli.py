"""The command line of ``python -m clusterbench.ray``: options -> ``run_on_ray``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from clusterbench.cli.common import PlainUsage
from clusterbench.exits import EXIT_USAGE
from clusterbench.job_scripts import LaunchSpec, parse_env

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(cls=PlainUsage)
def ray_run(
    run_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_ARGS",
            help="After --: further 'clusterbench run' arguments.",
            show_default=False,
        ),
    ] = None,
    nodes: Annotated[int, typer.Option(metavar="N", help="Number of nodes.")] = 1,
    gpus_per_node: Annotated[
        int,
        typer.Option(metavar="N", help="Ranks per node: one GPU each (with --cpu, one CPU each)."),
    ] = 1,
    cpu: Annotated[bool, typer.Option("--cpu", help="CPU workers (gloo) instead of GPUs.")] = False,
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Ray cluster address (default: RAY_ADDRESS, or the one on this node).",
        ),
    ] = None,
    suite: Annotated[
        str, typer.Option(metavar="NAME", help="quick, standard or full: the suite to run.")
    ] = "quick",
    env: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE", help="An environment variable for every rank, repeatable."
        ),
    ] = None,
    join_timeout: Annotated[
        int | None,
        typer.Option(
            metavar="SECONDS",
            help="Seconds Ray Train has to start every worker, and then every rank to join the "
            "run (default 300, or the run's --timeout when shorter).",
        ),
    ] = None,
) -> None:
    """Run clusterbench on a Ray cluster: one Ray Train worker per rank, results on rank 0."""
    from clusterbench.config import check_suite_name
    from clusterbench.ray import run_on_ray

    try:
        check_suite_name(suite)
        spec = LaunchSpec(nodes=nodes, gpus_per_node=gpus_per_node, suite=suite,
                          env=parse_env(env or []), run_args=tuple(run_args or []),
                          join_timeout_s=join_timeout)  # fmt: skip
    except ValueError as exc:
        typer.echo(f"clusterbench: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    sys.exit(run_on_ray(spec, cpu=cpu, address=address))


def main() -> None:
    """``python -m clusterbench.ray``."""
    app()
