"""``clusterbench run``: check the options (before torch is imported), build the run's
:class:`~clusterbench.pipeline.options.RunOptions`, call the library's run with them, print
the outcome and exit with its code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli.common import PlainUsage, _console, _print_run, _split, _usage_error, app
from clusterbench.exits import ConfigError

if TYPE_CHECKING:
    from clusterbench.pipeline.plan import RunPlan

__all__ = ["run"]


@app.command(cls=PlainUsage)
def run(
    suite: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="quick (Level 1, minutes), standard (moderate sizes) or full (long "
            "sweeps). Default: the config file's suite, else quick.",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME[,NAME]",
            help="Run only these benchmarks (comma-separated or repeated); see "
            "'clusterbench list'.",
        ),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME[,NAME]", help="Leave these benchmarks out (comma-separated)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="TOML file selecting and tuning benchmarks and thresholds.",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override one setting: SECTION.KEY=VALUE, repeatable, e.g. "
            "--set gemm.dtypes=bf16,fp8 --set thresholds.gemm_min_efficiency=0.7",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            metavar="DIR",
            help="Run folder to write (default clusterbench-runs/<UTC time>-<host>).",
        ),
    ] = None,
    nproc: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Workers on this node (default: one per GPU, or 2 on CPU); at most the visible "
            "GPUs, or on CPU the cores this process may use.",
        ),
    ] = None,
    oversubscribe: Annotated[
        bool,
        typer.Option(
            "--oversubscribe",
            help="Allow more CPU workers than cores: up to 4x the cores, at most 256.",
        ),
    ] = False,
    device: Annotated[
        str, typer.Option(metavar="auto|cuda|cpu", help="auto (GPUs when present), cuda or cpu.")
    ] = "auto",
    nccl_debug: Annotated[
        bool,
        typer.Option(
            "--nccl-debug",
            help="Run NCCL with NCCL_DEBUG=INFO, keep each rank's log "
            "in the run folder and record the transport, algorithm and protocol it chose.",
        ),
    ] = False,
    telemetry_interval: Annotated[
        float | None,
        typer.Option(
            "--telemetry-interval",
            metavar="SECONDS",
            help="Seconds between two telemetry samples of each GPU (clocks, power, "
            "temperature, throttle reasons; default 0.1).",
        ),
    ] = None,
    no_telemetry: Annotated[
        bool,
        typer.Option("--no-telemetry", help="Do not sample the GPUs' telemetry during the run."),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="Seconds one benchmark may take on one rank before the run is ended "
            "(default 900).",
        ),
    ] = None,
    soak: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Soak: repeat the benchmarks round after round for this long (90s, 30m, 2h, "
            "1h30m), every round kept; reports drift over the rounds. Ctrl-C keeps every round.",
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="Soak of N rounds: run the benchmarks N times (not with --soak)."
        ),
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Fit the whole run into this much time (90s, 10m, 1h): each benchmark's "
            "repeats, sweep points and sizes are cut to its share of it (the plan printed "
            "first says what), and each stops at its share keeping what it measured. One "
            "benchmark's own limit: --set NAME.time_budget_s=SECONDS.",
        ),
    ] = None,
    plan_only: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Print the plan and stop: each benchmark's expected time on this machine (from "
            "earlier runs here, the shipped table or its cost model) and, with --budget, what "
            "would be cut; nothing is run or written.",
        ),
    ] = False,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="FILE|RUN|builtin",
            help="At the end, compare the run with this baseline file ('clusterbench baseline "
            "build'), an earlier run's folder or results.json, or 'builtin' (known-good figures "
            "per GPU model): shown in the summary, saved as comparison.json, regressions added "
            "to the findings (exit 1 on a fail).",
        ),
    ] = None,
    expect_nodes: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Nodes the run must span (the commands of 'clusterbench launch' set it): with "
            "fewer, the run stops at once, naming the nodes that joined (exit 3).",
        ),
    ] = None,
    join_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="Seconds the ranks have to join under srun/mpirun before the run stops, naming "
            "the ranks and hosts that came (default 300, or --timeout when shorter).",
        ),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="FILE",
            help="Record the run in this history database (default: $CLUSTERBENCH_HISTORY, "
            "else $XDG_DATA_HOME/clusterbench/history.sqlite, else "
            "~/.local/share/clusterbench/history.sqlite); see 'clusterbench history --help'.",
        ),
    ] = None,
    no_history: Annotated[
        bool, typer.Option("--no-history", help="Do not record the run in the history.")
    ] = False,
    export_formats: Annotated[
        list[str] | None,
        typer.Option(
            "--export",
            metavar="FORMAT[,FORMAT]",
            help="At the end, export the run into its folder: csv, json-lines, prometheus, "
            "wandb (comma-separated), as 'clusterbench export' does; an export that fails "
            "costs one warning line, not the run.",
        ),
    ] = None,
    pushgateway: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="At the end, push the run's Prometheus metrics to this Pushgateway URL "
            "(see 'clusterbench export --help').",
        ),
    ] = None,
    launcher: Annotated[
        str | None,
        typer.Option(
            hidden=True,
            help="What started these ranks where their environment cannot tell: ray (set by "
            "python -m clusterbench.ray).",
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Also print the notes (findings that need no action; summary.md and "
            "report.html always hold them) and the time of each phase of the run.",
        ),
    ] = False,
) -> None:
    """Run a suite on every GPU of this node (or join torchrun/srun/mpirun) and report."""
    from clusterbench.config import check_benchmark_names, check_run_config, check_suite_name
    from clusterbench.pipeline.spec import check_run_dir
    from clusterbench.runtime.launch import detect_launcher

    try:  # a mistyped name is told before torch and the pipeline are imported
        check_benchmark_names([*_split(only), *_split(skip)])
        if suite is not None:
            check_suite_name(suite)
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    if history is not None and no_history:
        raise _usage_error("--history and --no-history together: choose one")
    if telemetry_interval is not None and no_telemetry:
        raise _usage_error("--telemetry-interval and --no-telemetry together: choose one")
    try:  # so are a mistake of the config, --set and the flags, and an --out not to be made
        check_run_config(
            device=_device_known_before_torch(device), suite=suite, config_file=config,
            sets=set_ or [], only=_split(only), skip=_split(skip), timeout_s=timeout, soak=soak,
            repeat=repeat, telemetry=False if no_telemetry else None,
            telemetry_interval_s=telemetry_interval, budget=budget,
        )  # fmt: skip
        if not plan_only and detect_launcher() is None:  # under one, rank 0 tells all ranks
            check_run_dir(out)
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    from clusterbench.pipeline.options import RunOptions
    from clusterbench.pipeline.start import run as run_suite

    options = RunOptions(
        suite=suite,
        only=_split(only),
        skip=_split(skip),
        config_file=config,
        sets=set_ or [],
        out=out,
        nproc=nproc,
        oversubscribe=oversubscribe,
        device=device,
        nccl_debug=nccl_debug,
        telemetry=False if no_telemetry else None,
        telemetry_interval_s=telemetry_interval,
        timeout_s=timeout,
        soak=soak,
        repeat=repeat,
        budget=budget,
        plan_only=plan_only,
        baseline=baseline,
        expect_nodes=expect_nodes,
        join_timeout_s=join_timeout,
        history=history,
        use_history=not no_history,
        exports=_split(export_formats),
        pushgateway=pushgateway,
        launcher=launcher,
    )
    rounds = soak is not None or repeat is not None
    try:
        outcome = run_suite(options, announce=lambda plan: _announce(plan, soak=rounds))
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    if plan_only:
        _console().print("plan only: nothing was run (the same command without --plan runs it)")
        raise typer.Exit(0)
    _print_run(outcome, verbose=verbose)
    from clusterbench.runtime.launch import wait_for_workers

    wait_for_workers()  # their processes ended while the results were written and printed
    raise typer.Exit(outcome.exit_code)


def _device_known_before_torch(device: str) -> str:
    """``device`` as far as it is known before torch is imported: ``auto`` with a torch whose
    files state a build for neither CUDA nor HIP runs on CPU workers, so a mistake only the
    CPU refuses (``--only transfer``, which has no CPU form) is told at once."""
    from clusterbench.hardware.probe import cpu_only_torch_unimported

    return "cpu" if device == "auto" and cpu_only_torch_unimported() else device


def _announce(plan: RunPlan, *, soak: bool = False) -> None:
    """Before the first benchmark, the plan: each benchmark's expected time (from earlier runs
    like it in the history, else the shipped timing table), its share of a budget and what was
    cut to fit it; of a soak, one round."""
    from rich.text import Text

    from clusterbench.report.plan import plan_lines

    assert plan.budget is not None  # the runner plans every run before announcing it
    lines = plan_lines(plan.budget)
    if soak:
        lines[0] += " (a round of the soak)"
    for line in lines:
        _console().print(Text(line), soft_wrap=True)
