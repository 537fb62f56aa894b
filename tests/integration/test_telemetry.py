"""Both telemetry flags at once are refused by the CLI in one line."""

from __future__ import annotations

from tests.helpers import cli


def test_both_telemetry_flags_are_refused() -> None:
    proc = cli("run", "--no-telemetry", "--telemetry-interval", "0.5", "--device", "cpu")
    assert proc.returncode == 2
    assert "--telemetry-interval and --no-telemetry together" in proc.stderr
