"""One sample of an AMD GPU's telemetry through amdsmi, where it is installed (best effort):
the fields of :data:`~clusterbench.schema.TELEMETRY_FIELDS` AMD has, as
:mod:`clusterbench.hardware.gpu_telemetry` reads them from NVML on NVIDIA GPUs."""

from __future__ import annotations

import importlib
import logging
from typing import Any

__all__ = ["AmdSmiReader", "open_amdsmi"]

log = logging.getLogger(__name__)

_NOT_SUPPORTED = 2  # amdsmi_status_t AMDSMI_STATUS_NOT_SUPPORTED


def _number(value: Any) -> float | None:
    """A number from an answer (None, and amdsmi's "N/A", stay None)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class AmdSmiReader:
    """Telemetry of one AMD GPU through amdsmi, best effort: clocks, power and its cap,
    hotspot temperature and memory in use; no clocks-event reasons (AMD's throttle bits are
    specific to each ASIC), PCIe or xGMI counters."""

    source = "amdsmi"
    temp_slowdown_c: float | None = None

    def __init__(self, amdsmi: Any, handle: Any, *, owns_session: bool = False) -> None:
        self._smi, self._handle, self._owns = amdsmi, handle, owns_session
        self._unsupported: set[str] = set()
        gfx = self._ask("max_clock", "amdsmi_get_clock_info", amdsmi.AmdSmiClkType.GFX)
        self.max_sm_clock_mhz = _number((gfx or {}).get("max_clk"))

    def reason_names(self, mask: int) -> list[str]:
        return []

    def read(self) -> dict[str, float | None]:
        smi = self._smi
        gfx = self._ask("sm_clock_mhz", "amdsmi_get_clock_info", smi.AmdSmiClkType.GFX) or {}
        mem = self._ask("mem_clock_mhz", "amdsmi_get_clock_info", smi.AmdSmiClkType.MEM) or {}
        power = self._ask("power_w", "amdsmi_get_power_info") or {}
        cap = self._ask("power_limit_w", "amdsmi_get_power_cap_info") or {}  # uW
        vram = self._ask("mem_used_bytes", "amdsmi_get_gpu_vram_usage") or {}  # MiB
        temp = self._ask(
            "temp_c",
            "amdsmi_get_temp_metric",
            smi.AmdSmiTemperatureType.HOTSPOT,
            smi.AmdSmiTemperatureMetric.CURRENT,
        )
        watts = next(
            (_number(power.get(k)) for k in ("current_socket_power", "average_socket_power")
             if _number(power.get(k)) is not None),
            None,
        )  # fmt: skip
        cap_uw, used_mib = _number(cap.get("power_cap")), _number(vram.get("vram_used"))
        return {
            "sm_clock_mhz": _number(gfx.get("clk")),
            "mem_clock_mhz": _number(mem.get("clk")),
            "power_w": watts,
            "power_limit_w": None if cap_uw is None else cap_uw / 1e6,
            "temp_c": _number(temp),
            "mem_used_bytes": None if used_mib is None else used_mib * 2**20,
        }

    def close(self) -> None:
        if self._owns:
            try:
                self._smi.amdsmi_shut_down()
            except self._smi.AmdSmiException as exc:
                log.debug("amdsmi_shut_down failed: %s", exc)

    def _ask(self, field: str, fn_name: str, *args: Any) -> Any | None:
        if field in self._unsupported:
            return None
        try:
            return getattr(self._smi, fn_name)(self._handle, *args)
        except self._smi.AmdSmiException as exc:
            if getattr(exc, "err_code", None) == _NOT_SUPPORTED:
                self._unsupported.add(field)
            return None


def open_amdsmi(index: int, amdsmi: Any | None = None) -> AmdSmiReader | str:
    """A reader of AMD GPU ``index`` (amdsmi's order), or one line saying why there is none;
    ``amdsmi`` None: import and initialise the bindings (else used as given: tests)."""
    smi: Any = amdsmi
    if amdsmi is None:
        try:
            smi = importlib.import_module("amdsmi")
        except ImportError:
            return "no amdsmi: the amdsmi package is not installed"
    try:
        if amdsmi is None:
            smi.amdsmi_init()
        handles = smi.amdsmi_get_processor_handles()
    except smi.AmdSmiException as exc:
        return f"no amdsmi: {exc}"
    if index >= len(handles):
        return f"no amdsmi handle for GPU {index} ({len(handles)} GPUs seen)"
    return AmdSmiReader(smi, handles[index], owns_session=amdsmi is None)
