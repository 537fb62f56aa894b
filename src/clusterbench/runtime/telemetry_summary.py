"""The summary of a GPU's telemetry over one window: medians, extremes and each clocks-event
reason's share of the samples.  Pure: samples in, :class:`TelemetrySummary` out."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from clusterbench.schema import TelemetrySummary

__all__ = ["Sample", "summarize"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One poll of a GPU: when (unix s), in which benchmark ("" between benchmarks), and the
    values of :data:`~clusterbench.schema.TELEMETRY_FIELDS` (None: not reported)."""

    t: float
    benchmark: str
    values: Mapping[str, float | None]


def summarize(
    samples: Sequence[Sample],
    *,
    window_s: float,
    reason_names: Callable[[int], list[str]],
    sm_clock_max_mhz: float | None = None,
    temp_slowdown_c: float | None = None,
) -> TelemetrySummary | None:
    """The summary of ``samples`` (those of one window, ``window_s`` long); None for none.

    ``reasons``: each clocks-event reason named by ``reason_names`` (the reader's bit names)
    -> the fraction of the samples that reported the reasons with it set."""
    if not samples:
        return None

    def column(name: str) -> list[float]:
        return [v for s in samples if (v := s.values.get(name)) is not None]

    def median(name: str) -> float | None:
        values = column(name)
        return round(statistics.median(values), 2) if values else None

    def extreme(name: str, pick: Callable[[list[float]], float]) -> float | None:
        values = column(name)
        return round(pick(values), 2) if values else None

    masks = [int(m) for m in column("clocks_event_reasons")]
    seen = Counter(name for mask in masks for name in reason_names(mask))
    used = extreme("mem_used_bytes", max)
    return TelemetrySummary(
        samples=len(samples),
        window_s=round(window_s, 3),
        sm_clock_mhz_median=median("sm_clock_mhz"),
        sm_clock_mhz_min=extreme("sm_clock_mhz", min),
        sm_clock_max_mhz=sm_clock_max_mhz,
        mem_clock_mhz_median=median("mem_clock_mhz"),
        power_w_median=median("power_w"),
        power_w_max=extreme("power_w", max),
        power_limit_w=median("power_limit_w"),
        temp_c_max=extreme("temp_c", max),
        temp_slowdown_c=temp_slowdown_c,
        reasons={name: round(n / len(masks), 4) for name, n in seen.most_common()},
        pcie_tx_mbps_median=median("pcie_tx_mbps"),
        pcie_rx_mbps_median=median("pcie_rx_mbps"),
        nvlink_tx_mbps_median=median("nvlink_tx_mbps"),
        nvlink_rx_mbps_median=median("nvlink_rx_mbps"),
        mem_used_max_bytes=None if used is None else int(used),
    )
