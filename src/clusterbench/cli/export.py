"""``clusterbench export RUN --format ...``, and the exports ``clusterbench run --export`` makes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli._common import PlainUsage, _split, _usage_error, app
from clusterbench.exits import EXIT_RUN_ERROR

if TYPE_CHECKING:
    from clusterbench.schema import Results

__all__ = ["ExportRequest", "do_exports", "export_request"]

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


@dataclass(frozen=True, slots=True)
class ExportRequest:
    formats: list[str]
    output: Path | None
    """None: the run folder; Path('-'): stdout; an existing folder: into it; else the file."""
    pushgateway: str | None
    wandb_project: str


def export_request(
    formats: list[str],
    *,
    output: Path | None = None,
    pushgateway: str | None = None,
    wandb_project: str | None = None,
) -> ExportRequest | None:
    """What to export, checked before anything runs; ValueError (one line) when it cannot be
    done: an unknown format, ``-o`` that fits none of them, wandb not installed.  None when
    nothing is asked for."""
    from clusterbench.report.export import TEXT_FORMATS, parse_formats
    from clusterbench.report.export_wandb import INSTALL_HINT, available

    if not formats and pushgateway is None:
        return None
    chosen = parse_formats(formats) if formats else []
    if output is not None and chosen:
        to_stdout = str(output) == "-"
        if to_stdout and (len(chosen) > 1 or chosen[0] not in TEXT_FORMATS):
            raise ValueError(
                f"-o - writes one text format to stdout ({', '.join(TEXT_FORMATS)}), "
                f"not {','.join(chosen)}"
            )
        if not to_stdout and len(chosen) > 1 and not output.is_dir():
            raise ValueError(f"-o {output}: one file for {len(chosen)} formats; give an "
                             "existing folder to write them all into, or one format")  # fmt: skip
    if "wandb" in chosen and not available():
        raise ValueError(f"--format wandb: wandb is not installed: {INSTALL_HINT}")
    project = wandb_project or os.environ.get("WANDB_PROJECT") or "clusterbench"
    return ExportRequest(chosen, output, pushgateway, project)


def do_exports(results: Results, request: ExportRequest, *, run_dir: Path) -> list[str]:
    """Every export asked for, one after the other (one that fails does not stop the next);
    prints where each went and returns one line per failure."""
    from clusterbench.report.export import ExportError

    to_stdout = request.output is not None and str(request.output) == "-"
    failures = []
    for fmt in request.formats:
        try:
            for line in _export_one(results, fmt, request=request, run_dir=run_dir):
                typer.echo(f"{fmt}: {line}", err=to_stdout)
        except ExportError as exc:
            failures.append(f"{fmt}: {exc}")
    if request.pushgateway is not None:
        from clusterbench.report.export_prometheus import PUSH_JOB, push

        try:
            grouping = push(results, request.pushgateway)
        except ExportError as exc:
            failures.append(f"pushgateway: {exc}")
        else:
            group = ",".join(f"{k}={v}" for k, v in grouping.items())
            typer.echo(f"pushgateway: {request.pushgateway} (job={PUSH_JOB},{group})",
                       err=to_stdout)  # fmt: skip
    return failures


def _export_one(results: Results, fmt: str, *, request: ExportRequest, run_dir: Path) -> list[str]:
    """Write one format; the lines saying where it went."""
    from clusterbench.report import export_prometheus, export_wandb
    from clusterbench.report.export import DEFAULT_NAMES, csv_text, jsonl_text, write_text_atomic

    output = request.output
    if fmt == "wandb":
        # -o DIR, else wandb's own WANDB_DIR, else the run folder
        directory = output if output is not None or os.environ.get("WANDB_DIR") else run_dir
        done = export_wandb.export(results, directory=directory, project=request.wandb_project)
        lines = [str(done.folder) if done.folder is not None else "not written (WANDB_MODE)"]
        return lines + ([done.url] if done.url else [])
    if output is not None and str(output) == "-":
        texts = {"csv": csv_text, "json-lines": jsonl_text, "prometheus": export_prometheus.text}
        typer.echo(texts[fmt](results), nl=False)
        return []
    if output is None:
        path = run_dir / DEFAULT_NAMES[fmt]
    else:
        path = output / DEFAULT_NAMES[fmt] if output.is_dir() else output
    if fmt == "prometheus":
        export_prometheus.write_textfile(results, path)
    else:
        write_text_atomic(path, csv_text(results) if fmt == "csv" else jsonl_text(results))
    return [str(path)]


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
    from clusterbench.baselines import load_run
    from clusterbench.report.sections.cost import priced_results

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
