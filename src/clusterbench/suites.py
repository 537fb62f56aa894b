"""What every benchmark's settings presets share: the suite and device type they are asked for."""

from __future__ import annotations

import typing
from typing import Literal

__all__ = ["DEVICE_TYPES", "SUITE_NAMES", "DeviceType", "SuiteName", "check_suite"]

SuiteName = Literal["quick", "standard", "full"]
"""quick: Level 1 and a short collective sweep; standard: every level at moderate sizes; full:
long sweeps at the largest sizes."""
DeviceType = Literal["cuda", "cpu"]
SUITE_NAMES: tuple[str, ...] = typing.get_args(SuiteName)
DEVICE_TYPES: tuple[str, ...] = typing.get_args(DeviceType)


def check_suite(suite: str, device_type: str) -> None:
    """A preset is asked for by suite (quick, standard, full) and device type (cuda, cpu)."""
    if suite not in SUITE_NAMES:
        raise ValueError(f"unknown suite {suite!r} (choose from {', '.join(SUITE_NAMES)})")
    if device_type not in DEVICE_TYPES:
        raise ValueError(
            f"unknown device type {device_type!r} (choose from {', '.join(DEVICE_TYPES)})"
        )
