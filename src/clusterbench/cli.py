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
from clusterbench.runspec import EXIT_RUN_ERROR, EXIT_USAGE

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
    # Logs and pipes get 80 columns by default, which wraps the tables; give them room.
    return Console() if sys.stdout.isatty() else Console(width=120)


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
        typer.Option(
            help="Workers on this node (default: one per GPU, or 2 on CPU); at most the visible "
            "GPUs, or on CPU the cores this process may use."
        ),
    ] = None,
    oversubscribe: Annotated[
        bool,
        typer.Option(
            "--oversubscribe",
            help="Allow more CPU workers than cores: up to 4x the cores, at most 256.",
        ),
    ] = False,
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
    from clusterbench.registry import summary_sections
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
            oversubscribe=oversubscribe,
        )
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    results = outcome.results
    if results is not None:
        console = _console()
        render_summary(results, summary_sections(results), console)
        if outcome.error is not None:  # a full or failing disk: the summary above is from memory
            console.print(
                f"results: not written; the ranks' records are in {outcome.run_dir}",
                soft_wrap=True,
            )
        else:
            console.print(f"results: {outcome.run_dir / 'results.json'}")
        if outcome.error is not None:
            typer.echo(f"clusterbench: error: {outcome.error}", err=True)
        elif results.errors:
            for err in results.errors[:1]:
                typer.echo(f"clusterbench: run failed: {err.message}", err=True)
    raise typer.Exit(outcome.exit_code)


@app.command("list")
def list_benchmarks() -> None:
    """List every benchmark with its level, scope and what it measures."""
    from clusterbench.registry import all_benchmarks
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
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(help="Checkpoint folder to check for file system and free space."),
    ] = None,
) -> None:
    """Check this node's configuration and GPU health in seconds (exit 1 on a fail finding)."""
    import os

    from clusterbench.doctor import run_checks
    from clusterbench.hardware.probe import nvml_session, probe_host
    from clusterbench.report.doctor import render_findings

    with nvml_session() as nvml:  # one NVML session for the probe and the checks
        host = probe_host(nvml=nvml)
        findings = run_checks(host=host, env=os.environ, checkpoint_dir=checkpoint_dir, nvml=nvml)
    if as_json:
        typer.echo(json.dumps([f.model_dump(mode="json") for f in findings], indent=2))
    else:
        render_findings(findings, _console(), host=host.hostname)
    raise typer.Exit(1 if any(f.severity == "fail" for f in findings) else 0)


@app.command()
def launch(
    run_args: Annotated[
        list[str] | None,
        typer.Argument(help="After --: further 'clusterbench run' arguments.", show_default=False),
    ] = None,
    torchrun: Annotated[bool, typer.Option("--torchrun", help="torchrun command.")] = False,
    slurm: Annotated[bool, typer.Option("--slurm", help="sbatch script.")] = False,
    mpi: Annotated[bool, typer.Option("--mpi", help="Open MPI mpirun command.")] = False,
    k8s: Annotated[bool, typer.Option("--k8s", help="Kubeflow PyTorchJob manifest.")] = False,
    nodes: Annotated[int | None, typer.Option(help="Number of nodes.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs (ranks) per node.")] = None,
    suite: Annotated[str, typer.Option(help="Suite to run.")] = "quick",
    master_addr: Annotated[
        str | None, typer.Option(help="First node's address (default: found at run time).")
    ] = None,
    port: Annotated[int, typer.Option(help="Rendezvous port.")] = 29500,
    image: Annotated[str | None, typer.Option(help="Container image (k8s).")] = None,
    name: Annotated[str, typer.Option(help="Job name / rendezvous id.")] = "clusterbench",
    env: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE for every rank, repeatable.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="k8s output: yaml or json.")] = "yaml",
    out: Annotated[Path | None, typer.Option(help="Write to this file instead of stdout.")] = None,
    results_pvc: Annotated[
        str | None,
        typer.Option(
            help="k8s: keep the run folder on this PersistentVolumeClaim (mounted at /results "
            "in the Master pod; the run's --out is /results/<name>)."
        ),
    ] = None,
    results_host_path: Annotated[
        str | None,
        typer.Option(
            help="k8s: keep the run folder in this folder of the Master pod's node (hostPath, "
            "mounted at /results; the run's --out is /results/<name>)."
        ),
    ] = None,
) -> None:
    """Print the command or script that runs clusterbench on many nodes."""
    from clusterbench.config import check_suite_name
    from clusterbench.launchers import (
        DEFAULT_IMAGE,
        LaunchSpec,
        parse_env,
        pick_launcher,
        render,
        results_note,
    )

    try:
        launcher = pick_launcher(torchrun=torchrun, slurm=slurm, mpi=mpi, k8s=k8s)
        if nodes is None or gpus_per_node is None:
            raise ValueError("--nodes and --gpus-per-node are required")
        check_suite_name(suite)
        if fmt not in ("yaml", "json"):
            raise ValueError(f"--format must be yaml or json, got {fmt!r}")
        spec = LaunchSpec(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            suite=suite,
            master_addr=master_addr,
            port=port,
            name=name,
            env=parse_env(env or []),
            run_args=tuple(run_args or []),
            image=image or DEFAULT_IMAGE,
            results_pvc=results_pvc,
            results_host_path=results_host_path,
        )
        text = render(launcher, spec, fmt="json" if fmt == "json" else "yaml")
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    note = results_note(launcher, spec)
    if out is None:
        typer.echo(text, nl=False)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _usage_error(f"cannot write {out}: {exc.strerror}") from None
        typer.echo(f"wrote {out}", err=True)
    if note is not None:
        typer.echo(f"clusterbench: note: {note}", err=True)


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
        sys.exit(EXIT_RUN_ERROR)
