"""Command line: parse, build the config, call the library, map the outcome to an exit code.

Exit codes: 0 no ``fail`` finding; 1 some ``fail`` finding; 2 bad usage or config; 3 run error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from clusterbench.config import ConfigError

app = typer.Typer(
    name="clusterbench",
    help="Benchmark a GPU cluster for AI workloads, find what makes it slow, say what to fix.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EXIT_USAGE = 2


def _split(values: list[str] | None) -> list[str]:
    """Accept both ``--only a,b`` and ``--only a --only b``."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _console() -> Console:
    # Logs and pipes get 80 columns by default, which wraps the tables; give them room.
    return Console() if sys.stdout.isatty() else Console(width=120)


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"clusterbench: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


@app.command()
def run(
    suite: Annotated[
        str | None,
        typer.Option(
            help="quick (Level 1, minutes), standard (moderate sizes) or full (long "
            "sweeps). Default: the config file's suite, else quick."
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            help="Run only these benchmarks (comma-separated or repeated); see 'clusterbench list'."
        ),
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option(help="Leave these benchmarks out (comma-separated).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML file selecting and tuning benchmarks and thresholds."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override one setting: SECTION.KEY=VALUE, repeatable, e.g. "
            "--set gemm.dtypes=bf16,fp8 --set thresholds.gemm_min_efficiency=0.7",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Run folder to write (default clusterbench-runs/<UTC time>-<host>)."),
    ] = None,
    nproc: Annotated[
        int | None,
        typer.Option(help="Workers on this node (default: one per GPU, or 2 on CPU)."),
    ] = None,
    device: Annotated[str, typer.Option(help="auto (GPUs when present), cuda or cpu.")] = "auto",
    nccl_debug: Annotated[
        bool,
        typer.Option(
            "--nccl-debug",
            help="Run NCCL with NCCL_DEBUG=INFO, keep each rank's log "
            "in the run folder and record the transport, algorithm and protocol it chose.",
        ),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds one benchmark may take on one rank before the run is ended (default 900)."
        ),
    ] = None,
) -> None:
    """Run a suite on every GPU of this node (or join torchrun/srun/mpirun) and report."""
    from clusterbench.report.console import render_summary
    from clusterbench.runner import run as run_suite

    try:
        outcome = run_suite(
            suite=suite,
            only=_split(only),
            skip=_split(skip),
            config_file=config,
            sets=set_ or [],
            out=out,
            nproc=nproc,
            device=device,
            timeout_s=timeout,
            nccl_debug=nccl_debug,
        )
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    results = outcome.results
    if results is not None:
        console = _console()
        render_summary(results, console)
        console.print(f"results: {outcome.run_dir / 'results.json'}")
        if results.errors:
            for err in results.errors[:1]:
                typer.echo(f"clusterbench: run failed: {err.message}", err=True)
    raise typer.Exit(outcome.exit_code)


@app.command("list")
def list_benchmarks() -> None:
    """List every benchmark with its level, scope and what it measures."""
    from clusterbench.benchmarks.registry import all_benchmarks
    from clusterbench.report.listing import render_benchmark_list

    render_benchmark_list(all_benchmarks(), _console())


@app.command()
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
) -> None:
    """Show this node's GPUs, topology, CPU, NICs and software versions."""
    from clusterbench.hardware.probe import probe_host
    from clusterbench.report.info import render_host_info

    host = probe_host()
    if as_json:
        typer.echo(host.model_dump_json(indent=2))
        return
    render_host_info(host, _console())


@app.command()
def schema() -> None:
    """Print the JSON Schema of results.json."""
    from clusterbench.schema import results_json_schema

    typer.echo(json.dumps(results_json_schema(), indent=2))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("clusterbench: interrupted", err=True)
        sys.exit(3)
