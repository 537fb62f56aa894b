"""NVLink and PCIe error counters through NVML: what they hold, and how much they grew.

Per active NVLink (``nvmlDeviceGetNvLinkState``) the four data-link counters of
``nvmlDeviceGetNvLinkErrorCounter`` (replays, recoveries, CRC flit and CRC data errors), and
per GPU the PCIe replay counter (``nvmlDeviceGetPcieReplayCounter``).  They count from the
driver's load (the NVLink ones also from a GPU reset), so doctor can only say they are not zero,
and warn when even their average since boot is above the limits a run applies; a run reads them
at its start and end and judges the growth.  A counter NVML does not support is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterbench.doctor._sources import Check, Sources
from clusterbench.doctor.gpu_health import gpu_handles
from clusterbench.hardware.topology import active_nvlinks, nvml_query
from clusterbench.schema import Finding, Severity
from clusterbench.thresholds import Thresholds

__all__ = [
    "CHECKS",
    "COUNTERS",
    "MIN_WINDOW_S",
    "ErrorCounts",
    "Growth",
    "check_link_errors",
    "growth",
    "growth_finding",
    "read_counts",
]

# nvml.h nvmlNvLinkErrorCounter_t: NVML_NVLINK_ERROR_DL_REPLAY = 0, _DL_RECOVERY = 1,
# _DL_CRC_FLIT = 2, _DL_CRC_DATA = 3.
COUNTERS: dict[str, int] = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
PCIE_REPLAY = "pcie_replay"
MIN_WINDOW_S = 60.0
"""Growth rates are taken over the run's duration, or over a minute if it was shorter."""
_CRC = ("crc_flit", "crc_data")


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """One GPU's error counters at one moment."""

    gpu: int
    nvlink: dict[tuple[int, str], int] = field(default_factory=dict)
    """(link, counter name) -> count, for the counters NVML answered."""
    pcie_replay: int | None = None


@dataclass(frozen=True, slots=True)
class Growth:
    """How much one counter grew between two reads."""

    gpu: int
    counter: str
    """A name of :data:`COUNTERS`, or ``pcie_replay``."""
    link: int | None
    """The NVLink; None for the PCIe counter."""
    delta: int


