"""The alpha-beta fit of a real all_reduce sweep between gloo processes (the model's formulas and
synthetic fits are in tests/unit/test_comm_model.py)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.analysis.comm_model import (
    collectives_fit,
)
from clusterbench.schema import load_results

pytestmark = pytest.mark.timing


@pytest.mark.dist
def test_fit_of_a_real_cpu_sweep(tmp_path: Path) -> None:
    out = tmp_path / "run"
    settings = [
        "ops=all_gather,all_reduce", "groups=world", "modes=back_to_back", "min_bytes=4096",
        "max_bytes=4194304", "factor=2", "warmup=5", "iters=50",
    ]  # fmt: skip
    argv = [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--nproc", "2",
            "--only", "collectives", "--no-history", "--out", str(out)]  # fmt: skip
    for s in settings:
        argv += ["--set", f"collectives.{s}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = load_results(out / "results.json")
    for op in ("all_gather", "all_reduce"):
        fit = collectives_fit(results, op=op, group="world")
        assert fit.p == 2 and fit.dof == len(fit.sizes_bytes) - 2 == 9
        assert math.isfinite(fit.alpha_s) and fit.alpha_s > 0
        assert math.isfinite(fit.beta_s_per_byte) and fit.beta_s_per_byte > 0
        assert math.isfinite(fit.rel_sigma)
        # the model reproduces the measured times within its own residual error: nearly every
        # point lies inside the fit's 99% prediction interval
        inside = [
            lo <= t <= hi
            for n, t in zip(fit.sizes_bytes, fit.times_s, strict=True)
            for lo, hi in [fit.prediction_interval_s(n, confidence=0.99)]
        ]
        assert sum(inside) >= len(inside) - 2, (op, fit)
