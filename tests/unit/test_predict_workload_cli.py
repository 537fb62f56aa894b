"""``clusterbench predict --workload FILE``: a published workload predicted at larger sizes,
in TOML or YAML, as JSON, with a run's links; bad input is one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from clusterbench.cli import app
from tests.prediction_runs import run_of

runner = CliRunner()
CASES = Path(__file__).resolve().parents[2] / "tests" / "data" / "published-scaling"
PTDP = CASES / "megatron-2021-table2-ptdp-175b.toml"


def test_a_published_workload_gives_its_table() -> None:
    result = runner.invoke(app, ["predict", "--workload", str(PTDP)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "clusterbench predict: workload megatron-2021-table2-ptdp-175b" in out
    assert "Table 2" in out and "TFLOP/s per GPU" in out
    assert "1536" in out and "141.0" in out and "base" in out
    assert "points.0.virtual_stages = 1 (ends 1, 2)" in out  # what it assumed, with its ends


def test_json_and_yaml_say_the_same(tmp_path: Path) -> None:
    import tomllib

    doc = tomllib.loads(PTDP.read_text(encoding="utf-8"))
    as_yaml = tmp_path / "ptdp.yaml"
    as_yaml.write_text(yaml.safe_dump(doc), encoding="utf-8")
    outs = []
    for path in (PTDP, as_yaml):
        result = runner.invoke(app, ["predict", "--workload", str(path), "--json"])
        assert result.exit_code == 0, result.output
        outs.append(json.loads(result.stdout))
    assert outs[0]["points"] == outs[1]["points"]
    top = outs[0]["points"][-1]
    assert top["gpus"] == 1536 and top["published"] == 141
    assert top["band"][0] <= top["predicted"] <= top["band"][1]


def test_more_gpus_and_a_runs_links(tmp_path: Path) -> None:
    result = runner.invoke(app, ["predict", "--workload", str(PTDP), "--gpus", "3072", "--json"])
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["points"]
    assert points[-1]["gpus"] == 3072 and points[-1]["published"] is None
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(run_of(num_nodes=2).model_dump_json(), encoding="utf-8")
    result = runner.invoke(app, ["predict", str(run), "--workload", str(PTDP)],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "links: measured in run" in result.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[cluster\n", "does not parse"),
        ("points = 3\n", "cluster.gpus_per_node is missing"),
        ('[cluster]\ngpus_per_node = 8\nfabric = "nvlink3"\n', "at least one point"),
        (PTDP.read_text().replace("tp = 8", "tp = 16", 1), "spans nodes"),
        (PTDP.read_text().replace("tflops_per_gpu", "furlongs", 1), "unknown unit 'furlongs'"),
        (PTDP.read_text().replace("why = ", "whyy = ", 1), "needs its why"),
        (
            PTDP.read_text().replace("inter_gbps_per_gpu = 200", "inter_gbps_per_gpu = 0.001"),
            "too slow",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["predict", "--workload", str(path)])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_missing_file_and_no_run() -> None:
    result = runner.invoke(app, ["predict", "--workload", "no-such-file.toml"])
    assert result.exit_code == 2 and "cannot read" in result.output
    result = runner.invoke(app, ["predict"])
    assert result.exit_code == 2 and "RUN" in result.output


def test_the_docs_example_is_what_the_command_prints() -> None:
    page = (CASES.parents[2] / "docs" / "commands" / "predict.md").read_text(encoding="utf-8")
    marker = "<!-- workload-sample: "
    start = page.index(marker) + len(marker)
    case = page[start : page.index(" -->", start)]
    block = page[page.index("```\n", start) + 4 :]
    block = block[: block.index("```")]
    command, _, shown = block.partition("\n")
    assert command == f"$ clusterbench predict --workload {case}"
    path = CASES.parents[2] / case
    result = runner.invoke(app, ["predict", "--workload", str(path)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip() == shown.rstrip()
