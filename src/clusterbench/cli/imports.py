"""``clusterbench import nccl-tests FILE...`` and ``clusterbench import dcgm-diag FILE``: the
results of tools a team already runs, as a run folder that compare, the history, baselines,
the report and the exports take."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from clusterbench.cli.common import (
    PlainUsage,
    WholeSummaryGroup,
    _print_run,
    _split,
    _usage_error,
    app,
)
from clusterbench.exits import EXIT_RUN_ERROR

if TYPE_CHECKING:
    from clusterbench.pipeline.finish import Finished
    from clusterbench.report.progress import BenchmarkBar, RunProgress

__all__: list[str] = []

_IMPORT_HELP = """Import the results of tools you already run as a clusterbench run folder:
results.json, summary.md and report.html, recorded in the history, so that compare, history,
baseline build, report and export take them as they take a run of clusterbench.

\b
  nccl-tests FILE...   NVIDIA nccl-tests: what a *_perf binary prints, or the JSON it
                       writes with -J FILE
  dcgm-diag FILE       the JSON of 'dcgmi diag -r LEVEL -j' on one node

'clusterbench import nccl-tests --help' and 'clusterbench import dcgm-diag --help' say more.
"""

_NCCL_TESTS_HELP = """Import nccl-tests' results: the text a *_perf binary prints (a log
of several binaries run one after another too, and lines mpirun --tag-output prefixed) or the
JSON it writes with -J FILE (format version 3).

