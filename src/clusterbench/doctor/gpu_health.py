"""GPU health through NVML: ECC, retired pages and row remapping, throttling, persistence,
other processes, MIG, application clocks.  A query NVML refuses skips that check."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterbench.doctor._sources import Check, Sources
from clusterbench.hardware.gpu_telemetry import CLOCKS_EVENT_REASONS, LIMITING_REASONS
from clusterbench.hardware.topology import nvml_query
from clusterbench.schema import Finding, Severity

__all__ = [
    "CHECKS",
    "check_clocks",
    "check_ecc",
    "check_mig",
    "check_other_processes",
    "check_persistence",
    "check_retired_memory",
    "check_throttle",
    "gpu_handles",
]

# nvml.h: nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlEnableState_t, nvmlClockType_t
_CORRECTED, _UNCORRECTED = 0, 1
_VOLATILE, _AGGREGATE = 0, 1
_ENABLED = 1
_CLOCK_SM = 1
_ECC_FN = "nvmlDeviceGetTotalEccErrors"
# nvidia-ml-py 12.535+ names it ...EventReasons; older bindings ...ThrottleReasons.
_THROTTLE_FNS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
# The reasons that slow a GPU down against its will (idle, application clocks and sync boost
# are not among them): nvml.h's, as the telemetry names them too.
THROTTLE_REASONS: dict[int, str] = {
    bit: name for bit, name in CLOCKS_EVENT_REASONS.items() if name in LIMITING_REASONS
}
_MEMORY_USED_WARN_BYTES = 2 * 2**30
"""Memory in use on an idle GPU above this is taken by something else (a process outside this
host's view, a leaked context): a chosen margin, above what the driver itself reserves."""


def gpu_handles(src: Sources) -> Iterator[tuple[int, Any]]:
    """(index, NVML handle) of each GPU of the probe inventory that NVML answers for."""
    if src.nvml is None:
        return
    for gpu in src.host.gpus:
        handle = nvml_query(src.nvml, "nvmlDeviceGetHandleByIndex", gpu.index)
        if handle is not None:
            yield gpu.index, handle


def _ecc_counts(nvml: Any, handle: Any) -> dict[str, int]:
    counts = {}
    for kind, error_type in (("corrected", _CORRECTED), ("uncorrected", _UNCORRECTED)):
        for counter, counter_type in (("volatile", _VOLATILE), ("aggregate", _AGGREGATE)):
            value = nvml_query(nvml, _ECC_FN, handle, error_type, counter_type)
            if value is not None:
                counts[f"{counter}_{kind}"] = int(value)
    return counts


def _ecc_verdict(counts: dict[str, int]) -> tuple[Severity, str] | None:
    if counts.get("volatile_uncorrected", 0) > 0:
        return "fail", "uncorrected ECC errors since the driver loaded"
    if counts.get("aggregate_uncorrected", 0) > 0:
        return "warn", "uncorrected ECC errors in the GPU's lifetime"
    if counts.get("volatile_corrected", 0) or counts.get("aggregate_corrected", 0):
        return "info", "corrected ECC errors"
    return None


def check_ecc(src: Sources) -> list[Finding]:
    """ECC errors: uncorrected since boot -> fail, uncorrected ever -> warn, corrected -> info."""
    findings = []
    for index, handle in gpu_handles(src):
        counts = _ecc_counts(src.nvml, handle)
        verdict = _ecc_verdict(counts)
        if verdict is None:
            continue
        findings.append(
            Finding(
                id="doctor.gpu.ecc",
                severity=verdict[0],
                scope=src.gpu_scope(index),
                message=f"{verdict[1]} on GPU {index}",
                evidence=counts,
                fix=f"nvidia-smi -q -d ECC,ROW_REMAPPER -i {index}; drain the node and reset the "
                "GPU; if errors return, replace it (RMA)",
            )
        )
    return findings


def _memory_faults(nvml: Any, handle: Any) -> dict[str, Any]:
    faults: dict[str, Any] = {}
    pending = nvml_query(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    if pending is not None:
        faults["retired_pages_pending"] = int(pending) == _ENABLED
    rows = nvml_query(nvml, "nvmlDeviceGetRemappedRows", handle)
    if rows is not None:  # (corrected rows, uncorrected rows, pending, failure occurred)
        corrected, uncorrected, remap_pending, failure = rows
        faults |= {"remapped_rows_corrected": int(corrected)}
        faults |= {"remapped_rows_uncorrected": int(uncorrected)}
        faults |= {"row_remap_pending": bool(remap_pending), "row_remap_failure": bool(failure)}
    return faults


def check_retired_memory(src: Sources) -> list[Finding]:
    """Retired pages pending, row remapping pending or failed: the GPU needs a reset or RMA."""
    findings = []
    for index, handle in gpu_handles(src):
        faults = _memory_faults(src.nvml, handle)
        problems = [k for k in ("retired_pages_pending", "row_remap_pending") if faults.get(k)]
        failed = bool(faults.get("row_remap_failure"))
        if not problems and not failed:
            continue
        what = (
            "row remapping failed (no spare rows left)"
            if failed
            else (f"{' and '.join(p.replace('_', ' ') for p in problems)}: not applied until reset")
        )
        findings.append(
            Finding(
                id="doctor.gpu.memory_remap",
                severity="fail",
                scope=src.gpu_scope(index),
                message=f"GPU {index}: {what}",
                evidence=faults,
                fix="replace the GPU (RMA)"
                if failed
                else (f"drain the node, then reset the GPU (nvidia-smi -r -i {index}) or reboot"),
            )
        )
    return findings


def _throttle_mask(nvml: Any, handle: Any) -> int | None:
    for name in _THROTTLE_FNS:
        if hasattr(nvml, name):
            value = nvml_query(nvml, name, handle)
            return None if value is None else int(value)
    return None


def check_throttle(src: Sources) -> list[Finding]:
    """Clock event reasons active now: power cap, hardware slowdown, thermal."""
    findings = []
    for index, handle in gpu_handles(src):
        mask = _throttle_mask(src.nvml, handle)
        active = [name for bit, name in THROTTLE_REASONS.items() if mask and mask & bit]
        if not active:
            continue
        findings.append(
            Finding(
                id="doctor.gpu.throttle",
                severity="warn",
                scope=src.gpu_scope(index),
                message=f"GPU {index} is slowed down now: {', '.join(active)}",
                evidence={"clocks_event_reasons": hex(mask or 0), "active": active},
                fix=f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {index}; check cooling, "
                "power supply and the power limit",
            )
        )
    return findings


def check_persistence(src: Sources) -> list[Finding]:
    """Persistence mode off: every process start re-initialises the GPU (seconds)."""
    off = [
        index
        for index, handle in gpu_handles(src)
        if nvml_query(src.nvml, "nvmlDeviceGetPersistenceMode", handle) == 0
    ]
    if not off:
        return []
    return [
        Finding(
            id="doctor.gpu.persistence_off",
            severity="info",
            scope=src.scope,
            message=f"persistence mode is off on GPU(s) {off}: each job start re-initialises them",
            evidence={"gpus": off},
            fix="systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1)",
        )
    ]


def _processes(nvml: Any, handle: Any) -> list[dict[str, Any]] | None:
    procs = nvml_query(nvml, "nvmlDeviceGetComputeRunningProcesses", handle)
    if procs is None:
        return None
    return [{"pid": int(p.pid), "used_bytes": getattr(p, "usedGpuMemory", None)} for p in procs]


def _foreign(procs: list[dict[str, Any]], own_pids: frozenset[int]) -> list[dict[str, Any]]:
    if not own_pids:
        return procs
    if any(p["pid"] in own_pids for p in procs):
        return [p for p in procs if p["pid"] not in own_pids]
    # NVML reports pids of another pid namespace (containers): our rank is one of them.
    return procs if len(procs) > 1 else []


def _process_finding(src: Sources, index: int, handle: Any) -> Finding | None:
    procs = _processes(src.nvml, handle)
    foreign = _foreign(procs, src.own_pids) if procs is not None else []
    if foreign:
        pids = [p["pid"] for p in foreign]
        return Finding(
            id="doctor.gpu.other_processes",
            severity="warn",
            scope=src.gpu_scope(index),
            message=f"GPU {index} is shared with other processes (pids {pids}): they take "
            "memory and compute from the benchmark and the job",
            evidence={"processes": foreign},
            fix=f"nvidia-smi -i {index} shows them; stop them or pick another node",
        )
    if procs or src.own_pids:
        return None  # our own workers hold memory during a run
    memory = nvml_query(src.nvml, "nvmlDeviceGetMemoryInfo", handle)
    used = int(getattr(memory, "used", 0) or 0)
    if used <= _MEMORY_USED_WARN_BYTES:
        return None
    return Finding(
        id="doctor.gpu.memory_in_use",
        severity="warn",
        scope=src.gpu_scope(index),
        message=f"{used / 2**30:.1f} GiB of GPU {index}'s memory is in use by processes not "
        "visible here (another container?)",
        evidence={"used_bytes": used, "total_bytes": getattr(memory, "total", None)},
        fix=f"nvidia-smi -i {index} on the host shows them; stop them or pick another node",
    )


def check_other_processes(src: Sources) -> list[Finding]:
    """Processes other than this run's on the GPUs, or memory already in use."""
    found = (_process_finding(src, index, handle) for index, handle in gpu_handles(src))
    return [f for f in found if f is not None]


def check_mig(src: Sources) -> list[Finding]:
    """MIG mode on: each instance is a fraction of the GPU, and NCCL cannot use NVLink."""
    findings = []
    for index, handle in gpu_handles(src):
        mode = nvml_query(src.nvml, "nvmlDeviceGetMigMode", handle)  # (current, pending)
        if mode is None or int(mode[0]) != _ENABLED:
            continue
        findings.append(
            Finding(
                id="doctor.gpu.mig",
                severity="warn",
                scope=src.gpu_scope(index),
                message=f"MIG mode is on for GPU {index}: benchmarks see one instance, not the GPU",
                evidence={"mig_mode_current": int(mode[0]), "mig_mode_pending": int(mode[1])},
                fix=f"if MIG is not wanted: nvidia-smi -i {index} -mig 0, then reset the GPU",
            )
        )
    return findings


def check_clocks(src: Sources) -> list[Finding]:
    """Application SM clock set below the default (doctor cannot see clocks under load)."""
    findings = []
    for index, handle in gpu_handles(src):
        current = nvml_query(src.nvml, "nvmlDeviceGetApplicationsClock", handle, _CLOCK_SM)
        default = nvml_query(src.nvml, "nvmlDeviceGetDefaultApplicationsClock", handle, _CLOCK_SM)
        if current is None or default is None or int(current) >= int(default):
            continue
        findings.append(
            Finding(
                id="doctor.gpu.app_clocks",
                severity="warn",
                scope=src.gpu_scope(index),
                message=f"GPU {index}'s application SM clock is {current} MHz, below its default "
                f"{default} MHz",
                evidence={"sm_app_clock_mhz": int(current), "sm_default_clock_mhz": int(default)},
                fix=f"nvidia-smi -i {index} -rac (reset application clocks)",
            )
        )
    return findings


CHECKS: tuple[Check, ...] = (
    check_ecc,
    check_retired_memory,
    check_throttle,
    check_persistence,
    check_other_processes,
    check_mig,
    check_clocks,
)
