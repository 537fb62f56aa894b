"""Units shared by analysis (messages) and report (tables)."""

from __future__ import annotations

import math
import re

__all__ = ["format_bytes", "format_seconds", "parse_duration"]

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


_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:h|min|m|s))+|\d+(?:\.\d+)?")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|min|m|s)?")
_DURATION_UNIT_S = {"h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """Seconds in a duration as people write it: ``90s``, ``30m`` (or ``30min``), ``2h``,
    ``1h30m``, ``1.5h``, or a bare number of seconds (``600``).  ValueError (one line) for
    anything else, or for a duration of 0."""
    spec = text.strip().lower()
    if not _DURATION.fullmatch(spec):
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 2h, 1h30m)")
    parts = _DURATION_PART.findall(spec)  # a bare number: seconds
    total = sum(float(value) * _DURATION_UNIT_S[unit or "s"] for value, unit in parts)
    if not math.isfinite(total) or total <= 0:
        raise ValueError(f"{text!r}: a duration must be more than 0 s")
    return total
