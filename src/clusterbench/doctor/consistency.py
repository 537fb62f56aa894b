"""Consistency across nodes (pure over HostInfo): versions and GPU models that differ."""

from __future__ import annotations

from collections.abc import Sequence

from clusterbench.schema import Finding, HostInfo

__all__ = ["VERSION_KEYS", "check_consistency"]

VERSION_KEYS = ("driver", "nvml_cuda", "cuda", "hip", "nccl", "torch")
"""Keys of ``HostInfo.versions`` that must match on every node."""


def _differ(key: str, values: dict[str, str]) -> Finding | None:
    by_value: dict[str, list[str]] = {}
    for host, value in sorted(values.items()):
        by_value.setdefault(value, []).append(host)
    if len(by_value) < 2:
        return None
    text = "; ".join(f"{value} on {', '.join(hosts)}" for value, hosts in by_value.items())
    return Finding(
        id=f"doctor.consistency.{key}",
        severity="warn",
        scope="run",
        message=f"{key} differs between nodes: {text}",
        evidence={"by_host": dict(sorted(values.items()))},
        fix="run every node from one image (same driver, CUDA, NCCL and torch); a mixed "
        "cluster hangs or slows collectives",
    )


def _gpu_models(host: HostInfo) -> str:
    names = sorted({gpu.name for gpu in host.gpus})
    return " + ".join(f"{sum(g.name == n for g in host.gpus)}x {n}" for n in names) or "no GPU"


def check_consistency(hosts: Sequence[HostInfo]) -> list[Finding]:
    """Driver, CUDA, NCCL and torch versions, and GPU models, that differ between nodes."""
    if len(hosts) < 2:
        return []
    findings = []
    for key in VERSION_KEYS:
        values = {h.hostname: h.versions[key] for h in hosts if key in h.versions}
        found = _differ(key, values)
        if found is not None:
            findings.append(found)
    found = _differ("gpus", {h.hostname: _gpu_models(h) for h in hosts})
    if found is not None:
        findings.append(found)
    return findings
