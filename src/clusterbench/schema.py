"""The results.json contract (schema_version 1): pydantic models, nothing else.

Every figure carries its unit and statistics; dimensions (dtype, size_bytes, ...) live in
``params`` and never in the metric name.  Units follow nccl-tests: GB/s = 1e9 B/s,
TFLOP/s = 1e12 FLOP/s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION: Final = 1

Severity = Literal["info", "warn", "fail"]
RunStatus = Literal["running", "completed", "failed", "interrupted"]
SEVERITY_ORDER: Final[dict[str, int]] = {"fail": 0, "warn": 1, "info": 2}
"""Most severe first: how findings are listed."""
ParamValue = str | int | float | bool | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


MAX_KEPT_VALUES: Final = 64
"""At most this many repeats are kept in :attr:`Stats.values` (evenly subsampled beyond)."""


def kept_values(samples: Sequence[float], limit: int = MAX_KEPT_VALUES) -> list[float]:
    """``samples`` in their order, or ``limit`` of them evenly spread over it (first and last
    kept) when there are more."""
    values = [float(v) for v in samples]
    if len(values) <= limit:
        return values
    if limit == 1:
        return values[:1]
    # index i * (n - 1) / (limit - 1), rounded: evenly spaced, both ends included
    step = (len(values) - 1) / (limit - 1)
    return [values[round(i * step)] for i in range(limit)]


class Stats(_Model):
    """Statistics over the repeats of one measurement."""

    samples: int = Field(ge=1)
    median: float
    min: float
    max: float
    mean: float
    cv: float = Field(description="coefficient of variation: stdev / mean (0 for one sample)")
    values: list[float] | None = Field(
        default=None,
        description="the repeats themselves, in the measurement's unit and in the order they "
        f"were timed; at most {MAX_KEPT_VALUES} (evenly subsampled beyond); absent in files "
        "written before clusterbench kept them",
    )

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> Stats:
        """Statistics of ``samples`` (in the measurement's unit), keeping the samples too."""
        values = [float(v) for v in samples]
        if not values:
            raise ValueError("no samples")
        mean = statistics.fmean(values)
        stdev = statistics.stdev(values) if len(values) > 1 else 0.0
        cv = stdev / mean if mean else 0.0
        return cls(
            samples=len(values),
            median=statistics.median(values),
            min=min(values),
            max=max(values),
            mean=mean,
            cv=cv if math.isfinite(cv) else 0.0,
            values=kept_values(values),
        )


class Reference(_Model):
    """What a value is compared with."""

    value: float
    kind: Literal["spec_peak", "achievable", "peer_median", "baseline", "link_rate"]
    source: str


class Measurement(_Model):
    benchmark: str
    metric: str
    value: float
    unit: str
    params: dict[str, ParamValue] = Field(default_factory=dict)
    rank: int
    host: str
    device: str
    stats: Stats | None = None
    reference: Reference | None = None


class Finding(_Model):
    id: str
    severity: Severity
    scope: str = Field(description="what the finding is about: 'run', 'host:h', 'host:h/gpu:0'")
    message: str
    # A finding that is advice carries evidence["advice"] (the change, its gain and how it was
    # shown): the convention is clusterbench.analysis.advice's, and needs no schema change.
    evidence: dict[str, Any] = Field(default_factory=dict)
    fix: str = ""


class ErrorRecord(_Model):
    benchmark: str | None = None
    rank: int | None = None
    host: str | None = None
    message: str


class PCIeLink(_Model):
    gen: int | None = None
    width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None

    def below_max(self) -> bool:
        """Trained below its own maximum generation or width (where both are known)."""
        low_gen = bool(self.gen and self.max_gen and self.gen < self.max_gen)
        return low_gen or bool(self.width and self.max_width and self.width < self.max_width)


class GpuSpecRef(_Model):
    """The spec-table entry a GPU was matched to (absent for an unknown SKU)."""

    sku: str
    dense_tflops: dict[str, float]
    hbm_gbps: float
    nvlink_gbps_per_dir: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    source: str
    busbw_achievable: dict[str, float] = Field(
        default_factory=dict, description="collective -> large-message busbw healthy nodes reach"
    )
    busbw_source: str = ""


class GpuInfo(_Model):
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_bytes: int | None = None
    numa_node: int | None = None
    pcie: PCIeLink = Field(default_factory=PCIeLink)
    spec: GpuSpecRef | None = None
    nvlink_active: int | None = Field(default=None, description="active NVLink links")
    driver_model: str | None = None


class CpuInfo(_Model):
    model: str | None = None
    sockets: int | None = None
    cores: int | None = None
    threads: int | None = None
    numa_nodes: dict[str, str] = Field(
        default_factory=dict, description="NUMA node -> CPU list (sysfs cpulist format)"
    )


class NicInfo(_Model):
    name: str
    kind: Literal["infiniband", "roce", "efa", "ethernet", "other"]
    state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    numa_node: int | None = None
    pci_bus_id: str | None = None
    port: int | None = None


class Topology(_Model):
    """GPU-to-GPU connectivity, like ``nvidia-smi topo -m``."""

    devices: list[str] = Field(default_factory=list)
    matrix: list[list[str]] = Field(
        default_factory=list, description="X, NV<n>, PIX, PXB, PHB, NODE, SYS per pair"
    )
    p2p: list[list[bool]] = Field(default_factory=list, description="peer access possible")


class HostInfo(_Model):
    hostname: str
    gpus: list[GpuInfo] = Field(default_factory=list)
    cpu: CpuInfo = Field(default_factory=CpuInfo)
    nics: list[NicInfo] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    topology: Topology = Field(default_factory=Topology)


class ToolInfo(_Model):
    name: str = "clusterbench"
    version: str


class RunInfo(_Model):
    id: str
    started: str
    finished: str | None = None
    suite: str
    world_size: int
    num_nodes: int
    backend: str
    command: str
    config: dict[str, Any] = Field(default_factory=dict)
    status: RunStatus = "completed"
    benchmarks: list[str] = Field(default_factory=list, description="benchmarks asked for")
    unfinished: list[str] = Field(
        default_factory=list, description="benchmarks that did not finish on every rank"
    )
    skipped: dict[str, str] = Field(
        default_factory=dict, description="benchmark -> why it did not run here"
    )
    benchmark_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="benchmark -> wall seconds it took (the slowest rank's start to end)",
    )


class NcclRankInfo(_Model):
    """What NCCL's INFO log said on one rank (``--nccl-debug``)."""

    rank: int
    host: str
    transports: dict[str, int] = Field(
        default_factory=dict, description="transport (P2P, SHM, NET/IB, NET/Socket) -> channels"
    )
    networks: list[str] = Field(default_factory=list, description="network plugin NCCL used")
    algorithms: dict[str, list[str]] = Field(
        default_factory=dict, description="collective -> ALGO/PROTO pairs NCCL chose"
    )
    log: str = Field(description="the rank's NCCL log, relative to the run folder")


class Results(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: ToolInfo
    run: RunInfo
    hosts: list[HostInfo] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    errors: list[ErrorRecord] = Field(default_factory=list)
    nccl: list[NcclRankInfo] = Field(default_factory=list)


def load_results(path: str | Path) -> Results:
    """Read a ``results.json`` file (or a run folder holding one) back into models."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    return Results.model_validate_json(p.read_text(encoding="utf-8"))


def results_json_schema() -> dict[str, Any]:
    """The JSON Schema of results.json (written to docs/results.schema.json)."""
    return Results.model_json_schema()
