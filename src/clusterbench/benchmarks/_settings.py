"""Checks every benchmark's settings presets share."""

from __future__ import annotations

SUITE_NAMES = ("quick", "standard", "full")
DEVICE_TYPES = ("cuda", "cpu")


def check_suite(suite: str, device_type: str) -> None:
    """A preset is asked for by suite (quick, standard, full) and device type (cuda, cpu)."""
    if suite not in SUITE_NAMES:
        raise ValueError(f"unknown suite {suite!r} (choose from {', '.join(SUITE_NAMES)})")
    if device_type not in DEVICE_TYPES:
        raise ValueError(
            f"unknown device type {device_type!r} (choose from {', '.join(DEVICE_TYPES)})"
        )
