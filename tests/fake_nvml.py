"""A stand-in for the nvidia-ml-py calls the telemetry reader makes: each query answers the
next value of a series the test chose (cycling), so the test knows every sample's values;
``unsupported`` names queries that raise NVMLError_NotSupported; ``calls`` counts them all."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

NOT_SUPPORTED = 3  # nvml.h NVML_ERROR_NOT_SUPPORTED
UNKNOWN = 999


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__("Not Supported" if value == NOT_SUPPORTED else f"error {value}")
        self.value = value


# field ids the reader asks (nvml.h)
NVLINK_TX, NVLINK_RX, PCIE_TX, PCIE_RX = 138, 139, 197, 198


class FakeNvml:
    NVMLError = NVMLError

    def __init__(
        self,
        *,
        series: dict[str, list[Any]],
        unsupported: frozenset[str] = frozenset(),
        max_sm_clock_mhz: int = 1980,
        slowdown_c: int = 90,
    ) -> None:
        self.series = series
        """query -> values in turn: sm, mem (MHz), power_mw, limit_mw, temp, reasons, used,
        pcie_tx, pcie_rx (bytes, counters), nvlink_tx, nvlink_rx (KiB), field_t_us,
        pcie_kbps_tx, pcie_kbps_rx."""
        self.unsupported = unsupported
        self.max_sm_clock_mhz, self.slowdown_c = max_sm_clock_mhz, slowdown_c
        self.calls: Counter[str] = Counter()
        self.at: Counter[str] = Counter()

    def _next(self, name: str, *, call: bool = True) -> Any:
        """The next value of ``name``; ``call``: counted as one NVML call of its own."""
        if call:
            self.calls[name] += 1
        if name in self.unsupported:
            raise NVMLError(NOT_SUPPORTED)
        values = self.series[name]
        value = values[self.at[name] % len(values)]
        self.at[name] += 1
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def nvmlDeviceGetMaxClockInfo(self, h: Any, clock: int) -> int:
        return self.max_sm_clock_mhz

    def nvmlDeviceGetTemperatureThreshold(self, h: Any, threshold: int) -> int:
        return self.slowdown_c

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        return int(self._next("sm" if clock == 1 else "mem"))

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return int(self._next("power_mw"))

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return int(self._next("limit_mw"))

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return int(self._next("temp"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return int(self._next("reasons"))

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> SimpleNamespace:
        return SimpleNamespace(used=self._next("used"), total=141 * 10**9)

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:
        return int(self._next("pcie_kbps_tx" if counter == 0 else "pcie_kbps_rx"))

    def nvmlDeviceGetFieldValues(self, h: Any, field_ids: list[int]) -> list[SimpleNamespace]:
        self.calls["nvmlDeviceGetFieldValues"] += 1
        at_us = self._next("field_t_us", call=False)
        names = {NVLINK_TX: "nvlink_tx", NVLINK_RX: "nvlink_rx", PCIE_TX: "pcie_tx",
                 PCIE_RX: "pcie_rx"}  # fmt: skip
        out = []
        for field_id in field_ids:
            name = names[field_id]
            if name in self.unsupported:
                out.append(SimpleNamespace(nvmlReturn=NOT_SUPPORTED, valueType=3, timestamp=0,
                                           value=SimpleNamespace(ullVal=0)))  # fmt: skip
                continue
            count = self._next(name, call=False)
            out.append(SimpleNamespace(nvmlReturn=0, valueType=3, timestamp=at_us,
                                       value=SimpleNamespace(ullVal=count)))  # fmt: skip
        return out
