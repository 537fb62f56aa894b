"""``clusterbench predict``: the step time, communication share and weak-scaling efficiency of
a run's training at larger GPU counts, from the run's own measurements."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli._common import PlainUsage, _console, _split, _usage_error, app

if TYPE_CHECKING:
    from clusterbench.analysis.prediction import Prediction
    from clusterbench.schema import Results

__all__ = ["predict"]

_PREDICT_HELP = """Predict the run's training at larger GPU counts: step time, communication
share, weak-scaling efficiency of DDP and FSDP, and the inter-node bandwidth per node that
keeps the efficiency at the target.

It fits each link's latency (alpha) and bandwidth (beta) to the run's collectives sweeps (the
back-to-back all_reduce of the world group on one node, of each node's group on several, and
of each rail across nodes; the slowest of each is used), takes the per-GPU compute time and
the gradient bytes from the training benchmark and the overlap of communication with compute
from attribution, and applies the ring cost formulas, hierarchical past one node
(docs/reference.md, "Step time at larger GPU counts").  The band is the link fits' 95%
prediction interval, from their residuals.

A link the run did not measure is assumed: within a node from the GPU spec, across nodes from
--nic-gbps, else the hosts' NIC inventory, else 400 Gb/s per node; every figure that rests on
an assumption is marked * and the assumptions are listed.

The model checks itself on the run: fitted on the smaller world sizes the training measured
(e.g. 1-2 of 1, 2, 4), it predicts the larger ones, and the error is printed.

RUN is a run folder or its results.json.  Exit codes: 0 predicted; 2 bad input (no run, no
training results, a bad --gpus, ...), one line.
"""


_TEXT = frozenset({"from", "strategy", "used", "value", "value and source", "not checked"})
"""Columns of words, left-aligned; the others hold numbers."""


@app.command("predict", cls=PlainUsage, help=_PREDICT_HELP)
def predict(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN", help="Run folder or its results.json.", show_default=False),
    ],
    gpus: Annotated[
        str,
        typer.Option("--gpus", metavar="N[,N]", help="GPU counts to predict at, comma-separated."),
    ] = "64,256,1024",
    gpus_per_node: Annotated[
        int | None,
        typer.Option(
            "--gpus-per-node",
            metavar="N",
            help="GPUs per node of the cluster predicted for (default: the run's, or 8 when "
            "it had one per node).",
            show_default=False,
        ),
    ] = None,
    nic_gbps: Annotated[
        float | None,
        typer.Option(
            "--nic-gbps",
            metavar="GBPS",
            help="Inter-node Gb/s per node (default: the measured rails, else the NIC "
            "inventory, else 400).",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy", metavar="ddp|fsdp", help="Strategies, comma-separated: ddp, fsdp."
        ),
    ] = "ddp,fsdp",
    target: Annotated[
        float,
        typer.Option(
            "--target",
            metavar="FRACTION",
            help="Weak-scaling efficiency the bandwidth figure aims for.",
        ),
    ] = 0.9,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the prediction as JSON instead of tables.")
    ] = False,
) -> None:
    from clusterbench.analysis.prediction import NoPrediction
    from clusterbench.analysis.prediction import predict as make_prediction
    from clusterbench.compare_io import load_run

    counts = _counts(gpus)
    strategies = _split([strategy])
    try:
        results = load_run(run)
    except ValueError as exc:
        raise _usage_error(f"RUN: {exc}") from None
    try:
        prediction = make_prediction(
            results, gpu_counts=counts, gpus_per_node=gpus_per_node, nic_gbps=nic_gbps,
            strategies=strategies, target=target,  # type: ignore[arg-type]
        )  # fmt: skip
    except NoPrediction as exc:
        raise _usage_error(f"no prediction from {run}: {exc}") from None
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(prediction.to_dict(), indent=2, allow_nan=False))
        return
    _print(prediction, results)


def _counts(text: str) -> list[int]:
    out = []
    for item in _split([text]):
        try:
            out.append(int(item))
        except ValueError:
            raise _usage_error(f"--gpus: {item!r} is not a GPU count") from None
    if not out:
        raise _usage_error("--gpus needs at least one GPU count")
    return out


def _print(prediction: Prediction, results: Results) -> None:
    """The tables (links, workload, predictions, validation, assumptions), then the two
    sentences the run's findings say."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from clusterbench.analysis.prediction_findings import scaling_finding, validation_finding
    from clusterbench.report.sections import prediction as sections

    console = _console()
    s = prediction.series
    console.print(Text(f"clusterbench predict: run {results.run.id} · {s.model} {s.strategy}",
                       style="bold"))  # fmt: skip
    grids = [
        sections.links_grid(prediction),
        sections.workload_grid(prediction),
        sections.predictions_grid(prediction),
        sections.validation_grid(prediction),
    ]
    assumed = sections.assumptions_grid(prediction)
    for grid in [*grids, *([assumed] if assumed is not None else [])]:
        console.print()
        console.print(Text(grid.title, style="italic"))
        table = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for i, name in enumerate(grid.header):
            table.add_column(Text(name), justify="left" if i == 0 or name in _TEXT else "right")
        for row in grid.rows:
            table.add_row(*(Text(cell) for cell in row))  # Text: never read as markup
        console.print(table)
    for finding in (scaling_finding(prediction, results), validation_finding(prediction)):
        console.print()
        console.print(Text(finding.message))
