"""Units shared by analysis (messages) and report (tables)."""

from __future__ import annotations

__all__ = ["format_bytes", "format_seconds"]

_BINARY_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_bytes(size_bytes: float) -> str:
    """Binary units as nccl-tests and the size sweeps use them, at most 3 significant digits
    unless the size is a whole number of its unit: 8 B, 128 KiB, 8 GiB, 1.88 MiB, 641 KiB."""
    for unit, scale in _BINARY_UNITS:
        # a size just short of a unit (1023.9 KiB) is shown in that unit (1 MiB), not as 4 digits
        if size_bytes >= scale or (scale > 1 << 10 and _rounds_up_to(size_bytes, scale)):
            return f"{_three_digits(size_bytes / scale)} {unit}"
    return f"{_three_digits(size_bytes)} B"


def _rounds_up_to(size_bytes: float, scale: int) -> bool:
    below = size_bytes / (scale >> 10)  # in the unit below
    return below != int(below) and below >= 999.5


def _three_digits(value: float) -> str:
    if value == int(value) and value < 1 << 10:  # whole: exact, as the sweeps' sizes are
        return str(int(value))
    text = f"{value:.3g}"
    return text if "e" not in text else f"{value:.0f}"


def format_seconds(seconds: float) -> str:
    """A duration the way a person reads it: 0.42 s, 12.3 s, 470 s, 18 min, 1.5 h."""
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 99.95:
        return f"{seconds:.1f} s"
    if seconds < 999.5:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
