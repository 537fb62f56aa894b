"""Telemetry sampling against a stand-in NVML: the reader's fields, the sampler's series, CSV
and window summaries, the worker's windows, the findings and the report's figure."""

from __future__ import annotations

from typing import Any

from tests.helpers import cli

SW_POWER_CAP, HW_THERMAL, IDLE = 0x04, 0x40, 0x01
T0_US = 1_700_000_000_000_000  # unix us
SERIES: dict[str, list[Any]] = {
    "sm": [1980, 1755, 1590, 1605, 1590, 1620, 1590, 1575, 1590, 1600, 1590],
    "mem": [2619],
    "power_mw": [120_000, 690_500, 700_200, 699_100, 701_000, 698_700, 700_000, 699_500],
    "limit_mw": [700_000],
    "temp": [41, 55, 60, 64, 66, 67, 68, 69, 70, 71],
    "reasons": [IDLE, 0, SW_POWER_CAP, SW_POWER_CAP, SW_POWER_CAP | IDLE, 0, SW_POWER_CAP],
    "used": [10**9 + i * 10**8 for i in range(9)],
    "field_t_us": [T0_US + i * 100_000 for i in range(1000)],  # NVML's timestamps, 0.1 s apart
    "pcie_tx": [i * 500_000_000 for i in range(1000)],  # 5e8 B per 0.1 s: 5,000 MB/s
    "pcie_rx": [i * 20_000_000 for i in range(1000)],  # 200 MB/s
    "nvlink_tx": [i * 1_000_000 for i in range(1000)],  # KiB
    "nvlink_rx": [0],
    "pcie_kbps_tx": [123_000],
    "pcie_kbps_rx": [45_000],
}


def test_both_telemetry_flags_are_refused() -> None:
    proc = cli("run", "--no-telemetry", "--telemetry-interval", "0.5", "--device", "cpu")
    assert proc.returncode == 2
    assert "--telemetry-interval and --no-telemetry together" in proc.stderr
