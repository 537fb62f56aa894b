"""``clusterbench predict``: the step time, communication share and weak-scaling efficiency of
a run's training at larger GPU counts, from the run's own measurements; or, with ``--workload``,
the throughput of a training job a published result states, at larger sizes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli.common import PlainUsage, _console, _split, _usage_error, app

if TYPE_CHECKING:
    from clusterbench.analyses.prediction.predict import Prediction
    from clusterbench.analyses.prediction.scaling_model import Links
    from clusterbench.analyses.prediction.stated_workload import WorkloadPrediction
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

With --workload FILE (TOML or YAML) it predicts a training job as a published result states
it: the model, the batch, the strategy and its sizes (DDP, ZeRO, FSDP, TP, PP, CP, EP), the
GPUs and links, and the throughput measured at the base size; the file's larger sizes (and
--gpus) are predicted with the same step model, with the band (the assumptions at their two
ends, the link fits, the model's error on published results) and what was assumed
(docs/commands/predict.md, "Stated workloads").  A RUN given with it lends its measured links.

RUN is a run folder or its results.json.  Exit codes: 0 predicted; 2 bad input (no run, no
training results, a bad --gpus, a bad workload file, ...), one line.
"""


_TEXT = frozenset({"from", "strategy", "used", "value", "value and source", "not checked"})
"""Columns of words, left-aligned; the others hold numbers."""


@app.command("predict", cls=PlainUsage, help=_PREDICT_HELP)
def predict(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN",
            help="Run folder or its results.json (optional with --workload).",
            show_default=False,
        ),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            "--gpus",
            metavar="N[,N]",
            help="GPU counts to predict at, comma-separated (default: 64,256,1024; with "
            "--workload, the file's points).",
            show_default=False,
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            metavar="FILE",
            help="A training job as a published result states it (TOML or YAML).",
            show_default=False,
        ),
    ] = None,
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
    from clusterbench.analyses.prediction.predict import NoPrediction
    from clusterbench.analyses.prediction.predict import predict as make_prediction
    from clusterbench.compare_io import load_run

    if workload is not None:
        _predict_workload(workload, run, gpus=gpus, as_json=as_json)
        return
    if run is None:
        raise _usage_error("RUN: a run folder is needed (or --workload FILE)")
    counts = _counts(gpus if gpus is not None else "64,256,1024")
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


def _read_workload(path: str) -> dict[str, object]:
    """The workload file parsed: TOML, or YAML by its .yaml / .yml name."""
    from pathlib import Path

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise _usage_error(f"--workload: cannot read {path}: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in (".yaml", ".yml"):
            import yaml

            doc = yaml.safe_load(text)
        else:
            import tomllib

            doc = tomllib.loads(text)
    except Exception as exc:  # tomllib.TOMLDecodeError, yaml.YAMLError: one line either way
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _usage_error(f"--workload: {path} does not parse: {first}") from None
    if not isinstance(doc, dict):
        raise _usage_error(f"--workload: {path} is not a table of tables")
    return doc


def _run_links(run: str, gpus_per_node: int) -> Links:
    """The run's measured links (the slowest fit of each level; assumed where not measured)."""
    from clusterbench.analyses.prediction import inputs
    from clusterbench.analyses.prediction.scaling_model import Links
    from clusterbench.compare_io import load_run

    try:
        results = load_run(run)
    except ValueError as exc:
        raise _usage_error(f"RUN: {exc}") from None
    fits, _ = inputs.measured_links(results)
    intra = inputs.slowest(fits, "intra") or inputs.assumed_intra(results)
    rails = inputs.slowest(fits, "inter")
    inter = inputs.inter_for(results, measured=rails, gpus_per_node=gpus_per_node, nic_gbps=None)
    return Links(gpus_per_node=gpus_per_node, intra=intra.fit if intra else None, inter=inter.fit)


def _predict_workload(path: str, run: str | None, *, gpus: str | None, as_json: bool) -> None:
    from pathlib import Path

    from clusterbench.analyses.prediction.stated_workload import predict_workload

    doc = _read_workload(path)
    extra = _counts(gpus) if gpus is not None else []
    links = None
    if run is not None:
        cluster = doc.get("cluster")
        g = cluster.get("gpus_per_node") if isinstance(cluster, dict) else None
        if not isinstance(g, int) or isinstance(g, bool) or g < 1:
            raise _usage_error("cluster.gpus_per_node must be a whole number >= 1")
        links = _run_links(run, g)
    try:
        prediction = predict_workload(doc, name=Path(path).stem, links=links, extra_gpus=extra)
    except (ValueError, ArithmeticError) as exc:
        raise _usage_error(f"--workload {path}: {exc}") from None
    if as_json:
        typer.echo(json.dumps(prediction.to_dict(), indent=2, allow_nan=False))
        return
    _print_workload(prediction, from_run=run)


_UNIT_TEXT = {
    "tokens_per_s_per_gpu": "tokens/s per GPU", "samples_per_s_per_gpu": "samples/s per GPU",
    "samples_per_s": "samples/s", "tflops_per_gpu": "TFLOP/s per GPU", "mfu": "MFU",
    "step_s": "step s",
}  # fmt: skip


def _print_workload(prediction: WorkloadPrediction, *, from_run: str | None) -> None:
    """The points (predicted, band, published, error) and the assumptions."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from clusterbench.analyses.prediction.findings import signed_pct

    console = _console()
    src = prediction.source
    console.print(Text(f"clusterbench predict: workload {prediction.name}", style="bold"))
    where = ", ".join(str(src[k]) for k in ("publication", "where", "date") if src.get(k))
    if where:
        console.print(Text(f"source: {where}"))
    if from_run:
        console.print(Text(f"links: measured in run {from_run}"))
    unit = _UNIT_TEXT.get(prediction.points[0].unit, prediction.points[0].unit)
    console.print()
    console.print(Text(f"{unit}: predicted from the base (the smallest published size); band: "
                       "95%, the assumptions at their ends, the link fits and the model's error "
                       "on published results; error: (predicted - published) / published",
                       style="italic"))  # fmt: skip
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in ("GPUs", "layout", "predicted", "band", "published", "error", "in band"):
        table.add_column(Text(name), justify="left" if name in ("layout", "in band") else "right")
    for p in prediction.points:
        pub = "-" if p.published is None else _num(p.published)
        if p.base:
            err, held, band = "base", "", "-"
        else:
            err = "-" if p.error is None else signed_pct(p.error)
            held = "" if p.holds is None else ("yes" if p.holds else "no")
            band = f"{_num(p.low)}–{_num(p.high)}"
        table.add_row(Text(str(p.gpus)), Text(p.layout), Text(_num(p.predicted)), Text(band),
                      Text(pub), Text(err), Text(held))  # fmt: skip
    console.print(table)
    console.print()
    console.print(Text("assumed (the prediction and its band rest on these)", style="italic"))
    for line in prediction.assumptions:
        console.print(Text(f"- {line}"))


def _num(value: float) -> str:
    return (
        f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if value < 10 else f"{value:.1f}"
    )


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

    from clusterbench.analyses.prediction import section as sections
    from clusterbench.analyses.prediction.findings import scaling_finding, validation_finding

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
