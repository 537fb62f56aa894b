"""The vote of the silent-data-corruption check: which result of a group of devices is the
reference, and which devices and repeats differ from it.

Pure (no torch, no I/O): the ``sdc`` benchmark uses it to decide which result to send to the
devices that differ (so that they can count the differing elements), and analysis and the
report use it to judge the hashes results.json recorded, so both always agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["HASH_CHARS", "Vote", "differing_repeats", "modal", "vote"]

HASH_CHARS = 16
"""Hex digits of a result's sha256 kept in results.json: 64 bits, so two different results
share a kept prefix with probability 2^-64."""


def modal(hashes: Sequence[str]) -> str:
    """The most common of one device's repeat hashes; a tie goes to the one seen first
    (``Counter.most_common`` orders equal counts by first appearance)."""
    if not hashes:
        raise ValueError("a device with no repeat hashes")
    return Counter(hashes).most_common(1)[0][0]


def differing_repeats(hashes: Sequence[str], against: str) -> list[int]:
    """Indices of the repeats whose hash is not ``against``."""
    return [i for i, h in enumerate(hashes) if h != against]


@dataclass(frozen=True, slots=True)
class Vote:
    """The verdict on one case (dtype, shape) over one group of like devices."""

    reference: str | None
    """The result most devices agree on: held by two devices at least and by more than any
    other result (a lone device is its own reference).  None: no majority, e.g. two devices
    that disagree, where one of them is wrong but which one cannot be told."""
    against: str
    """What each device is compared with: the reference, or, where there is none, the lowest
    rank's result (so the differing elements can still be counted)."""
    pivot: int
    """The lowest rank holding ``against``: the one that sends it to those that differ."""
    odd: tuple[int, ...]
    """Ranks whose result (their most common over the repeats) is not the reference; where
    there is no majority, every rank of the group (each may be the wrong one)."""
    num_devices: int

    @property
    def decided(self) -> bool:
        return self.reference is not None


def vote(repeat_hashes: Mapping[int, Sequence[str]]) -> Vote:
    """Rank -> its repeat hashes, for one case over one group: the majority's result is the
    reference (a result two independent faults would have to produce bit for bit alike)."""
    if not repeat_hashes:
        raise ValueError("a vote over no devices")
    modals = {rank: modal(hashes) for rank, hashes in sorted(repeat_hashes.items())}
    ranked = Counter(modals.values()).most_common()
    top, count = ranked[0]
    alone = len(modals) == 1
    if alone or (count >= 2 and (len(ranked) == 1 or ranked[1][1] < count)):
        pivot = min(rank for rank, h in modals.items() if h == top)
        odd = tuple(rank for rank, h in modals.items() if h != top)
        return Vote(reference=top, against=top, pivot=pivot, odd=odd, num_devices=len(modals))
    pivot = min(modals)
    return Vote(
        reference=None,
        against=modals[pivot],
        pivot=pivot,
        odd=tuple(modals),
        num_devices=len(modals),
    )
