"""The cost of a real CPU run: 2 gloo workers train the tiny decoder at 1 and 2 ranks and sweep
all_reduce; ``clusterbench cost`` prices the run's own throughput, writes cost.json, rebuilds
summary.md and report.html with the cost, and ``clusterbench export`` and ``clusterbench
report`` of the run carry it too.  The figures checked are computed here from the run's own
measurements, not pinned: CPU throughput varies from machine to machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import cpu_run
from typer.testing import CliRunner

from clusterbench.analyses.cost.table import cost_table
from clusterbench.analyses.cost.prices import CloudOffer, CostRequest
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.cli import app

pytestmark = pytest.mark.dist
runner = CliRunner()


def cli(*args: str) -> tuple[int, str, str]:
    """The command in this process (the run itself is a real one, above it)."""
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


SETTINGS = (
    "training.model=tiny",
    "training.steps=4",
    "training.warmup_steps=2",
    "collectives.ops=all_reduce",
    "collectives.groups=world",
    "collectives.modes=back_to_back",
    "collectives.min_bytes=4096",
    "collectives.max_bytes=1048576",
    "collectives.iters=10",
    "collectives.warmup=2",
)


def test_a_cpu_run_priced_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = cpu_run(out, "training,collectives", SETTINGS, timeout=240)
    rate = {m.params["world_size"]: m.value for m in T.tokens_per_s_per_gpu.select(results)}
    assert sorted(rate) == [1, 2]
    # without prices: the throughput and the flags, nothing written
    code, stdout, stderr = cli("cost", str(out))
    assert code == 0, stderr
    assert "no prices given" in stdout and not (out / "cost.json").exists()

    code, stdout, stderr = cli("cost", str(out), "--gpu-hour", "2.5", "--train-tokens", "1e12")
    assert code == 0, stderr
    kept = json.loads((out / "cost.json").read_text(encoding="utf-8"))
    [offer] = kept["offers"]
    # priced at the run's 2 ranks, measured there
    assert kept["at"]["basis"] == "measured" and kept["at"]["gpus"] == 2
    assert offer["usd_per_unit"] == pytest.approx(2.5 / (rate[2] * 3600) * 1e6)
    assert offer["train_s"] == pytest.approx(1e12 / (2 * rate[2]))
    assert offer["monthly_usd"] == pytest.approx(2 * 730 * 2.5)
    assert f"${offer['monthly_usd']:,.0f}" in stdout
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## cost" in summary and "$3,650" in summary
    assert 'id="b-cost"' in (out / "report.html").read_text(encoding="utf-8")

    # at 64 ranks the scaling model predicts the efficiency (training and collectives ran);
    # where the model refuses this run's fits (2 shared cores can make a sweep that no
    # latency-bandwidth line fits), the nearest measured throughput, saying why
    at = cost_table(results, CostRequest(offers=[CloudOffer(gpu_hour=2.5)], gpus=64)).at
    print(f"\nat 64 ranks: {at.basis}: {at.source}")
    if at.basis == "predicted":
        assert at.per_device == pytest.approx(rate[1] * at.efficiency) and at.prediction
    else:
        assert at.basis == "assumed" and "no scaling prediction:" in at.source
        assert at.per_device == rate[2]

    code, stdout, stderr = cli("export", str(out), "--format", "csv", "-o", "-")
    assert code == 0, stderr
    rows = [line for line in stdout.splitlines() if ",cost,usd_per_million_tokens," in line]
    assert len(rows) == 1
    (out / "report.html").unlink()
    code, stdout, stderr = cli("report", str(out))
    assert code == 0, stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="b-cost"' in page and "$3,650" in page
