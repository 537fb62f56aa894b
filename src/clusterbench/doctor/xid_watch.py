"""Xid events while a run goes on, through NVML's event API.

``nvmlEventSetCreate``, ``nvmlDeviceRegisterEvents(handle, nvmlEventTypeXidCriticalError,
set)``, then a thread that waits in ``nvmlEventSetWait`` (a tenth of a second at a time, so
that :meth:`XidWatcher.stop`, which waits for it at a run's end, returns within that) and keeps
each event with the wall time it came.
NVML delivers only the events after registration: a watcher started at a run's beginning
and stopped at its end holds the Xids of the run, whoever caused them.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from typing import Any

from clusterbench.doctor.xid import XidEvent

__all__ = ["XidWatcher"]

log = logging.getLogger(__name__)

# nvml.h: nvmlEventTypeXidCriticalError = 0x8, NVML_ERROR_TIMEOUT = 10
_XID_CRITICAL = 0x8
_ERROR_TIMEOUT = 10
_WAIT_MS = 100  # a run's end waits up to one wait for the thread


class XidWatcher:
    """Watches the given GPUs (index -> NVML handle) for Xid events from :meth:`start` on."""

    def __init__(self, nvml: Any, devices: Mapping[int, Any], *, wait_ms: int = _WAIT_MS) -> None:
        self._nvml = nvml
        self._devices = dict(devices)
        self._wait_ms = wait_ms
        self._set: Any = None
        self._events: list[XidEvent] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None
        """Why the watcher does not (or no longer) watch; None while it does."""

    def start(self) -> bool:
        """Register for the Xid events of every device; False (``problem`` says why) when NVML
        refuses, e.g. NotSupported in some VMs and containers."""
        nvml = self._nvml
        try:
            self._set = nvml.nvmlEventSetCreate()
            for handle in self._devices.values():
                nvml.nvmlDeviceRegisterEvents(handle, _XID_CRITICAL, self._set)
        except nvml.NVMLError as exc:
            self.problem = f"NVML Xid events unavailable: {exc}"
            self._free()
            return False
        self._thread = threading.Thread(target=self._loop, name="xid-watch", daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        nvml = self._nvml
        while not self._stopping.is_set():
            try:
                data = nvml.nvmlEventSetWait(self._set, self._wait_ms)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) == _ERROR_TIMEOUT:
                    continue
                self.problem = f"NVML event wait failed: {exc}"
                log.debug("xid watch stopped: %s", exc)
                return
            if int(getattr(data, "eventType", 0)) & _XID_CRITICAL:
                self._keep(data)

    def _keep(self, data: Any) -> None:
        event = XidEvent(
            code=int(data.eventData),
            pci_bus_id=None,
            gpu=self._index_of(data.device),
            when=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            text="NVML Xid event",
        )
        with self._lock:
            self._events.append(event)

    def _index_of(self, device: Any) -> int | None:
        if len(self._devices) == 1:
            return next(iter(self._devices))
        try:
            return int(self._nvml.nvmlDeviceGetIndex(device))
        except self._nvml.NVMLError:
            return None

    def events(self) -> list[XidEvent]:
        """The events seen so far, in the order they came."""
        with self._lock:
            return list(self._events)

    def stop(self) -> list[XidEvent]:
        """Stop watching (within one wait) and free the event set; every event seen."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=self._wait_ms / 1000 + 5.0)
            if self._thread.is_alive():  # still inside NVML: freeing the set under it is unsafe
                return self.events()
        self._free()
        return self.events()

    def _free(self) -> None:
        if self._set is None:
            return
        try:
            self._nvml.nvmlEventSetFree(self._set)
        except self._nvml.NVMLError as exc:
            log.debug("nvmlEventSetFree: %s", exc)
        self._set = None
