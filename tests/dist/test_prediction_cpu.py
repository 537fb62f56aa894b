"""The scaling prediction of a real CPU run: 4 gloo workers train the tiny decoder at 1, 2 and
4 ranks, sweep all_reduce over the world and profile the training steps; the model fitted on
1-2 ranks predicts the step at 4, and the run measured it too.

The error is printed, not bounded: 4 workers share the 2 cores of a CI machine, where the
step at 4 ranks swings with the scheduler from run to run (CPU runs' repeats, thresholds'
``regression_min_rel_cpu``), and the test would judge the machine, not the model. What is
checked is that the validation is made of the run's own numbers: the measured step is the
run's, the error is (predicted - measured) / measured of them, finite, and the run's findings,
summary, report and ``clusterbench predict`` all say it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clusterbench.analyses.prediction.predict import predict
from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.model_shapes import DECODER_PRESETS
from tests.helpers import cli, cpu_run

pytestmark = [pytest.mark.dist, pytest.mark.timing]

SETTINGS = (
    "training.model=tiny", "training.steps=4", "training.warmup_steps=2",
    "collectives.ops=all_reduce", "collectives.groups=world", "collectives.modes=back_to_back",
    "collectives.min_bytes=4096", "collectives.max_bytes=4194304", "collectives.iters=20",
    "collectives.warmup=3",
)  # fmt: skip


def test_the_prediction_of_a_cpu_run_is_checked_on_its_larger_world_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    results = cpu_run(out, "training,collectives,attribution", SETTINGS, nproc=4, timeout=300)
    steps = {m.params["world_size"]: m.value for m in T.step_time_ms.select(results)}
    assert sorted(steps) == [1, 2, 4]
    # the gradient bytes: every parameter of the tiny decoder in float32, at each world size
    numel = sum(p.numel() for p in Decoder(DECODER_PRESETS["tiny"]).parameters())
    grads = {m.params["world_size"]: m.value for m in T.gradient_bytes.select(results)}
    assert grads == {1: 4 * numel, 2: 4 * numel, 4: 4 * numel}

    p = predict(results)
    assert p.intra is not None and p.intra.group == "world" and p.intra.fit.p == 4
    assert p.grad_bytes.kind == "measured" and p.compute.kind == "measured"
    assert p.compute.value == steps[1] / 1e3
    v = p.validation
    assert v is not None and v.fit_sizes == (1, 2)
    [point] = v.points
    assert point.world_size == 4 and point.measured_s == steps[4] / 1e3
    assert point.rel_error == (point.predicted_s - point.measured_s) / point.measured_s
    assert math.isfinite(point.rel_error) and point.predicted_s > 0

    # the run's own findings, summary and report say the same
    [check] = [f for f in results.findings if f.id == "prediction.validation"]
    error = f"{100 * point.rel_error:+.1f}%".replace("-", "−")
    assert check.message.startswith(
        f"Scaling model fitted on 1–2 ranks, predicted 4: error {error}"
    )
    assert any(f.id == "prediction.scaling" for f in results.findings)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## prediction" in summary and error in summary
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Step time of tiny: measured, validated and predicted" in report

    proc = cli("predict", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["validation"]["points"]
    assert [pt["world_size"] for pt in got] == [4]
    with capsys.disabled():
        print(
            f"\nprediction fitted on 1-2 CPU ranks, at 4: predicted {1e3 * point.predicted_s:.2f}"
            f" ms, measured {1e3 * point.measured_s:.2f} ms, error {error}"
        )
