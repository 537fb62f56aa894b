"""The what-ifs held to a measurement (``scripts/whatif_check.py``): a real DDP job of two gloo
ranks profiled over 12 steps with a delay of 300 ms planted in every second one: rank 1 sleeping
at the step's start (a straggler), or every rank's DataLoader sleeping (an input pipeline too
slow).  ``clusterbench analyze`` predicts from the trace what removing the delay saves; the
job's own steps without the delay measure it.

The measured saving strays with the machine: the difference of two medians of 6 steps, on 2
cores that the job shares with whatever else runs.  The what-if must fall within 15% of it, or
within three of its own standard errors (``measured_noise_ms``, from the same steps) where
those are wider, and never beyond 50%: a what-if that missed the planted delay is off by about
100%.  Measured on the 2-core CI machine: quiet, the straggler's error 0.6-4.4%, the input
wait's -14% to +6% (its noise 40-340 ms of about 2,100); with two busy processes beside it,
-3% to 6% and -16% to -17% (noise 110-540 ms)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DELAY_MS, ACTIVE = 300.0, 12


def _check(case: str, tmp_path: Path) -> dict[str, float]:
    script = str(ROOT / "scripts" / "whatif_check.py")
    cmd = [sys.executable, script, "--case", case, "--delay-ms", str(DELAY_MS),
           "--active", str(ACTIVE), "--keep", str(tmp_path)]  # fmt: skip
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    # the delay shows (a sleep takes at least what it asks) in each of the delayed steps
    assert result["delayed_steps"] == ACTIVE // 2
    assert result["measured_ms"] > 0.8 * DELAY_MS * ACTIVE // 2
    return result


def _tolerance_pct(result: dict[str, float]) -> float:
    """15%, or three standard errors of the measured saving where wider; at most 50%."""
    return min(50.0, max(15.0, 300.0 * result["measured_noise_ms"] / result["measured_ms"]))


# they judge step times: CI runs them alone (the timing tier), never beside another test
@pytest.mark.timing
def test_the_straggler_what_if_is_within_15_percent_or_the_noise_of_the_measured_saving(
    tmp_path: Path,
) -> None:
    result = _check("straggler", tmp_path)
    assert result["straggler"] == 1
    assert abs(result["error_pct"]) <= _tolerance_pct(result), result


@pytest.mark.timing
def test_the_input_wait_what_if_is_within_15_percent_or_the_noise_of_the_measured_saving(
    tmp_path: Path,
) -> None:
    result = _check("input", tmp_path)
    assert abs(result["error_pct"]) <= _tolerance_pct(result), result
