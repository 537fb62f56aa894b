"""``clusterbench cost``: what the run's cluster costs per unit of work at the prices given,
cloud against on-prem, and the price of each finding."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from clusterbench.cli.common import PlainUsage, _console, _usage_error, app

if TYPE_CHECKING:
    from clusterbench.analyses.cost.prices import CostRequest, Offer
    from clusterbench.analyses.cost.table import CostTable
    from clusterbench.schema import Results

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["cost"]

_COST_HELP = """Price the run's training: $ per million tokens (per thousand images or samples),
the time and cost to train a budget, cloud against on-prem, and what each finding costs a
month.

From the run's measured training throughput per GPU and its scaling efficiency at the GPU
count priced (--gpus, or --nodes x --gpus-per-node; default the run's world size): measured
where the run trained at that count, else the scaling model's prediction ('clusterbench
predict'), else the nearest measured efficiency, assumed to hold (marked *).

Prices, all positive (k, M, B, T suffixes and $ allowed: 250k, $2.50, 1T):

\b
  cloud    --gpu-hour PRICE ($ per GPU-hour)
  on-prem  --capex-per-node $ --years N --power-kw-per-node KW
           --power-price $/kWh --pue P --ops-per-year $ (per node)
  several  --prices FILE.toml, with [[cloud]] (name, gpu_hour) and
           [[on_prem]] (name and the on-prem keys: capex_per_node,
           years, power_kw_per_node, power_price, pue, ops_per_year)

With a cloud and an on-prem offer, the break-even utilisation and months between them are
computed, with the cluster-benchmarking guide's rule of thumb (above ~70% for 2+ years
favours on-prem; docs/sources.md) beside them: the computed figure decides.  The formulas
are in docs/reference.md ("Cost per unit of work").

