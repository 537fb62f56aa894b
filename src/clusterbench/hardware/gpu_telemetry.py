"""One sample of a GPU's telemetry: NVML on NVIDIA GPUs, amdsmi on AMD GPUs where installed
(:mod:`clusterbench.hardware.amdsmi_telemetry`).

A reader answers :data:`~clusterbench.schema.TELEMETRY_FIELDS` for one GPU, one call to
``read()`` a sample.  A field the GPU does not support (``NVMLError_NotSupported``) is None
from then on and never asked again; any other failed query leaves that sample's field None.
The thread that calls it is :mod:`clusterbench.runtime.telemetry`'s sampler.

One NVML poll makes 8 calls: the SM and the memory clock, power draw, the enforced power
limit, temperature, the clocks-event reasons, memory in use, and one
``nvmlDeviceGetFieldValues`` for the NVLink data counters and the PCIe byte counters.  Where
the driver lacks the PCIe byte counters it falls back to ``nvmlDeviceGetPcieThroughput``
(2 more calls, each sampling for 20 ms inside the driver; the thread waits, not the benchmark).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from clusterbench.hardware.amdsmi_telemetry import AmdSmiReader, open_amdsmi
from clusterbench.hardware.topology import nvml_query

__all__ = [
    "AUTO",
    "CLOCKS_EVENT_REASONS",
    "LIMITING_REASONS",
    "AmdSmiReader",
    "NvmlReader",
    "open_reader",
    "reason_names",
]

log = logging.getLogger(__name__)

AUTO: Any = object()
"""Default for ``nvml=``/``amdsmi=``: import the bindings and initialise them."""

# nvml.h nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*), bit -> name.
CLOCKS_EVENT_REASONS: dict[int, str] = {
    0x001: "GPU idle",
    0x002: "applications clocks setting",
    0x004: "SW power cap",
    0x008: "HW slowdown",
    0x010: "sync boost",
    0x020: "SW thermal slowdown",
    0x040: "HW thermal slowdown",
    0x080: "HW power brake slowdown",
    0x100: "display clock setting",
}
LIMITING_REASONS: frozenset[str] = frozenset(
    CLOCKS_EVENT_REASONS[bit] for bit in (0x004, 0x008, 0x020, 0x040, 0x080)
)
"""The reasons that hold the clocks down against the work's demand (idle, application clocks,
sync boost and the display clock are settings or the absence of work, not a limit)."""

# nvml.h: nvmlClockType_t, nvmlTemperatureSensors_t, nvmlTemperatureThresholds_t,
# nvmlPcieUtilCounter_t, NVML_ERROR_NOT_SUPPORTED, nvmlValueType_t, field ids.
_CLOCK_SM, _CLOCK_MEM = 1, 2
_TEMPERATURE_GPU = 0
_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
_PCIE_TX, _PCIE_RX = 0, 1
_NOT_SUPPORTED = 3
_INVALID_ARGUMENT = 2  # a field id older drivers do not know
_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
_FI_NVLINK_TX, _FI_NVLINK_RX = 138, 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX: KiB
_FI_PCIE_TX, _FI_PCIE_RX = 197, 198  # NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES: bytes
_COUNTERS = {  # field id -> (column, bytes per counter unit)
    _FI_NVLINK_TX: ("nvlink_tx_mbps", 1024),
    _FI_NVLINK_RX: ("nvlink_rx_mbps", 1024),
    _FI_PCIE_TX: ("pcie_tx_mbps", 1),
    _FI_PCIE_RX: ("pcie_rx_mbps", 1),
}
_REASON_FNS = (  # nvidia-ml-py 12.535+ names it ...EventReasons; older bindings ...Throttle...
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)


def reason_names(mask: int) -> list[str]:
    """The names of the clocks-event reasons set in NVML's bitmask ``mask``."""
    return [name for bit, name in CLOCKS_EVENT_REASONS.items() if mask & bit]


