"""Reading measurements for a verdict: scope labels, reference values, numbers from params, the
best per key, and the severity of a finding on CPU workers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from clusterbench.schema import Measurement, ParamValue, Results, Severity

K = TypeVar("K", bound=Hashable)


def scope_label(host: str, device: str | None = None) -> str:
    return f"host:{host}/{device}" if device else f"host:{host}"


def ref_value(m: Measurement, kind: str = "spec_peak") -> float | None:
    if m.reference is None or m.reference.kind != kind or m.reference.value <= 0:
        return None
    return m.reference.value


def as_number(value: ParamValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def best_by(
    measurements: Iterable[Measurement], key: Callable[[Measurement], K]
) -> dict[K, Measurement]:
    """The highest value per key (e.g. the best over a size sweep)."""
    out: dict[K, Measurement] = {}
    for m in measurements:
        k = key(m)
        if k not in out or m.value > out[k].value:
            out[k] = m
    return out


def per_device(m: Measurement) -> tuple[str, str]:
    return (m.host, m.device)


def dev_label(value: ParamValue) -> str:
    """A ``src``/``dst`` param as a device label; a bare index means a CUDA device."""
    return f"cuda:{value}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def gpu_severity(results: Results, severity: Severity) -> Severity:
    """``severity`` on GPU runs; info on CPU workers, which share the host's cores with their
    own input pipeline and I/O, so slow loaders or stalls there describe the test machine."""
    return severity if results.run.backend == "nccl" else "info"


def shared_cpu_hosts(measurements: Iterable[Measurement]) -> dict[str, int]:
    """Hosts with several CPU devices (CPU workers) -> how many.  Those ranks share the host's
    cores, so which of them runs late or slow is the OS scheduler's choice, not a faulty
    device: comparisons between them are reported, never judged."""
    devices: dict[str, set[str]] = defaultdict(set)
    for m in measurements:
        if m.device.startswith("cpu"):
            devices[m.host].add(m.device)
    return {host: len(d) for host, d in devices.items() if len(d) > 1}
