"""Units shared by analysis (messages) and report (tables)."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(size_bytes: float) -> str:
    """Binary units as nccl-tests and the size sweeps use them: 8 B, 128 KiB, 8 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:g} {unit}"
    return f"{size_bytes:g} B"
