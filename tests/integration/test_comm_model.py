"""The alpha-beta fit of a real all_reduce sweep between gloo processes (the model's formulas and
synthetic fits are in tests/unit/test_comm_model.py)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.analyses.prediction.comm_model import (
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
        # rel_sigma is the residuals' own spread: sum((1 - model/t)^2) = dof x rel_sigma^2
        rel = [r / t for r, t in zip(fit.residuals_s, fit.times_s, strict=True)]
        assert sum(r * r for r in rel) == pytest.approx(fit.dof * fit.rel_sigma**2, rel=1e-9)
        # the fit's 99% prediction interval holds a good share of the points it was fit to:
        # in CI runs 8 to 11 of the 11, and 5 beside two other busy processes (this test's
        # last failure, when it asked for most).  A CPU sweep's spread is wide (rel_sigma
        # 0.1-0.6), so this catches only a grossly wrong interval, one that leaves nearly
        # every point outside; the fit's arithmetic is checked exactly above and in
        # tests/unit/test_comm_model.py.
        inside = [
            lo <= t <= hi
            for n, t in zip(fit.sizes_bytes, fit.times_s, strict=True)
            for lo, hi in [fit.prediction_interval_s(n, confidence=0.99)]
        ]
        assert sum(inside) > len(inside) / 3, (op, fit)