Each size row becomes the collectives benchmark's measurements, in clusterbench's metrics and
units: latency_us (nccl-tests' time), algbw and busbw (GB/s; nccl-tests' busbw is algbw times
the same bus factor clusterbench uses) per op, size, dtype and rank count (group_size), out of
place and in place (param mode), with param source=nccl-tests; and num_wrong (nccl-tests'
#wrong, summed) per op, dtype and mode.  The hosts, GPUs, NCCL and nccl-tests versions come
from the output's device lines and header.  Out-of-bounds values are a fail finding; busbw
that falls to less than half of its best over two or more successive sizes from 1 MiB is a
warning (collectives.busbw_dip).  The same op and rank count in two files (the text and the
JSON of one run) is imported once.

\b
  clusterbench import nccl-tests all_reduce_perf.txt all_gather_perf.json
  clusterbench import nccl-tests logs/*.txt -o runs/nccl-week49 --baseline runs/nccl-week48

Exit codes: 0 imported; 1 a fail finding (out-of-bounds values, a regression against
--baseline); 2 bad usage (a file missing or not nccl-tests' output: one line naming it,
nothing written); 3 the run folder could not be written.
"""

_DCGM_HELP = """Import one node's 'dcgmi diag -r LEVEL -j' output (DCGM 3 or 4): a
finding per test that failed or warned (its GPUs, DCGM's messages and what DCGM says to do
with the GPU: its error severity), one info line for the tests that passed or were skipped, as
'clusterbench doctor --dcgm' gives them on a node where DCGM runs.

The node is --host, else the file's name up to its first dot (gpu-17.json: gpu-17); the level
is --level, else the deepest level whose tests the output holds.

\b
  dcgmi diag -r 3 -j > gpu-17.json; clusterbench import dcgm-diag gpu-17.json

Exit codes: 0 imported, nothing failed; 1 a test failed; 2 bad usage (the file missing or not
dcgmi's JSON: one line, nothing written); 3 the run folder could not be written.
"""

import_app = typer.Typer(cls=WholeSummaryGroup, help=_IMPORT_HELP, rich_markup_mode=None,
                         add_completion=False, no_args_is_help=True)  # fmt: skip
app.add_typer(import_app, name="import")

OutOption = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--out",
        metavar="DIR",
        help="Run folder to write (default clusterbench-runs/<UTC time>-<tool>).",
    ),
]
BaselineOption = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        metavar="FILE|RUN|builtin",
        help="Compare with this baseline file, an earlier run's folder or results.json, or a "
        "history id, as 'clusterbench run --baseline' does.",
    ),
]
HistoryFileOption = Annotated[
    Path | None,
    typer.Option(
        "--history",
        metavar="FILE",
        help="Record the import in this history database (default: as 'clusterbench run').",
    ),
]
NoHistoryOption = Annotated[
    bool, typer.Option("--no-history", help="Do not record the import in the history.")
]
ExportOption = Annotated[
    list[str] | None,
    typer.Option(
        "--export",
        metavar="FORMAT[,FORMAT]",
        help="Export the run into its folder: csv, json-lines, prometheus, wandb.",
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Also print the notes (findings that need no action)."),
]


@import_app.command("nccl-tests", cls=PlainUsage, help=_NCCL_TESTS_HELP)
def import_nccl_tests(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE", help="nccl-tests outputs (text or -J JSON).", show_default=False
        ),
    ],
    out: OutOption = None,
    host: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Name the host this (default: the output's own)."),
    ] = None,
    baseline: BaselineOption = None,
    history: HistoryFileOption = None,
    no_history: NoHistoryOption = False,
    export_formats: ExportOption = None,
    verbose: VerboseOption = False,
) -> None:
    _import("nccl-tests", files, out=out, host=host, level=None, baseline=baseline,
            history=history, no_history=no_history, export_formats=export_formats,
            verbose=verbose)  # fmt: skip


@import_app.command("dcgm-diag", cls=PlainUsage, help=_DCGM_HELP)
def import_dcgm_diag(
    file: Annotated[
        Path,
        typer.Argument(metavar="FILE", help="'dcgmi diag -j' output.", show_default=False),
    ],
    out: OutOption = None,
    host: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="The node (default: the file's name up to a dot)."),
    ] = None,
    level: Annotated[
        int | None,
        typer.Option(
            metavar="N", min=1, max=4, help="The -r level it ran at (default: told from its tests)."
        ),
    ] = None,
    baseline: BaselineOption = None,
    history: HistoryFileOption = None,
    no_history: NoHistoryOption = False,
    export_formats: ExportOption = None,
    verbose: VerboseOption = False,
) -> None:
    _import("dcgm-diag", [file], out=out, host=host, level=level, baseline=baseline,
            history=history, no_history=no_history, export_formats=export_formats,
            verbose=verbose)  # fmt: skip


def _import(
    kind: str,
    files: list[Path],
    *,
    out: Path | None,
    host: str | None,
    level: int | None,
    baseline: str | None,
    history: Path | None,
    no_history: bool,
    export_formats: list[str] | None,
    verbose: bool,
) -> None:
    from clusterbench.pipeline.imported import import_run

    if history is not None and no_history:
        raise _usage_error("--history and --no-history together: choose one")
    _finish_and_print(
        lambda: import_run(
            kind, files, out=out, host=host, level=level, baseline=baseline,
            exports=_split(export_formats), history=history, use_history=not no_history,
            command=shlex.join(["clusterbench", *sys.argv[1:]]), warn=_warn,
        ),
        verbose=verbose,
    )  # fmt: skip


def _warn(line: str) -> None:
    typer.echo(f"clusterbench: warning: {line}", err=True)


def _finish_and_print(call: Callable[[], Finished], *, verbose: bool) -> NoReturn:
    """Run ``call`` (an import or an analysis that ends in a run folder), print the run as
    'clusterbench run' prints it, and exit with its code: a bad input is one line and 2, a
    folder that cannot be written one line and 3."""
    from clusterbench.config import ConfigError
    from clusterbench.pipeline.finish import ResultsWriteError
    from clusterbench.pipeline.start import RunOutcome

    try:
        done = call()
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    except ResultsWriteError as exc:
        typer.echo(f"clusterbench: error: {exc}", err=True)
        raise typer.Exit(EXIT_RUN_ERROR) from None
    run_dir = done.run.run_dir
    assert run_dir is not None
    outcome = RunOutcome(results=done.results, run_dir=run_dir, exit_code=done.exit_code,
                         analysis=done.run, history=done.history,
                         exported=done.exported)  # fmt: skip
    _print_run(outcome, verbose=verbose)
    raise typer.Exit(done.exit_code)


_ANALYZE_HELP = """Attribute your own training job's profiler traces: per rank and profiled
step, the time split into compute, memory, communication (exposed; the part overlapped with
compute apart) and coordination (the GPU idle: launch gaps, input, waiting for other ranks),
as the attribution benchmark splits clusterbench's own workloads.

TRACES are files or folders (searched for *.json and *.json.gz), one file per rank, as
torch.profiler's tensorboard_trace_handler or export_chrome_trace writes them, in every
format since PyTorch 1.8 (a bare JSON array of events too).  The rank comes from the trace's
distributedInfo, else from the file's name (rank-3, rank_3; worker3 as a last resort); the
host from the trace's host_name, else from tensorboard_trace_handler's default file name
(HOST_PID.TIME.pt.trace.json, where PID is the traced process's), else it is unknown.  Each
kernel is classed by the table of kernel families; one it does not know is unclassified, its
share shown apart.  The ranks' collectives are matched (the k-th collective of step N is the
same on every rank) and the ranks' clocks aligned on their ends: the time one waited for the
last rank counts as coordination, and the straggler is the rank whose lateness costs the job
the most on that common clock, named with its host.  What each fix would save per step is
read from the traces' own timelines (the straggler on time, no input wait, the launch gaps
closed, the exposed communication hidden, the elementwise kernels fused), and every warn or
fail finding states its gain.  The top kernels by time come with their class.  A trace
without ProfilerStep#N spans is read as one window, and the summary says so.

What the files say about themselves is one warning line each and a finding, and the other
ranks are analysed: a file that is not a trace or cannot be read (corrupt, truncated), a
folder's other JSON passed over (counted), two files of one rank (which one was analysed),
ranks missing from the world size the traces give, ranks without ProfilerStep#N spans among
ranks with them, and hosts that are unknown.

It writes a run folder (results.json, summary.md, report.html) and records it in the history,
so 'clusterbench compare BEFORE AFTER' shows what a change to the job did.  The traces are
streamed, a gigabyte per rank in bounded memory, the files read in parallel (--jobs, the
usable cores by default; --ray ADDRESS to spread them over a Ray cluster that sees them).

\b
  clusterbench analyze ./traces -o runs/job-before
  clusterbench analyze ./traces-after -o runs/job-after --baseline runs/job-before

Exit codes: 0 analysed; 1 a fail finding (a straggler among GPU ranks, a regression against
--baseline); 2 bad usage (no trace could be read, a path missing: one line, nothing
written); 3 the run folder could not be written.
"""


@app.command("analyze", cls=PlainUsage, help=_ANALYZE_HELP)
def analyze(
    traces: Annotated[
        list[Path],
        typer.Argument(
            metavar="TRACES", help="Trace files or folders, one file per rank.", show_default=False
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            metavar="DIR",
            help="Run folder to write (default clusterbench-runs/<UTC time>-traces).",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option(metavar="N", min=1, help="The top N kernels by time, per rank.")
    ] = 10,
    baseline: BaselineOption = None,
    history: HistoryFileOption = None,
    no_history: NoHistoryOption = False,
    export_formats: ExportOption = None,
    verbose: VerboseOption = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            min=1,
            help="Read N files at once, each in a process of its own, and split the ranks' "
            "steps in N processes (default: the cores this process may use, at most one per "
            "16 MiB of trace and per 2 million activities; 1: one after another, in this "
            "process).",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Read the files as Ray tasks on the Ray cluster at ADDRESS (auto: the one "
            "this machine belongs to); its nodes must see TRACES at the same paths and have "
            "clusterbench installed (pip install 'clusterbench[ray]').",
        ),
    ] = None,
) -> None:
    """Attribute a team's own profiler traces."""
    from clusterbench.pipeline.imported import analyze_traces

    if history is not None and no_history:
        raise _usage_error("--history and --no-history together: choose one")
    if jobs is not None and ray is not None:
        raise _usage_error("--jobs and --ray together: Ray runs one task per file per CPU")

    def call() -> Finished:
        with _ReadProgress(verbose=verbose) as progress:
            return analyze_traces(
                traces, out=out, top=top, baseline=baseline, exports=_split(export_formats),
                history=history, use_history=not no_history,
                command=shlex.join(["clusterbench", *sys.argv[1:]]), warn=_warn,
                progress=progress, jobs=jobs, ray_address=ray,
            )  # fmt: skip

    _finish_and_print(call, verbose=verbose)


class _ReadProgress:
    """How the reading of the traces shows: a line per file read with --verbose, else a bar
    where stderr is a terminal, else nothing."""

    def __init__(self, *, verbose: bool) -> None:
        self._verbose = verbose
        self._progress: RunProgress | None = None
        self._bar: BenchmarkBar | None = None

    def __enter__(self) -> _ReadProgress:
        if not self._verbose and sys.stderr.isatty():
            from clusterbench.report.progress import RunProgress

            self._progress = RunProgress().__enter__()
        return self

    def __call__(self, done: int, total: int, path: Path) -> None:
        if self._verbose:
            typer.echo(f"read {done}/{total}: {path}", err=True)
        elif self._progress is not None:
            if self._bar is None:
                self._bar = self._progress.bar("reading traces")
                self._bar.start(total)
            self._bar.advance()
            if done == total:
                self._bar.finish()

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
