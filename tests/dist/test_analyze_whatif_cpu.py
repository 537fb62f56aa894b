"""The what-ifs held to a measurement (``scripts/whatif_check.py``): a real DDP job of two gloo
ranks profiled over 12 steps with a delay of 300 ms planted in every second one: rank 1 sleeping
at the step's start (a straggler), or every rank's DataLoader sleeping (an input pipeline too
slow).  ``clusterbench analyze`` predicts from the trace what removing the delay saves; the
job's own steps without the delay measure it."""

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


# they judge step times: CI runs them alone (the timing tier), never beside another test
@pytest.mark.timing
def test_the_straggler_what_if_is_within_15_percent_of_the_measured_saving(tmp_path: Path) -> None:
    result = _check("straggler", tmp_path)
    assert result["straggler"] == 1
    assert abs(result["error_pct"]) <= 15.0, result


@pytest.mark.timing
def test_the_input_wait_what_if_is_within_15_percent_of_the_measured_saving(
    tmp_path: Path,
) -> None:
    result = _check("input", tmp_path)
    assert abs(result["error_pct"]) <= 15.0, result
