"""The cost formulas against hand-computed cases (the seed guide's own money example among
them), units and amounts as people write them, bad prices (one line, exit code 2), the price
file, and ``clusterbench cost`` with and without prices."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analyses.cost.findings import wasted_fraction
from clusterbench.analyses.cost.prices import (
    CloudOffer,
    CostRequest,
    OnPremOffer,
    PriceError,
    break_even_months,
    break_even_utilisation,
    gpu_hour_usd,
    node_year,
    offers_from_table,
    parse_amount,
)
from clusterbench.analyses.cost.table import (
    cost_table,
    gpu_hours_per_unit,
    monthly_usd,
    train_seconds,
    usd_per_unit,
)
from clusterbench.analyses.run import summary_sections
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.cli import app
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, ParamValue, Results, RunInfo, ToolInfo

runner = CliRunner()

ON_PREM = {
    "capex_per_node": 250_000,
    "years": 4,
    "power_kw_per_node": 6.5,
    "power_price": 0.12,
    "pue": 1.4,
    "ops_per_year": 20_000,
}


def _m(metric: Metric, value: float, **params: ParamValue) -> Measurement:
    return Measurement(
        benchmark=metric.benchmark,
        metric=metric.name,
        value=value,
        unit=metric.unit,
        params=params,
        rank=0,
        host="node0",
        device="cuda:0",
    )


def training_run(
    rates: dict[int, float],
    *,
    model: str = "1.3b",
    warn: float = 0.9,
    nodes: int = 1,
    findings: list[Finding] | None = None,
) -> Results:
    """A GPU run whose training measured ``rates`` (world size -> work/s per GPU) and the
    weak-scaling efficiency they imply; its scaling threshold ``warn``."""
    decoder = model in ("tiny", "125m", "1.3b", "2b", "7b", "8b")
    rate = T.tokens_per_s_per_gpu if decoder else T.samples_per_s_per_gpu
    ms = []
    for w, r in rates.items():
        case: dict[str, ParamValue] = {
            "model": model,
            "strategy": "ddp",
            "precision": "bf16",
            "world_size": w,
            "batch_size": 8,
            "series": "scaling",
        }
        ms.append(_m(rate, r, **case))
        if w > 1:
            ms.append(_m(T.scaling_efficiency, 100 * r / rates[1], scaling_mode="weak", **case))
    world = max(rates)
    run = RunInfo(
        id="r1",
        started="2026-12-01T00:00:00Z",
        suite="standard",
        world_size=world,
        num_nodes=nodes,
        backend="nccl",
        command="clusterbench run",
        config={"thresholds": {"scaling_min_efficiency_warn": warn}},
        benchmarks=["training"],
    )
    return Results(
        tool=ToolInfo(version="0.1.0"), run=run, measurements=ms, findings=findings or []
    )


# --- formulas ---------------------------------------------------------------------------------


def test_cloud_formulas_by_hand() -> None:
    # $2.50 per GPU-hour, 30,000 tokens/s per GPU: 108e6 tokens an hour, $0.02315 per million
    assert usd_per_unit(2.5, per_device_rate=30_000, per=1e6) == pytest.approx(2.5 / 108)
    assert gpu_hours_per_unit(per_device_rate=30_000, per=1e6) == pytest.approx(1 / 108)
    # 1e12 tokens on 256 GPUs at 30,000 tokens/s each and 80% efficiency: 162,760 s
    assert train_seconds(1e12, base_rate=30_000, efficiency=0.8, gpus=256) == pytest.approx(
        1e12 / 6_144_000
    )
    # 256 GPUs busy 70% of a 730 h month at $2.50
    assert monthly_usd(2.5, gpus=256, utilisation=0.7) == pytest.approx(327_040.0)


def test_on_prem_cost_per_gpu_hour_and_break_even_by_hand() -> None:
    o = OnPremOffer.model_validate(ON_PREM)
    y = node_year(o)
    assert (y.capex, y.ops) == (62_500.0, 20_000.0)
    assert y.power == pytest.approx(6.5 * 1.4 * 8760 * 0.12)  # 9,565.92 $ of kWh
    total = 62_500 + 9_565.92 + 20_000  # 92,065.92 $ a node a year
    # 8 GPUs busy 80% of 8,760 h: 56,064 GPU-hours a node a year
    assert gpu_hour_usd(o, gpus_per_node=8, utilisation=0.8) == pytest.approx(total / 56_064)
    cloud = CloudOffer(gpu_hour=2.5)
    assert gpu_hour_usd(cloud, gpus_per_node=8, utilisation=0.1) == 2.5  # paid per hour used
    # on-prem is cheaper above u* = 92,065.92 / (8 x 8,760 x 2.5) = 52.5%
    assert break_even_utilisation(cloud, o, gpus_per_node=8) == pytest.approx(total / 175_200)
    # renting 8 GPUs 80% of 730 h = $11,680 a month against $2,463.83 of power and operations:
    # the $250,000 are paid back after 27.13 months
    months = break_even_months(cloud, o, gpus_per_node=8, utilisation=0.8)
    assert months == pytest.approx(250_000 / (11_680 - (9_565.92 + 20_000) / 12))
    assert 27.1 < months < 27.2  # type: ignore[operator]
    # renting 1 GPU a tenth of the time never costs more than running the node
    assert break_even_months(cloud, o, gpus_per_node=1, utilisation=0.1) is None


def test_the_seed_guides_32_a100_nodes_from_40_to_92_percent() -> None:
    """32 nodes x 8 A100s at 40% of the reference throughput, tuned to 92% (the guide's
    opening): at $4.73 per GPU-hour the tuning saves the $500K a month it names."""
    reference = 1_000.0  # tokens/s of one GPU; what matters is 40% and 92% of it
    scaling = Finding(
        id="training.scaling_efficiency",
        severity="fail",
        scope="run",
        message="...",
        evidence={"efficiency_pct": 40.0, "world_size": 256},
    )
    results = training_run(
        {1: reference, 256: 0.40 * reference}, warn=0.92, nodes=32, findings=[scaling]
    )
    request = CostRequest(
        offers=[CloudOffer(gpu_hour=4.73)], gpus=256, gpus_per_node=8, train_tokens=1e12
    )
    table = cost_table(results, request)
    spend = 256 * 730 * 4.73  # $883,942.40 a month
    saving = spend * (1 - 0.40 / 0.92)  # the same work in 40/92 of the GPU-hours
    assert table.offers[0].monthly_usd == pytest.approx(spend)
    [priced] = table.priced
    assert priced.finding_id == "training.scaling_efficiency" and priced.basis == "target"
    assert priced.savings["cloud"] == pytest.approx(saving)
    assert priced.savings["cloud"] == pytest.approx(500_000, rel=0.005)
    assert wasted_fraction(0.40, 0.92) == pytest.approx(0.52 / 0.92)
    # the throughput at 256 was measured: 400 tokens/s per GPU; $/M tokens and the budget
    assert table.at.basis == "measured" and table.at.per_device == 400.0
    assert table.offers[0].usd_per_unit == pytest.approx(4.73 / (400 * 3600) * 1e6)
    assert table.offers[0].train_s == pytest.approx(1e12 / (256 * 400))
    assert table.offers[0].train_usd == pytest.approx(1e12 / (256 * 400) / 3600 * 256 * 4.73)


def test_a_gpu_count_not_measured_rests_on_the_nearest_efficiency_marked_assumed() -> None:
    results = training_run({1: 1000.0, 8: 800.0})
    table = cost_table(results, CostRequest(offers=[CloudOffer(gpu_hour=2.0)], gpus=64))
    assert table.at.basis == "assumed" and table.at.per_device == 800.0
    assert "no scaling prediction" in table.at.source  # no collectives: no model to ask
    assert table.offers[0].monthly_usd == pytest.approx(64 * 730 * 2.0)


def test_images_are_priced_per_thousand() -> None:
    table = cost_table(
        training_run({1: 2000.0}, model="resnet50"),
        CostRequest(offers=[CloudOffer(gpu_hour=3.6)], train_samples=1e9),
    )
    assert table.throughput.work == "images" and table.per == 1e3
    # 2,000 images/s: 7.2e6 an hour, $3.60 of it: $0.0005 per thousand
    assert table.offers[0].usd_per_unit == pytest.approx(3.6 / 7.2e6 * 1e3)
    assert table.offers[0].train_s == pytest.approx(1e9 / 2000)


# --- amounts, units and bad prices ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2.5", 2.5),
        ("$2.50", 2.5),
        ("1e12", 1e12),
        ("1T", 1e12),
        ("1000B", 1e12),
        ("250k", 250e3),
        ("1.5M", 1.5e6),
        ("1,000,000", 1e6),
        ("20_000", 2e4),
        (7, 7.0),
    ],
)
def test_amounts_as_people_write_them(text: object, value: float) -> None:
    assert parse_amount(text) == value


@pytest.mark.parametrize("bad", ["two", "1X", "", True, None, "1e"])
def test_what_is_not_an_amount(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_amount(bad)


@pytest.mark.parametrize("bad", ["-1", "0", "nan", "inf", "-0.5"])
def test_a_bad_price_is_refused(bad: str) -> None:
    with pytest.raises(PriceError, match="positive finite"):
        from clusterbench.analyses.cost.prices import offer_from

        offer_from("cloud", {"gpu_hour": bad}, label=lambda f: f"--{f}")


def _folder(path: Path, results: Results) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(results.model_dump_json(), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpu-hour", "-2.5"], "--gpu-hour: must be a positive finite number, got '-2.5'"),
        (["--gpu-hour", "0"], "--gpu-hour: must be a positive finite number, got '0'"),
        (["--gpu-hour", "nan"], "--gpu-hour: must be a positive finite number, got 'nan'"),
        (["--gpu-hour", "cheap"], "--gpu-hour: 'cheap' is not a number"),
        (["--capex-per-node", "250k", "--years", "4"], "an on-prem price needs --power-kw"),
        (
            [
                *[x for k, v in ON_PREM.items() for x in (f"--{k.replace('_', '-')}", str(v))],
                "--pue",
                "0.9",
            ],
            "--pue: a PUE is facility power / IT power, 1 or more",
        ),
        (["--gpu-hour", "2", "--utilisation", "1.5"], "--utilisation: a utilisation is a fraction"),
        (["--gpu-hour", "2", "--gpus", "2.5"], "--gpus: must be a whole number"),
        (["--gpu-hour", "2", "--gpus", "H100"], "--gpus: 'H100' is not a number"),
        (["--gpu-hour", "2", "--nodes", "two"], "--nodes: 'two' is not a number"),
        (["--gpu-hour", "2", "--gpus-per-node", "x8"], "--gpus-per-node: 'x8' is not a number"),
        (["--gpu-hour", "2", "--train-tokens", "-1e12"], "--train-tokens: must be a positive"),
        (["--gpu-hour", "2", "--train-samples", "1e9"], "trains on tokens: give --train-tokens"),
        (
            ["--gpu-hour", "2", "--nodes", "4", "--gpus-per-node", "8", "--gpus", "16"],
            "--gpus 16 is not --nodes 4 x 8 GPUs per node",
        ),
        (["--prices", "missing.toml"], "--prices: file not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, args: list[str], says: str) -> None:
    run = _folder(tmp_path / "run", training_run({1: 1000.0, 8: 800.0}))
    result = runner.invoke(app, ["cost", str(run), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error: "), lines
    assert says in lines[0]
    assert not (run / "cost.json").exists()


def test_a_run_without_training_is_one_line(tmp_path: Path) -> None:
    results = training_run({1: 1000.0}).model_copy(update={"measurements": []})
    result = runner.invoke(
        app, ["cost", str(_folder(tmp_path / "run", results)), "--gpu-hour", "2"]
    )
    assert result.exit_code == 2 and "no training throughput" in result.stderr


# --- the price file ---------------------------------------------------------------------------

PRICES = """
[[cloud]]
name = "on-demand"
gpu_hour = "$4.10"

