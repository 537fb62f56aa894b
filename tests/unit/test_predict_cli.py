"""``clusterbench predict``: tables from a run's results, the same as JSON, and one line with
exit code 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analyses.prediction.predict import predict
from clusterbench.cli import app
from clusterbench.schema import Results
from tests.prediction_runs import run_of

runner = CliRunner()


def _folder(path: Path, r: Results) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(r.model_dump_json(), encoding="utf-8")
    return path


def test_a_run_gives_its_tables(tmp_path: Path) -> None:
    r = run_of(num_nodes=2)
    run = _folder(tmp_path / "run", r)
    result = runner.invoke(app, ["predict", str(run), "--gpus", "64,256"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for title in ("prediction: links", "prediction: the workload", "prediction: weak scaling",
                  "prediction: validation", "At 256 GPUs this job (1.3b ddp)",
                  "Scaling model fitted on 1–2 GPUs, predicted 4, 8 and 16"):  # fmt: skip
        assert title in out
    p = predict(r, gpu_counts=[64, 256])
    for row in p.rows:  # each row's step time as the prediction computes it
        assert f"{1e3 * row.step.step_s:.1f}" in out
    assert "node1" in out and "rail7" in out  # every group's fit listed


def test_json_is_the_prediction(tmp_path: Path) -> None:
    r = run_of(num_nodes=1, gpus_per_node=1, collectives=False)
    run = _folder(tmp_path / "run", r)
    args = [
        "predict",
        str(run / "results.json"),
        "--json",
        "--gpus",
        "16,32",
        "--gpus-per-node",
        "4",
        "--nic-gbps",
        "800",
        "--strategy",
        "fsdp",
        "--target",
        "0.8",
    ]
    result = runner.invoke(app, args)  # fmt: skip
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got == json.loads(json.dumps(predict(
        r, gpu_counts=[16, 32], gpus_per_node=4, nic_gbps=800.0, strategies=["fsdp"], target=0.8,
    ).to_dict()))  # fmt: skip
    assert [(row["world_size"], row["strategy"]) for row in got["predictions"]] == [
        (16, "fsdp"), (32, "fsdp"),
    ]  # fmt: skip
    assert got["links"]["inter"]["kind"] == "given" and got["gpus_per_node"] == 4
    assert got["validation"] is None and "two GPUs" in got["validation_reason"]
    assert any(a.startswith("intra-node link") for a in got["assumptions"])


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["nosuch"], "RUN: "),
        (["notraining"], "no training scaling series"),
        (["run", "--gpus", "0"], "GPU counts must be >= 1"),
        (["run", "--gpus", "12"], "12 GPUs is not a multiple of 8 GPUs per node"),
        (["run", "--gpus", "64", "--gpus-per-node", "3"], "not a multiple of 3"),
        (["run", "--gpus", "sixty"], "--gpus: 'sixty' is not a GPU count"),
        (["run", "--gpus", ","], "--gpus needs at least one GPU count"),
        (["run", "--strategy", "tp"], "strategies are ddp and fsdp"),
        (["run", "--target", "1.5"], "target efficiency must be in (0, 1]"),
        (["run", "--nic-gbps", "0"], "--nic-gbps must be > 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], text: str) -> None:
    _folder(tmp_path / "run", run_of(num_nodes=1))
    bare = run_of(num_nodes=1)
    bare.measurements = [m for m in bare.measurements if m.benchmark != "training"]
    _folder(tmp_path / "notraining", bare)
    argv = [str(tmp_path / a) if a in ("run", "nosuch", "notraining") else a for a in args]
    result = runner.invoke(app, ["predict", *argv])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:"), lines
    assert text in lines[0]
    assert result.stdout == ""


def test_help_explains_what_it_fits_and_assumes() -> None:
    text = " ".join(runner.invoke(app, ["predict", "--help"]).output.split())
    for words in ("alpha", "beta", "all_reduce", "rail", "gradient bytes", "overlap",
                  "assumed", "400 Gb/s", "--gpus", "--gpus-per-node", "--nic-gbps",
                  "--strategy", "--target", "--json", "Exit codes"):  # fmt: skip
        assert words in text, words
    assert "predict" in runner.invoke(app, ["--help"]).output