def read_counts(nvml: Any, gpu: int, handle: Any) -> ErrorCounts:
    """The counters of one GPU now; those NVML refuses (NotSupported) are left out."""
    counts: dict[tuple[int, str], int] = {}
    for link in active_nvlinks(nvml, handle) or ():
        for name, counter in COUNTERS.items():
            value = nvml_query(nvml, "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
            if value is not None:
                counts[(link, name)] = int(value)
    pcie = nvml_query(nvml, "nvmlDeviceGetPcieReplayCounter", handle)
    return ErrorCounts(gpu=gpu, nvlink=counts, pcie_replay=None if pcie is None else int(pcie))


def growth(before: ErrorCounts, after: ErrorCounts) -> list[Growth]:
    """The counters that grew; one that went down was reset (a GPU reset) and counts from 0."""

    def grew(old: int, new: int) -> int:
        return new - old if new >= old else new

    out = [
        Growth(gpu=after.gpu, counter=name, link=link, delta=grew(before.nvlink[(link, name)], n))
        for (link, name), n in sorted(after.nvlink.items())
        if (link, name) in before.nvlink
    ]
    if before.pcie_replay is not None and after.pcie_replay is not None:
        out.append(Growth(gpu=after.gpu, counter=PCIE_REPLAY, link=None,
                          delta=grew(before.pcie_replay, after.pcie_replay)))  # fmt: skip
    return [g for g in out if g.delta > 0]


def _over_limit(g: Growth, *, seconds: float, thresholds: Thresholds) -> bool:
    """DCGM's health watch: CRC errors matter from 100/s, any replay or recovery fails, PCIe
    replays from 8/min (thresholds.py gives the sources).  Rates are over at least a minute:
    a few errors in a run of seconds are not a rate."""
    window_s = max(seconds, MIN_WINDOW_S)
    if g.counter == PCIE_REPLAY:
        return g.delta / (window_s / 60) >= thresholds.pcie_replay_fail_per_min
    if g.counter in _CRC:
        return g.delta / window_s >= thresholds.nvlink_crc_fail_per_s
    return g.delta >= thresholds.nvlink_recovery_fail_count


def _describe(g: Growth, seconds: float) -> str:
    window_s = max(seconds, MIN_WINDOW_S)
    if g.link is None:
        return f"PCIe replays +{g.delta} ({g.delta / (window_s / 60):.3g}/min)"
    return f"NVLink {g.link} {g.counter} +{g.delta} ({g.delta / window_s:.3g}/s)"


def _fix(gpu: int, grown: Sequence[Growth], *, when: str = "while they keep growing") -> str:
    links = sorted({g.link for g in grown if g.link is not None})
    parts = []
    if links:
        parts.append(
            f"nvidia-smi nvlink -e -i {gpu} shows the counters per link; reseat or replace the "
            f"NVLink bridge or cable of link(s) {', '.join(map(str, links))} (on an HGX "
            "baseboard, the board: call the vendor)"
        )
    if any(g.link is None for g in grown):
        parts.append(
            f"nvidia-smi -q -d PCIE -i {gpu}; reseat the GPU, check the riser, slot and "
            "retimer, or try another slot"
        )
    return "; ".join(parts) + f"; drain the node {when}; RMA if they persist"


def growth_finding(
    grown: list[Growth], *, seconds: float, thresholds: Thresholds, scope: str
) -> Finding | None:
    """``health.gpu.link_errors_grew`` for one GPU's counters that grew during a run: warn,
    fail when one is over its limit; None when none grew."""
    if not grown:
        return None
    gpu = grown[0].gpu
    over = [g for g in grown if _over_limit(g, seconds=seconds, thresholds=thresholds)]
    severity: Severity = "fail" if over else "warn"
    return Finding(
        id="health.gpu.link_errors_grew",
        severity=severity,
        scope=scope,
        message=f"GPU {gpu}: link error counters grew during the run ({seconds:.0f} s): "
        + ", ".join(_describe(g, seconds) for g in grown),
        evidence={
            "seconds": round(seconds, 3),
            "grown": [{"link": g.link, "counter": g.counter, "delta": g.delta} for g in grown],
            "over_limit": [{"link": g.link, "counter": g.counter} for g in over],
        },
        fix=_fix(gpu, grown),
    )


# ---------------------------------------------------------------------------- doctor


def _uptime_s(src: Sources) -> float | None:
    try:
        return float((src.root / "proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def check_link_errors(src: Sources, thresholds: Thresholds | None = None) -> list[Finding]:
    """Non-zero NVLink and PCIe error counters: info with the counts; warn when even their
    average since boot is at a run's fail limit (they count from the driver's load, at most
    since boot, so the average is a lower bound of the rate while they grew)."""
    limits = thresholds or Thresholds()
    uptime = _uptime_s(src)
    findings = []
    for index, handle in gpu_handles(src):
        now = read_counts(src.nvml, index, handle)
        totals = [Growth(gpu=index, counter=name, link=link, delta=n)
                  for (link, name), n in sorted(now.nvlink.items()) if n > 0]  # fmt: skip
        if now.pcie_replay:
            totals.append(Growth(gpu=index, counter=PCIE_REPLAY, link=None, delta=now.pcie_replay))
        if not totals:
            continue
        high = uptime is not None and any(
            _over_limit(g, seconds=uptime, thresholds=limits)
            for g in totals
            if g.counter in (*_CRC, PCIE_REPLAY)
        )
        findings.append(
            Finding(
                id="doctor.gpu.link_errors",
                severity="warn" if high else "info",
                scope=src.gpu_scope(index),
                message=f"GPU {index}: error counters since the driver loaded: "
                + ", ".join(
                    f"PCIe replays {g.delta}"
                    if g.link is None
                    else f"NVLink {g.link} {g.counter} {g.delta}"
                    for g in totals
                )
                + (" (on average above a run's limit)" if high else ""),
                evidence={
                    "uptime_s": uptime,
                    "counts": [
                        {"link": g.link, "counter": g.counter, "count": g.delta} for g in totals
                    ],
                },
                fix=_fix(
                    index,
                    totals,
                    when="if they grow during a run (clusterbench run "
                    "reads them at its start and end)",
                ),
            )
        )
    return findings


CHECKS: tuple[Check, ...] = (check_link_errors,)
