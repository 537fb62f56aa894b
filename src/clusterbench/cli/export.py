"""``clusterbench export RUN --format ...``, and the exports ``clusterbench run --export`` makes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli.common import PlainUsage, _split, _usage_error, app
from clusterbench.exits import EXIT_RUN_ERROR

if TYPE_CHECKING:
    pass

__all__: list[str] = []

_EXPORT_HELP = """Export a run for the tools teams already run: a spreadsheet, Prometheus and
Grafana, Weights & Biases.

RUN is a run folder or its results.json.  --format takes one or several formats
(comma-separated or repeated); each is written into the run folder unless -o says otherwise:

\b
  csv          results.csv: one row per measurement (run id, suite, start, benchmark,
               metric, value, unit, host, rank, device, samples, median, min, max, mean,
               cv, reference value/kind/source), then one column per param key
               (params.dtype, params.size_bytes, ...; empty where a row has none)
  json-lines   measurements.jsonl: one JSON object per measurement, the same fields with
               the params as one nested object
  prometheus   metrics.prom: node_exporter's textfile format, one gauge per benchmark and
               metric in base units (clusterbench_memory_bandwidth_bytes_per_second,
               clusterbench_collectives_latency_seconds, ..._ratio for percentages), labels
               host, gpu, device, benchmark, rank, suite and one per param;
               clusterbench_run_info and the findings per severity beside them.  Point
               node_exporter's --collector.textfile.directory at the file's folder
               (-o DIR/clusterbench-SUITE.prom)
  wandb        one Weights & Biases run (needs pip install 'clusterbench[wandb]'): config =
               the run's settings and hardware, one summary key per measurement, a table of
               every measurement and finding; local files in wandb/ of the run folder (or
               -o DIR, or $WANDB_DIR).  WANDB_MODE=offline needs no account ('wandb sync'
               uploads it later); --wandb-project names the project (default
               $WANDB_PROJECT, else clusterbench)

-o FILE writes one format to FILE, -o - to stdout (csv, json-lines, prometheus), -o DIR (an
existing folder) every format into DIR.  --pushgateway URL pushes the Prometheus metrics to a
Pushgateway (job clusterbench, grouped by instance = the run's first host and suite, so a
host's next run of a suite replaces that suite's figures); without --format it only pushes.

A run priced by 'clusterbench cost' (its cost.json) exports its cost too: benchmark 'cost'
(usd_per_gpu_hour, usd_per_million_tokens, usd_per_month, train_time, break_even_*,
finding_usd_per_month; params offer, kind, gpus, ...) and one 'cost.price' finding per
priced finding.

Exit codes: 0 exported; 2 bad usage (a RUN that is not a run, an unknown format, wandb not
installed: one line); 3 an export failed (a file not written, the Pushgateway or W&B not
reached: one line each).
"""


@app.command("export", cls=PlainUsage, help=_EXPORT_HELP)
def export(
    run: Annotated[
        Path,
        typer.Argument(metavar="RUN", help="Run folder or its results.json.", show_default=False),
    ],
    fmt: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT[,FORMAT]",
            help="csv, json-lines, prometheus, wandb; several comma-separated or repeated.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            "--output",
            metavar="FILE|-|DIR",
            help="FILE for one format, - for stdout (text formats), or an existing folder "
            "(default: the run folder).",
        ),
    ] = None,
    pushgateway: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Push the Prometheus metrics to this Pushgateway, e.g. http://pg:9091.",
        ),
    ] = None,
    wandb_project: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="W&B project (default: $WANDB_PROJECT, else clusterbench)."
        ),
    ] = None,
) -> None:
    from clusterbench.analyses.cost.section import priced_results
    from clusterbench.compare_io import load_run
    from clusterbench.report.export_request import do_exports, export_request

    try:
        request = export_request(
            _split(fmt), output=output, pushgateway=pushgateway, wandb_project=wandb_project
        )
        if request is None:
            raise ValueError("nothing to export: give --format (or --pushgateway)")
        results = load_run(run)
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    run_dir = run if run.is_dir() else run.parent
    try:  # the prices of 'clusterbench cost', where it kept them: the cost figures go along
        results = priced_results(results, run_dir)
    except ValueError as exc:
        typer.echo(f"clusterbench: warning: {exc}; exported without the cost", err=True)
    failures = do_exports(results, request, run_dir=run_dir)
    for line in failures:
        typer.echo(f"clusterbench: error: {line}", err=True)
    raise typer.Exit(EXIT_RUN_ERROR if failures else 0)
