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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


TELEMETRY_FIELDS: Final = (
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "power_limit_w",
    "temp_c",
    "clocks_event_reasons",
    "pcie_tx_mbps",
    "pcie_rx_mbps",
    "nvlink_tx_mbps",
    "nvlink_rx_mbps",
    "mem_used_bytes",
)
"""What one telemetry sample holds: the columns of ``telemetry/rank-NNNNN.csv`` after ``t``
(unix s) and ``benchmark``; MB/s = 1e6 B/s; ``clocks_event_reasons`` is NVML's bitmask."""


class TelemetrySummary(_Model):
    """A GPU's telemetry over one window: a measurement's (from the previous record of its
    benchmark on its rank to the moment it was recorded) or a whole benchmark's on one rank.
    A field the GPU did not report is null."""

    samples: int = Field(ge=0)
    window_s: float
    sm_clock_mhz_median: float | None = None
    sm_clock_mhz_min: float | None = None
    sm_clock_max_mhz: float | None = Field(
        default=None, description="the GPU's maximum SM clock (NVML), what the median is below"
    )
    mem_clock_mhz_median: float | None = None
    power_w_median: float | None = None
    power_w_max: float | None = None
    power_limit_w: float | None = Field(default=None, description="the enforced power limit")
    temp_c_max: float | None = None
    temp_slowdown_c: float | None = Field(
        default=None, description="the GPU's own slowdown temperature (NVML threshold)"
    )
    reasons: dict[str, float] = Field(
        default_factory=dict,
        description="clocks-event (throttle) reason -> fraction of the samples it was active "
        "in, most frequent first",
    )
    pcie_tx_mbps_median: float | None = None
    pcie_rx_mbps_median: float | None = None
    nvlink_tx_mbps_median: float | None = None
    nvlink_rx_mbps_median: float | None = None
    mem_used_max_bytes: int | None = None


class TelemetryWindow(_Model):
    """One benchmark's telemetry on one rank: its window (start to end), the summary over it
    and the raw series it is a part of."""

    rank: int
    host: str
    device: str
    benchmark: str
    round: int | None = Field(default=None, description="the soak round; null outside a soak")
    start: float = Field(description="unix seconds")
    end: float = Field(description="unix seconds")
    summary: TelemetrySummary | None = Field(description="null: no sample fell in the window")
    series: str | None = Field(
        description="the rank's CSV of samples, relative to the run folder (null: not kept)"
    )
    source: str = Field(description="what was read: nvml or amdsmi")


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
    telemetry: TelemetrySummary | None = Field(
        default=None,
        description="the GPU's telemetry over the measurement's own window; null without "
        "telemetry (CPU workers, no NVML, --no-telemetry) or with no sample in the window",
    )
    round: int | None = Field(
        default=None,
        description="the soak round it was measured in (0-based; --soak/--repeat); null "
        "outside a soak",
    )
    time: float | None = Field(
        default=None,
        description="when the worker recorded it, unix seconds; absent in files written "
        "before clusterbench kept it",
    )


class Finding(_Model):
    id: str
    severity: Severity
    scope: str = Field(description="what the finding is about: 'run', 'host:h', 'host:h/gpu:0'")
    message: str
    # A finding that is advice carries evidence["advice"] (the change, its gain and how it was
    # shown): the convention is clusterbench.judging.advice's, and needs no schema change.
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


class SoakInfo(_Model):
    """A soak: the selected benchmarks run round after round (``--soak DURATION`` or
    ``--repeat N``); every round's measurements are kept, each with its ``round``."""

    duration_s: float | None = Field(default=None, description="--soak: the duration asked")
    repeat: int | None = Field(default=None, description="--repeat: the rounds asked")
    rounds: int = Field(ge=0, description="rounds started")
    completed: int = Field(
        ge=0, description="rounds every benchmark finished on every rank (the first ones)"
    )
    round_started: list[float] = Field(
        default_factory=list, description="unix seconds each round started (its first rank)"
    )
    round_seconds: list[float | None] = Field(
        default_factory=list,
        description="wall seconds of each round, first start to last end over the ranks "
        "(null: the round did not finish)",
    )
    stopped_in: int | None = Field(
        default=None,
        description="the round the run was in when it was interrupted or failed; null when "
        "it ended as planned",
    )

    @property
    def summary_round(self) -> int:
        """The round the benchmarks' own findings, the summary tables, comparisons and the
        history take: the last complete one (the first round when none completed)."""
        return max(0, self.completed - 1)


class BudgetStop(_Model):
    """Where a benchmark stopped because its time budget was spent (it keeps what it measured)."""

    after_s: float = Field(description="seconds into the benchmark it stopped")
    done: int = Field(ge=0, description="points it measured")
    total: int = Field(ge=0, description="points its settings asked for")
    unit: str = Field(default="points", description="what a point is: shapes, sizes, cases")