[[cloud]]
name = "reserved"
gpu_hour = 1.89

[[on_prem]]
name = "own nodes"
capex_per_node = "250k"
years = 4
power_kw_per_node = 6.5
power_price = 0.12
pue = 1.4
ops_per_year = "20k"
"""


def test_a_price_file_of_several_offers(tmp_path: Path) -> None:
    (tmp_path / "prices.toml").write_text(PRICES, encoding="utf-8")
    run = _folder(tmp_path / "run", training_run({1: 1000.0, 8: 800.0}))
    args = [
        "cost",
        str(run),
        "--prices",
        str(tmp_path / "prices.toml"),
        "--json",
        "--utilisation",
        "0.8",
        "--nodes",
        "32",
        "--gpus-per-node",
        "8",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert [o["name"] for o in got["offers"]] == ["on-demand", "reserved", "own nodes"]
    assert got["at"]["gpus"] == 256
    expected = (62_500 + 6.5 * 1.4 * 8760 * 0.12 + 20_000) / (8760 * 0.8 * 8)
    assert got["offers"][2]["gpu_hour_usd"] == pytest.approx(expected)
    pairs = {(b["cloud"], b["on_prem"]): b for b in got["break_even"]}
    total = 62_500 + 6.5 * 1.4 * 8760 * 0.12 + 20_000
    assert pairs["on-demand", "own nodes"]["utilisation"] == pytest.approx(total / (8 * 8760 * 4.1))
    assert pairs["reserved", "own nodes"]["utilisation"] == pytest.approx(total / (8 * 8760 * 1.89))
    assert "70%" in got["rule_of_thumb"] and "decides" in got["rule_of_thumb"]
    # written into the run folder: the same table, and the summary's cost section
    kept = json.loads((run / "cost.json").read_text(encoding="utf-8"))
    assert kept["offers"] == got["offers"]
    summary = (run / "summary.md").read_text(encoding="utf-8")
    assert "## cost" in summary and "own nodes" in summary and "break-even" in summary


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[cloud]]\ngpu_hour = -1\n", "prices.toml: cloud[1].gpu_hour: must be a positive"),
        ("[[cloud]]\nprice = 2\n", "prices.toml: cloud[1].gpu_hour: missing"),
        ("[[cloud]]\ngpu_hour = 2\ncurrency = 'EUR'\n", "cloud[1].currency: unknown key"),
        ("[[on_prem]]\ncapex_per_node = 1\n", "on_prem[1].years: missing"),
        ("[[rent]]\ngpu_hour = 2\n", "unknown table 'rent'"),
        ("[cloud]\ngpu_hour = 2\n", "cloud must be an array of tables"),
        (
            "[[cloud]]\ngpu_hour = 2\n[[cloud]]\nname = 'cloud 1'\ngpu_hour = 3\n",
            "two offers named",
        ),
        ("title = 'x'\n", "unknown table 'title'"),
        ("[[cloud]\n", "malformed TOML"),
    ],
)
def test_a_bad_price_file_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    run = _folder(tmp_path / "run", training_run({1: 1000.0}))
    result = runner.invoke(app, ["cost", str(run), "--prices", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


def test_the_file_parser_names_the_table() -> None:
    offers = offers_from_table({"cloud": [{"gpu_hour": 2}], "on-prem": [ON_PREM]}, source="p")
    assert [(o.kind, o.name) for o in offers] == [("cloud", "cloud"), ("on_prem", "on-prem")]
    with pytest.raises(PriceError, match=r"^p: no offer"):
        offers_from_table({}, source="p")


# --- no prices --------------------------------------------------------------------------------


def test_no_price_invents_nothing_and_says_which_flags(tmp_path: Path) -> None:
    run = _folder(tmp_path / "run", training_run({1: 1000.0, 8: 800.0}))
    result = runner.invoke(
        app, ["cost", str(run), "--train-tokens", "1e12"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "no prices given" in out and "--gpu-hour PRICE" in out and "--prices" in out
    assert "--capex-per-node" in out and "$" not in out.split("no prices given")[0]
    # the throughput and the GPU-hours, which need no price: 1e6 / (800 x 3,600) at 8 GPUs
    assert f"{1e6 / (800 * 3600):.3f}" in out
    assert not (run / "cost.json").exists()
    json_out = runner.invoke(app, ["cost", str(run), "--json"])
    assert json.loads(json_out.stdout)["offers"] == []


def test_the_run_summary_names_the_flags_without_prices() -> None:

    sections = summary_sections(training_run({1: 1000.0, 8: 800.0}))
    [cost] = [s for s in sections if s.benchmark == "cost"]
    assert cost.grids[-1].title.startswith("cost: no prices given")
    assert any("--gpu-hour" in row[0] for row in cost.grids[-1].rows)
    empty = training_run({1: 1000.0}).model_copy(update={"measurements": []})
    assert all(s.benchmark != "cost" for s in summary_sections(empty))


def test_json_has_no_nan(tmp_path: Path) -> None:
    table = cost_table(training_run({1: 1000.0}), CostRequest(offers=[CloudOffer(gpu_hour=1)]))
    text = json.dumps(table.to_dict(), allow_nan=False)
    assert not math.isnan(json.loads(text)["offers"][0]["usd_per_unit"])
