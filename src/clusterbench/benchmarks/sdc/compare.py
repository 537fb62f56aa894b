"""The ``sdc`` records of a run, grouped for judging: each case over each group of like
devices with its vote (:func:`clusterbench.benchmarks.sdc.vote.vote` over the repeat hashes
results.json recorded, the same the benchmark used), and the differences the devices counted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from clusterbench.benchmarks.sdc import SdcMetrics
from clusterbench.benchmarks.sdc.vote import Vote, vote
from clusterbench.schema import Measurement, Results

__all__ = ["Comparison", "case_key", "case_label", "comparisons", "diffs"]

_CASE_KEYS = ("dtype", "m", "n", "k", "depth", "repeats")


@dataclass(frozen=True, slots=True)
class Comparison:
    """One case over one group of like devices: the vote and each device's record."""

    group: str
    case: str
    vote: Vote
    devices: dict[int, Measurement]
    """Rank -> its ``sdc.mismatches`` measurement (params: hash, repeat_hashes ...)."""

    def hashes(self, rank: int) -> list[str]:
        return str(self.devices[rank].params.get("repeat_hashes", "")).split(",")


def case_label(m: Measurement) -> str:
    """``bf16 4096x4096x4096`` of a measurement's case params."""
    p = m.params
    return f"{p.get('dtype')} {p.get('m')}x{p.get('n')}x{p.get('k')}"


def case_key(m: Measurement) -> tuple[object, ...]:
    return tuple(m.params.get(k) for k in _CASE_KEYS)


def comparisons(measurements: list[Measurement] | Results) -> list[Comparison]:
    """Every (group, case) of the run, in the order recorded, with its vote."""
    by: dict[tuple[str, tuple[object, ...]], dict[int, Measurement]] = defaultdict(dict)
    for m in SdcMetrics.mismatches.select(measurements):
        by[(str(m.params.get("group")), case_key(m))][m.rank] = m
    out = []
    for (group, _), devices in by.items():
        hashes = {r: str(m.params.get("repeat_hashes", "")).split(",") for r, m in devices.items()}
        first = next(iter(devices.values()))
        out.append(Comparison(group=group, case=case_label(first), vote=vote(hashes),
                              devices=dict(sorted(devices.items()))))  # fmt: skip
    return out


def diffs(results: Results) -> dict[tuple[int, tuple[object, ...], str], tuple[float, float]]:
    """(rank, case, against) -> (differing elements, largest |difference|)."""
    counts = {(m.rank, case_key(m), str(m.params.get("against"))): m.value
              for m in SdcMetrics.diff_elements.select(results)}  # fmt: skip
    gaps = {(m.rank, case_key(m), str(m.params.get("against"))): m.value
            for m in SdcMetrics.max_abs_diff.select(results)}  # fmt: skip
    return {key: (count, gaps.get(key, float("nan"))) for key, count in counts.items()}