class BenchmarkPlan(_Model):
    """One benchmark of the plan printed before the run: its expected seconds and, with a
    budget, what was cut to fit it."""

    benchmark: str
    expected_s: float | None = Field(
        description="expected wall seconds with the settings it ran with (null: unknown)"
    )
    source: str = Field(
        description="where the figure comes from: history (an earlier run on this host), "
        "table (the shipped timings), model (its settings and nominal or measured rates), none"
    )
    terms: list[str] = Field(default_factory=list, description="what the figure is made of")
    budget_s: float | None = Field(
        default=None, description="seconds it may take (--budget's share or time_budget_s)"
    )
    cuts: list[str] = Field(
        default_factory=list, description="settings changed to fit the budget: 'repeats 30 -> 8'"
    )
    expected_before_s: float | None = Field(
        default=None, description="expected seconds with the settings before the cuts"
    )
    stopped: BudgetStop | None = Field(
        default=None, description="set when it stopped at its budget (its slowest rank)"
    )


class PlanInfo(_Model):
    """The run's plan: each benchmark's expected time, and the budget it was fitted to."""

    budget_s: float | None = Field(default=None, description="--budget (null: none)")
    expected_s: float | None = Field(
        default=None, description="the benchmarks' expected seconds, summed (null: unknown)"
    )
    reserve_s: float = Field(
        default=0.0, description="seconds of the budget kept for start-up and the results"
    )
    fits: bool = Field(default=True, description="the smallest forms fit the budget")
    benchmarks: list[BenchmarkPlan] = Field(default_factory=list)


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
        default_factory=dict,
        description="benchmark -> why it did not run here; 'telemetry' -> why no telemetry was "
        "sampled (CPU workers, no NVML, --no-telemetry)",
    )
    benchmark_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="benchmark -> wall seconds it took (the slowest rank's start to end; in "
        "a soak, in its last round)",
    )
    phase_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="phase of the run -> wall seconds, in order: start (the process up to the "
        "run), imports (torch, the device check), plan, worker imports (the workers' fork "
        "server's import still to come at the launch), worker start, device init, probe, "
        "telemetry start (the slowest rank's), finish (assemble and analyse), page (build "
        "report.html); the benchmarks are in benchmark_seconds; a phase not timed (under an "
        "external launcher: worker imports and worker start) is left out",
    )
    soak: SoakInfo | None = Field(
        default=None, description="the rounds of a soak (--soak, --repeat); null outside one"
    )
    plan: PlanInfo | None = Field(
        default=None,
        description="the plan printed before the run: expected seconds per benchmark, the "
        "budget (--budget, time_budget_s), what was cut to fit it, where a benchmark stopped "
        "at its budget; null in results written without one",
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
    telemetry: list[TelemetryWindow] = Field(
        default_factory=list, description="each benchmark's telemetry window on each GPU rank"
    )


def one_round(results: Results) -> Results:
    """``results`` with the measurements (and telemetry windows) of one soak round only
    (:attr:`SoakInfo.summary_round`) and those recorded outside a round; the results themselves
    outside a soak.

    What expects one measurement per figure (the benchmarks' findings, peer outliers, summary
    tables and plots, compare, baselines, the history) reads a soak through this: the last
    complete round, as the cluster runs once it has soaked, rather than rounds pooled (pooling
    would let a best-of analysis pick the best round, and count a device once per round).
    """
    soak = results.run.soak
    if soak is None and all(m.round is None for m in results.measurements):
        return results
    keep = soak.summary_round if soak is not None else _last_round(results.measurements)
    chosen = [m for m in results.measurements if m.round is None or m.round == keep]
    windows = [w for w in results.telemetry if w.round is None or w.round == keep]
    return results.model_copy(update={"measurements": chosen, "telemetry": windows})


def _last_round(measurements: Sequence[Measurement]) -> int:
    return max((m.round for m in measurements if m.round is not None), default=0)


def load_results(path: str | Path) -> Results:
    """Read a ``results.json`` file (or a run folder holding one) back into models."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    return Results.model_validate_json(p.read_text(encoding="utf-8"))


def invalid_results_reason(data: Any, exc: ValidationError) -> str:
    """Why ``data`` (a JSON document) is not a clusterbench results.json, in a few words rather
    than pydantic's report: another program's file says so; else the first problem found (and
    how many more)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    tool = data.get("tool")
    if not isinstance(tool, dict) or tool.get("name", "clusterbench") != "clusterbench":
        return "written by another program: no clusterbench 'tool' entry"
    if "schema_version" not in data:
        return "no 'schema_version': not written by clusterbench"
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "top level"
    more = f"; {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
    return f"{where}: {first['msg'].lower()}{more}"


def results_json_schema() -> dict[str, Any]:
    """The JSON Schema of results.json (written to docs/results.schema.json)."""
    return Results.model_json_schema()
