"""Command line: parse, build the config, call the library, map the outcome to an exit code.

Exit codes: 0 no ``fail`` finding; 1 some ``fail`` finding; 2 bad usage or config; 3 run error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterbench.cli import _doctor
from clusterbench.cli._common import (
    PlainUsage,
    WholeSummaryGroup,
    _compare_thresholds,
    _console,
    _print_run,
    _split,
    _usage_error,
    app,
)
from clusterbench.exits import EXIT_RUN_ERROR, ConfigError
from clusterbench.thresholds import Thresholds

if TYPE_CHECKING:
    from clusterbench.analysis.baseline import Baseline
    from clusterbench.pipeline.start import RunPlan
    from clusterbench.schema import Results


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
            device=device, suite=suite, config_file=config, sets=set_ or [], only=_split(only),
            skip=_split(skip), timeout_s=timeout, soak=soak, repeat=repeat,
            telemetry=False if no_telemetry else None, telemetry_interval_s=telemetry_interval,
            budget=budget,
        )  # fmt: skip
        if not plan_only and detect_launcher() is None:  # under one, rank 0 tells all ranks
            check_run_dir(out)
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    from clusterbench.pipeline.start import run as run_suite

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
            expect_nodes=expect_nodes,
            join_timeout_s=join_timeout,
            soak=soak,
            repeat=repeat,
            telemetry=False if no_telemetry else None,
            telemetry_interval_s=telemetry_interval,
            announce=lambda plan: _announce(plan, soak=soak is not None or repeat is not None),
            budget=budget,
            history=history,
            use_history=not no_history,
            plan_only=plan_only,
            baseline=baseline,
            exports=_split(export_formats),
            pushgateway=pushgateway,
            launcher=launcher,
        )
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    if plan_only:
        _console().print("plan only: nothing was run (the same command without --plan runs it)")
        raise typer.Exit(0)
    _print_run(outcome, verbose=verbose)
    raise typer.Exit(outcome.exit_code)


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


@app.command("list", cls=PlainUsage)
def list_benchmarks() -> None:
    """List every benchmark with its level, scope and what it measures."""
    from clusterbench.registry import all_benchmarks
    from clusterbench.report.listing import render_benchmark_list

    render_benchmark_list(all_benchmarks(), _console())


@app.command(cls=PlainUsage)
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


@app.command(cls=PlainUsage, help=_doctor.DOCTOR_HELP)
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Checkpoint folder to check for file system and free space."
        ),
    ] = None,
    fast: Annotated[
        bool,
        typer.Option("--fast", help="Node check for schedulers: under 10 s, one line per problem."),
    ] = False,
    dcgm: Annotated[
        int | None,
        typer.Option(
            "--dcgm", metavar="LEVEL", help="Also run dcgmi diag -r LEVEL (1-4) where installed."
        ),
    ] = None,
) -> None:
    _doctor.run_doctor(as_json=as_json, checkpoint_dir=checkpoint_dir, fast=fast, dcgm=dcgm)


@app.command(cls=PlainUsage)
def launch(
    run_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_ARGS",
            help="After --: further 'clusterbench run' arguments.",
            show_default=False,
        ),
    ] = None,
    torchrun: Annotated[bool, typer.Option("--torchrun", help="torchrun command.")] = False,
    slurm: Annotated[bool, typer.Option("--slurm", help="sbatch script.")] = False,
    mpi: Annotated[bool, typer.Option("--mpi", help="Open MPI mpirun command.")] = False,
    k8s: Annotated[bool, typer.Option("--k8s", help="Kubeflow PyTorchJob manifest.")] = False,
    ray: Annotated[
        bool, typer.Option("--ray", help="Ray Train driver (python -m clusterbench.ray) commands.")
    ] = False,
    nodes: Annotated[int | None, typer.Option(metavar="N", help="Number of nodes.")] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option(metavar="N", help="GPUs (ranks) per node.")
    ] = None,
    suite: Annotated[str, typer.Option(metavar="NAME", help="Suite to run.")] = "quick",
    master_addr: Annotated[
        str | None,
        typer.Option(metavar="HOST", help="First node's address (default: found at run time)."),
    ] = None,
    port: Annotated[int, typer.Option(metavar="PORT", help="Rendezvous port.")] = 29500,
    image: Annotated[
        str | None,
        typer.Option(
            metavar="IMAGE",
            help="Container image every pod runs (--k8s: required), with clusterbench and a "
            "CUDA build of torch.",
        ),
    ] = None,
    name: Annotated[
        str, typer.Option(metavar="NAME", help="Job name / rendezvous id.")
    ] = "clusterbench",
    env: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="KEY=VALUE for every rank, repeatable."),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", metavar="yaml|json", help="k8s output: yaml or json.")
    ] = "yaml",
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", metavar="FILE", help="Write to this file instead of stdout."),
    ] = None,
    results_pvc: Annotated[
        str | None,
        typer.Option(
            metavar="CLAIM",
            help="k8s: keep the run folder on this PersistentVolumeClaim (mounted at /results "
            "in the Master pod; the run's --out is /results/<name>).",
        ),
    ] = None,
    results_host_path: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="k8s: keep the run folder in this folder of the Master pod's node (hostPath, "
            "mounted at /results; the run's --out is /results/<name>).",
        ),
    ] = None,
    join_timeout: Annotated[
        int | None,
        typer.Option(
            metavar="SECONDS",
            help="Seconds every node (under srun/mpirun: every rank) has to join once the first "
            "has started; a run missing one then stops, naming those that came (default 300, or "
            "the run's --timeout when shorter).",
        ),
    ] = None,
) -> None:
    """Print the command or script that runs clusterbench on many nodes."""
    from clusterbench.config import check_suite_name
    from clusterbench.job_scripts import (
        LaunchSpec,
        parse_env,
        pick_launcher,
        render,
        results_note,
    )

    try:
        launcher = pick_launcher(torchrun=torchrun, slurm=slurm, mpi=mpi, k8s=k8s, ray=ray)
        if nodes is None or gpus_per_node is None:
            raise ValueError("--nodes and --gpus-per-node are required")
        check_suite_name(suite)
        if fmt not in ("yaml", "json"):
            raise ValueError(f"--format must be yaml or json, got {fmt!r}")
        if launcher == "k8s" and image is None:
            raise ValueError(
                "--k8s needs --image IMAGE: a container image with clusterbench and a CUDA "
                "build of torch, which every pod runs"
            )
        spec = LaunchSpec(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            suite=suite,
            master_addr=master_addr,
            port=port,
            name=name,
            env=parse_env(env or []),
            run_args=tuple(run_args or []),
            image=image,
            results_pvc=results_pvc,
            results_host_path=results_host_path,
            join_timeout_s=join_timeout,
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


@app.command(cls=PlainUsage)
def schema() -> None:
    """Print the JSON Schema of results.json."""
    from clusterbench.schema import results_json_schema

    typer.echo(json.dumps(results_json_schema(), indent=2))


# ----------------------------------------------------------------------------- history

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
    from clusterbench.analysis.trend import parse_selector, select, trends
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
    from clusterbench.history_db import HistoryError, find_run_folders, open_history
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


# ----------------------------------------------------------------------------- compare


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
    from clusterbench.analysis.baseline import build_baseline
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


# Commands kept in modules of their own (cli/<name>.py) define themselves on ``app`` from
# cli/_common.py and are imported here, one line each, so that ``app`` has them.
from clusterbench.cli import cost, export, imports, predict, report  # noqa: E402, F401


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("clusterbench: interrupted", err=True)
        sys.exit(EXIT_RUN_ERROR)
    except SystemExit:
        # click (and typer's copy of it) ends a write to a closed pipe (| head) with exit 1
        # after wrapping stdout in its PacifyFlushWrapper; a reader that stopped early is no
        # failure
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            sys.exit(0)
        raise