With prices, the table is written to cost.json in the run folder and summary.md and
report.html are rebuilt with a 'cost' section ('clusterbench report' and 'clusterbench
export' of the run then show it too; --no-write leaves the folder alone).  Without prices
nothing is invented: the throughput and GPU-hours are shown with the flags that price them,
and nothing is written.

Exit codes: 0 priced (or nothing to price); 2 bad input (no run, no training throughput, a
negative, zero or non-finite price, a price file that cannot be read: one line).
"""

_ON_PREM = ("capex_per_node", "years", "power_kw_per_node", "power_price", "pue", "ops_per_year")


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _flag_offers(gpu_hour: str | None, on_prem: dict[str, str | None]) -> list[Offer]:
    from clusterbench.analyses.cost.prices import offer_from

    offers = []
    if gpu_hour is not None:
        offers.append(offer_from("cloud", {"gpu_hour": gpu_hour}, label=_flag))
    given = {k: v for k, v in on_prem.items() if v is not None}
    if given:
        missing = [_flag(k) for k in _ON_PREM if k not in given]
        if missing:
            raise ValueError(f"an on-prem price needs {', '.join(missing)} too")
        offers.append(offer_from("on_prem", given, label=_flag))
    return offers


def _file_offers(path: Path) -> list[Offer]:
    from clusterbench.analyses.cost.prices import offers_from_table

    try:
        with open(path, "rb") as fh:
            table = tomllib.load(fh)
    except FileNotFoundError:
        raise ValueError(f"--prices: file not found: {path}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--prices: {path}: not a UTF-8 TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--prices: {path}: malformed TOML: {exc}") from None
    except OSError as exc:
        raise ValueError(f"--prices: {path}: cannot read: {exc.strerror}") from None
    return offers_from_table(table, source=str(path))


def _request(results: Results, options: dict[str, Any], offers: list[Offer]) -> CostRequest:
    from pydantic import ValidationError

    from clusterbench.analyses.cost.prices import CostRequest, PriceError, parse_amount
    from clusterbench.analyses.cost.scale import cluster_gpus

    counts: dict[str, int | None] = {}
    for key in ("gpus", "nodes", "gpus_per_node"):
        raw = options[key]
        try:
            value = parse_amount(raw) if raw is not None else None
        except ValueError as exc:
            raise PriceError(f"{_flag(key)}: {exc}") from None
        if value is not None and (not value >= 1 or value != int(value)):
            raise PriceError(f"{_flag(key)}: must be a whole number of 1 or more, got {raw!r}")
        counts[key] = None if value is None else int(value)
    gpus = cluster_gpus(
        results, gpus=counts["gpus"], nodes=counts["nodes"], gpus_per_node=counts["gpus_per_node"]
    )
    values = {
        "offers": offers,
        "gpus": gpus,
        "gpus_per_node": counts["gpus_per_node"],
        "train_tokens": options["train_tokens"],
        "train_samples": options["train_samples"],
    }
    if options["utilisation"] is not None:
        values["utilisation"] = options["utilisation"]
    try:
        return CostRequest.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = (
            _flag(str(err["loc"][0])) if err["loc"] and err["loc"][0] != "offers" else "--prices"
        )
        raise PriceError(f"{where}: {str(err['msg']).removeprefix('Value error, ')}") from None


def _amount(help_text: str, metavar: str = "$") -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


@app.command("cost", cls=PlainUsage, help=_COST_HELP)
def cost(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN", help="Run folder or its results.json.", show_default=False),
    ],
    gpu_hour: Annotated[str | None, _amount("Cloud: $ per GPU-hour.")] = None,
    capex_per_node: Annotated[str | None, _amount("On-prem: $ a node costs to buy.")] = None,
    years: Annotated[str | None, _amount("On-prem: years to write it off over.", "N")] = None,
    power_kw_per_node: Annotated[str | None, _amount("On-prem: kW a node draws.", "KW")] = None,
    power_price: Annotated[str | None, _amount("On-prem: $ per kWh.", "$/KWH")] = None,
    pue: Annotated[str | None, _amount("On-prem: facility / IT power (>= 1).", "P")] = None,
    ops_per_year: Annotated[str | None, _amount("On-prem: $ per node and year.")] = None,
    prices: Annotated[Path | None, _amount("TOML file of offers.", "FILE")] = None,
    gpus: Annotated[str | None, _amount("GPUs of the cluster priced.", "N")] = None,
    nodes: Annotated[str | None, _amount("Nodes of the cluster priced.", "N")] = None,
    gpus_per_node: Annotated[
        str | None, _amount("GPUs per node (default: the run's).", "N")
    ] = None,
    utilisation: Annotated[str | None, _amount("Share of the hours busy (default 1).", "U")] = None,
    train_tokens: Annotated[str | None, _amount("Tokens to train, e.g. 1e12.", "N")] = None,
    train_samples: Annotated[str | None, _amount("Images or samples to train.", "N")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    no_write: Annotated[
        bool, typer.Option("--no-write", help="Leave the run folder alone.")
    ] = False,
) -> None:
    from clusterbench.analyses.cost.scale import NoThroughput
    from clusterbench.analyses.cost.table import cost_table
    from clusterbench.compare_io import load_run

    try:
        results = load_run(run)
    except ValueError as exc:
        raise _usage_error(f"RUN: {exc}") from None
    on_prem = {
        "capex_per_node": capex_per_node,
        "years": years,
        "pue": pue,
        "power_kw_per_node": power_kw_per_node,
        "power_price": power_price,
        "ops_per_year": ops_per_year,
    }
    options = {
        "gpus": gpus,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "utilisation": utilisation,
        "train_tokens": train_tokens,
        "train_samples": train_samples,
    }
    try:
        offers = _file_offers(prices) if prices is not None else []
        offers += _flag_offers(gpu_hour, on_prem)
        request = _request(results, options, offers)
        table = cost_table(results, request)
    except NoThroughput as exc:
        raise _usage_error(f"nothing to price in {run}: {exc}") from None
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    work = table.throughput.work
    if (request.train_tokens is not None and work != "tokens") or (
        request.train_samples is not None and work == "tokens"
    ):
        right = "--train-tokens" if work == "tokens" else "--train-samples"
        raise _usage_error(f"the run's {table.throughput.model} trains on {work}: give {right}")
    written = [] if no_write or not request.offers else _write(run, results, table)
    if as_json:
        typer.echo(json.dumps(table.to_dict(), indent=2, allow_nan=False))
        return
    _print(table, results, written)


def _write(run: str, results: Results, table: CostTable) -> list[Path]:
    """cost.json, then the run's pages rebuilt with the cost section."""
    from clusterbench.analyses.cost.section import COST_FILE, cost_json
    from clusterbench.analyses.run import RunAnalysis
    from clusterbench.report.run_folder import REPORT_FILE, ResultsWriteError, write_results
    from clusterbench.runtime.atomic import write_text_atomic

    folder = Path(run) if Path(run).is_dir() else Path(run).parent
    path = folder / COST_FILE
    try:
        write_text_atomic(path, cost_json(table))
    except OSError as exc:
        raise _usage_error(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        write_results(RunAnalysis(results, run_dir=folder), html=True)
    except ResultsWriteError as exc:
        raise _usage_error(str(exc)) from None
    return [path, folder / "summary.md", folder / REPORT_FILE]


def _print(table: CostTable, results: Results, written: list[Path]) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from clusterbench.analyses.cost.export import price_message
    from clusterbench.analyses.cost.section import table_grids

    console = _console()
    tp = table.throughput
    console.print(Text(f"clusterbench cost: run {results.run.id} · {tp.case}", style="bold"))
    for grid in table_grids(table, findings=False):  # the findings: sentences, below
        console.print()
        console.print(Text(grid.title, style="italic"))
        t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for i, name in enumerate(grid.header):
            justify: Literal["left", "right"] = (
                "left" if i == 0 or name in grid.text_columns else "right"
            )
            t.add_column(Text(name), justify=justify, overflow="fold")
        for row in grid.rows:
            t.add_row(*(Text(cell) for cell in row))  # Text: never read as markup
        console.print(t)
    lines = [
        (
            price_message(p, table)
            if table.offers
            else f"{p.statement} {p.verb} {100 * p.fraction:.1f}% of the cluster's time."
        )
        + f" ({p.finding_id}; {100 * p.fraction:.1f}% of the time, {p.basis}: {p.note})"
        for p in table.priced
    ]
    lines += [b.verdict() for b in table.break_even]
    lines += [table.rule_of_thumb[0].upper() + table.rule_of_thumb[1:]] if table.break_even else []
    lines += [f"written: {', '.join(str(p) for p in written)}"] if written else []
    for line in lines:
        console.print()
        console.print(Text(line))
