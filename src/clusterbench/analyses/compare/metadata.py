"""What changed between two runs' metadata, and the fix hint of a regression that names it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from clusterbench.schema import Results

__all__ = ["MetadataChange", "fix_hint", "metadata_diff"]

_MAX_HINT_CHANGES = 6
# Settings that say nothing about the hardware or software measured (telemetry: sampling
# reads NVML on a thread of its own, and runs from before it have no such key).
_IGNORED_CONFIG = ("timeout_s", "telemetry")


class MetadataChange(BaseModel):
    """One thing that differs between the base and the new run (versions, GPUs, nodes, config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    what: str
    base: str
    new: str

    def __str__(self) -> str:
        return f"{self.what}: {self.base} -> {self.new}"


def metadata_diff(base: Results, new: Results) -> list[MetadataChange]:
    """What differs between the runs: clusterbench version, software versions (driver, CUDA,
    NCCL, torch, ... over all hosts), GPU models, node set, world size, backend, suite and the
    configuration, in that order."""
    out = _diff("clusterbench version", base.tool.version, new.tool.version)
    for key in sorted(_versions(base).keys() | _versions(new).keys()):
        if key != "clusterbench":  # the tool's own version is above
            out += _diff(f"{key} version", _versions(base).get(key), _versions(new).get(key))
    out += _diff("GPUs", _gpu_models(base), _gpu_models(new))
    out += _diff("nodes", _nodes(base), _nodes(new))
    for what in ("world_size", "backend", "suite"):
        out += _diff(what, getattr(base.run, what), getattr(new.run, what))
    out += _diff("benchmarks", base.run.benchmarks, new.run.benchmarks)
    # The settings of benchmarks both runs ran (those of one side only say nothing more than
    # the line above).
    both = set(base.run.benchmarks) & set(new.run.benchmarks)
    old_config, new_config = _flatten(base.run.config), _flatten(new.run.config)
    for key in sorted(old_config.keys() | new_config.keys()):
        if key.startswith(_IGNORED_CONFIG) or _other_benchmark(key, both):
            continue
        out += _diff(f"config {key}", old_config.get(key), new_config.get(key))
    return out


def _other_benchmark(key: str, both: set[str]) -> bool:
    """``benchmarks.X.setting`` of a benchmark that not both runs ran."""
    parts = key.split(".")
    return len(parts) >= 3 and parts[0] == "benchmarks" and parts[1] not in both


def _diff(what: str, base: object, new: object) -> list[MetadataChange]:
    if base == new:
        return []
    return [MetadataChange(what=what, base=_text(base), new=_text(new))]


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _versions(results: Results) -> dict[str, str]:
    """Each software version over the run's hosts: one value, or every distinct one."""
    values: dict[str, set[str]] = defaultdict(set)
    for host in results.hosts:
        for key, value in host.versions.items():
            values[key].add(value)
    return {key: " / ".join(sorted(v)) for key, v in values.items()}


def _gpu_models(results: Results) -> str:
    counts = Counter(gpu.name for host in results.hosts for gpu in host.gpus)
    return ", ".join(f"{n}x {name}" for name, n in sorted(counts.items())) or "none"


def _nodes(results: Results) -> str:
    return ", ".join(sorted(h.hostname for h in results.hosts)) or "-"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, prefix=f"{name}."))
        else:
            out[name] = value
    return out


def fix_hint(metadata: Iterable[MetadataChange], *, against: str, known: bool = True) -> str:
    """What to look at: the metadata that changed since ``against``, else the node itself
    (``known`` False: ``against`` has no metadata to diff, e.g. a baseline)."""
    changes = list(metadata)
    node = (
        "look at the node itself (clocks and power capping, temperatures, other jobs on it, a "
        "link that trained low) and rerun to confirm"
    )
    if not known:
        return (
            f"Compare this node's driver, CUDA, NCCL and torch versions and settings with those "
            f"of {against} ('clusterbench compare RUN NEW --match gpu' diffs two runs); {node}."
        )
    if not changes:
        return (
            f"Nothing in the run metadata changed since {against} (versions, GPUs, nodes, "
            f"config): {node}."
        )
    shown = "; ".join(str(c) for c in changes[:_MAX_HINT_CHANGES])
    extra = len(changes) - _MAX_HINT_CHANGES
    more = f"; and {extra} more" if extra > 0 else ""
    return (
        f"Changed since {against}: {shown}{more}. Check whether that change explains it "
        "(roll it back, or rerun with only it changed)."
    )