class NvmlReader:
    """Telemetry of one NVIDIA GPU through NVML (``nvml``: pynvml, initialised)."""

    source = "nvml"

    def __init__(self, nvml: Any, handle: Any, *, owns_session: bool = False) -> None:
        self._nvml, self._handle, self._owns = nvml, handle, owns_session
        self._unsupported: set[str] = set()
        self._fields = list(_COUNTERS)
        self._last: dict[int, tuple[float, float]] = {}  # field id -> (us, bytes)
        self.max_sm_clock_mhz = _number(
            nvml_query(nvml, "nvmlDeviceGetMaxClockInfo", handle, _CLOCK_SM)
        )
        self.temp_slowdown_c = _number(
            nvml_query(
                nvml, "nvmlDeviceGetTemperatureThreshold", handle, _TEMPERATURE_THRESHOLD_SLOWDOWN
            )
        )
        self._reasons_fn = next((n for n in _REASON_FNS if hasattr(nvml, n)), _REASON_FNS[0])

    def reason_names(self, mask: int) -> list[str]:
        return reason_names(mask)

    def read(self) -> dict[str, float | None]:
        power = self._ask("power_w", "nvmlDeviceGetPowerUsage")  # mW
        limit = self._ask("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit")  # mW
        memory = self._ask("mem_used_bytes", "nvmlDeviceGetMemoryInfo")
        out: dict[str, float | None] = {
            "sm_clock_mhz": _number(self._ask("sm_clock_mhz", "nvmlDeviceGetClockInfo", _CLOCK_SM)),
            "mem_clock_mhz": _number(
                self._ask("mem_clock_mhz", "nvmlDeviceGetClockInfo", _CLOCK_MEM)
            ),
            "power_w": None if power is None else float(power) / 1e3,
            "power_limit_w": None if limit is None else float(limit) / 1e3,
            "temp_c": _number(self._ask("temp_c", "nvmlDeviceGetTemperature", _TEMPERATURE_GPU)),
            "clocks_event_reasons": _number(self._ask("clocks_event_reasons", self._reasons_fn)),
            "mem_used_bytes": _number(getattr(memory, "used", None)),
        }
        out.update(self._counter_rates())
        if _FI_PCIE_TX not in self._fields:  # no byte counters: the driver's 20 ms sample
            for column, counter in (("pcie_tx_mbps", _PCIE_TX), ("pcie_rx_mbps", _PCIE_RX)):
                kbps = self._ask(column, "nvmlDeviceGetPcieThroughput", counter)  # KB/s
                out[column] = None if kbps is None else float(kbps) * 1e3 / 1e6
        return out

    def close(self) -> None:
        if self._owns:
            nvml_query(self._nvml, "nvmlShutdown")

    def _ask(self, field: str, fn_name: str, *args: Any) -> Any | None:
        """``fn(handle, *args)``, or None: a field NVML does not support is not asked again."""
        if field in self._unsupported:
            return None
        fn = getattr(self._nvml, fn_name, None)
        if fn is None:
            self._unsupported.add(field)
            return None
        try:
            return fn(self._handle, *args)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) == _NOT_SUPPORTED:
                self._unsupported.add(field)
            return None

    def _counter_rates(self) -> dict[str, float | None]:
        """MB/s of each byte counter since the previous poll (None on the first poll, for a
        counter that went back, or one this GPU lacks)."""
        out: dict[str, float | None] = {column: None for column, _ in _COUNTERS.values()}
        if not self._fields:
            return out
        try:
            values = self._nvml.nvmlDeviceGetFieldValues(self._handle, self._fields)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) == _NOT_SUPPORTED:
                self._fields = []
            return out
        now_us = time.monotonic() * 1e6
        for field_id, value in zip(list(self._fields), values, strict=False):
            if value.nvmlReturn in (_NOT_SUPPORTED, _INVALID_ARGUMENT):
                self._fields.remove(field_id)
            if value.nvmlReturn != 0:
                continue
            column, scale = _COUNTERS[field_id]
            count = _field_value(value) * scale
            # NVML's own timestamp of the reading (us), else this poll's clock
            at_us = getattr(value, "timestamp", 0) or now_us
            out[column] = self._rate(field_id, at_us, count, wraps=value.valueType == 1)
        return out

    def _rate(self, field_id: int, at_us: float, count: float, *, wraps: bool) -> float | None:
        """MB/s since the previous reading of the counter (times in us: NVML's integers keep
        their precision in the difference)."""
        previous, self._last[field_id] = self._last.get(field_id), (at_us, count)
        if previous is None or at_us <= previous[0]:
            return None
        delta = count - previous[1]
        if delta < 0 and wraps:  # a 32-bit counter went round once
            delta += 2**32
        return delta / ((at_us - previous[0]) / 1e6) / 1e6 if delta >= 0 else None


def _field_value(value: Any) -> float:
    return float(getattr(value.value, _VALUE_ATTR.get(int(value.valueType), "ullVal")))


def _number(value: Any) -> float | None:
    """A finite number from an answer (None, and amdsmi's "N/A", stay None)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def open_reader(
    index: int,
    *,
    amd: bool,
    pci_bus_id: str | None = None,
    nvml: Any = AUTO,
    amdsmi: Any = AUTO,
) -> NvmlReader | AmdSmiReader | str:
    """A reader of this host's GPU at ``pci_bus_id`` (NVML counts every GPU of the host, not
    only those CUDA_VISIBLE_DEVICES leaves a process), else of index ``index`` (NVML's; amdsmi's
    order on AMD), or one line saying why there is none.  ``nvml``/``amdsmi`` given: used as
    they are (tests)."""
    if amd:
        return open_amdsmi(index, None if amdsmi is AUTO else amdsmi)
    return _open_nvml(index, pci_bus_id, nvml)


def _nvml_handle(nvml: Any, index: int, pci_bus_id: str | None) -> Any:
    """The handle of the GPU at ``pci_bus_id`` (NVML's form: an 8-digit domain), else of
    ``index``; raises NVMLError when neither is found."""
    parts = (pci_bus_id or "").split(":")
    if len(parts) == 3 and hasattr(nvml, "nvmlDeviceGetHandleByPciBusId"):
        try:  # sysfs's 0000:18:00.0 -> NVML's 00000000:18:00.0
            bus_id = f"{int(parts[0], 16):08x}:{parts[1]}:{parts[2]}"
            return nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except (ValueError, nvml.NVMLError) as exc:
            log.debug("no NVML handle for %s: %s; by index %d", pci_bus_id, exc, index)
    return nvml.nvmlDeviceGetHandleByIndex(index)


def _open_nvml(index: int, pci_bus_id: str | None, nvml: Any) -> NvmlReader | str:
    owns = nvml is AUTO
    if owns:
        try:
            import pynvml
        except ImportError:
            return "no NVML: nvidia-ml-py is not installed"
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return f"no NVML: nvmlInit failed: {exc}"
        nvml = pynvml
    try:
        handle = _nvml_handle(nvml, index, pci_bus_id)
    except nvml.NVMLError as exc:
        if owns:
            nvml_query(nvml, "nvmlShutdown")
        return f"no NVML handle for GPU {index}: {exc}"
    return NvmlReader(nvml, handle, owns_session=owns)
