"""What another tool's files said, before it is a run (``clusterbench import``, ``analyze``):
the measurements, findings and hosts an importer reads out of them, and the reading helpers
every importer shares.  Each importer lives with what it knows (nccl-tests' outputs with the
NCCL analysis, ``dcgmi diag`` with doctor's DCGM checks, profiler traces with the trace
analysis); the pipeline makes a run folder of what they return."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.exits import ConfigError
from clusterbench.schema import Finding, HostInfo, Measurement

__all__ = ["Imported", "file_time", "read_file"]


@dataclass(kw_only=True)
class Imported:
    """What the files said, before it is a run."""

    measurements: list[Measurement] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    hosts: list[HostInfo] = field(default_factory=list)
    world_size: int = 1
    started: str | None = None
    """When the tool ran (ISO 8601, UTC), where its output says; else the files' time."""
    details: dict[str, object] = field(default_factory=dict)
    """What results.json keeps of the import under ``run.config.imported``."""
    warnings: list[str] = field(default_factory=list)
    num_nodes: int | None = None
    """The run's nodes where its hosts do not count them (a host that is unknown); else one
    node a host."""
    backend: str = "none"
    """The process group's backend the tool ran over (nccl, gloo), where it had one."""


def read_file(path: Path) -> str:
    """The text of ``path``; ConfigError naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None


def file_time(paths: Sequence[Path]) -> str | None:
    """The oldest of the files' modification times (ISO 8601, UTC); None where one is gone."""
    try:
        stamp = min(p.stat().st_mtime for p in paths)
    except (OSError, ValueError):
        return None
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).isoformat(timespec="seconds")
