"""The sdc section: per case, each device's result hash, whether its repeats agree and whether
it matches its group's reference (the vote of :mod:`clusterbench.benchmarks.sdc.compare`)."""

from __future__ import annotations

from clusterbench.benchmarks.sdc import SdcMetrics
from clusterbench.benchmarks.sdc.compare import Comparison, comparisons
from clusterbench.benchmarks.sdc.vote import differing_repeats, modal
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, metric_rows, where

__all__ = ["section"]

_HEADER = ("device", "rank", "hash", "repeats", "vs reference")
_SHORT = 8
"""Hex digits of a hash shown in the table (results.json keeps 16)."""


def _label(m: Measurement) -> str | None:
    return "time of the check" if SdcMetrics.seconds.matches(m) else None


def _vs_reference(c: Comparison, rank: int) -> str:
    hashes = c.hashes(rank)
    if c.vote.num_devices == 1:
        return "alone"
    if not c.vote.decided:
        return "no majority"
    odd = differing_repeats(hashes, c.vote.against)
    if not odd:
        return "match"
    return f"DIFFERS ({len(odd)} of {len(hashes)})"


def _repeats(hashes: list[str]) -> str:
    odd = differing_repeats(hashes, modal(hashes))
    return f"{len(hashes)} identical" if not odd else f"{len(odd)} of {len(hashes)} DIFFER"


def _grid(c: Comparison, multi_host: bool) -> Grid:
    first = next(iter(c.devices.values()))
    reference = c.vote.reference[:_SHORT] if c.vote.reference else "none (no majority)"
    title = (
        f"sdc: {c.case}, a chain of {first.params.get('depth')} GEMMs · {c.group} · "
        f"reference {reference}"
    )
    rows: list[tuple[str, ...]] = [
        (where(m, multi_host), str(rank), modal(c.hashes(rank))[:_SHORT],
         _repeats(c.hashes(rank)), _vs_reference(c, rank))
        for rank, m in c.devices.items()
    ]  # fmt: skip
    return Grid(title=title, header=_HEADER, rows=rows)


def section(ms: list[Measurement], multi_host: bool) -> Section:
    return Section(
        "sdc",
        rows=metric_rows(ms, label=_label, multi_host=multi_host),
        grids=[_grid(c, multi_host) for c in comparisons(ms)],
    )
