"""Settings and metrics of the ``attribution`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeGuard

from clusterbench.benchmarks.training.settings import TrainingConfig, WorkloadSettings
from clusterbench.declared.attribution import AttributionMetrics
from clusterbench.model_shapes import Model

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "ACCUM_MIN_RISE_PCT",
    "LOCAL_MODELS",
    "AttributionConfig",
    "AttributionMetrics",
    "AttributionModel",
    "LocalModel",
    "is_local_model",
    "sweep_counts",
]

LocalModel = Literal["comm_heavy", "gemm_heavy"]

LOCAL_MODELS: dict[LocalModel, tuple[int, int, int, float]] = {
    # name: (width, layers or parameters, rows per sample, DDP bucket MB)
    "comm_heavy": (1024, 1 << 20, 1, 1 / 64),
    "gemm_heavy": (1024, 2, 128, 25.0),
}
"""Attribution-only workloads to check the classification: ``comm_heavy`` (1 M parameters in
256 tensors of 16 KB, only summed into a scale: almost no compute and little memory traffic;
DDP buckets capped at 16 KB, so many small all-reduces: latency-bound communication over
gloo) and ``gemm_heavy`` (large matmuls, few parameters: compute-bound).  Always DDP with
plain SGD (a cheap optimizer step)."""


def is_local_model(model: str) -> TypeGuard[LocalModel]:
    """Whether ``model`` is one of the attribution-only workloads (not a ``training`` preset)."""
    return model in LOCAL_MODELS


AttributionModel = Literal[Model, LocalModel]
"""``training``'s presets and the attribution-only check workloads."""


ACCUM_MIN_RISE_PCT = 1.0
"""Default of ``accum_min_rise_pct``."""


@dataclass(kw_only=True, slots=True)
class AttributionConfig(WorkloadSettings):
    """Settings of the ``attribution`` benchmark; the workload settings are ``training``'s
    (``model`` may also be comm_heavy / gemm_heavy: attribution-only MLPs, DDP + SGD, built to
    be communication- and compute-bound as checks of the attribution)."""

    model: AttributionModel = "tiny"
    """Workload: a ``training`` preset, or comm_heavy / gemm_heavy (see above)."""
    warmup_steps: int = 3
    """Untimed steps before anything is timed (compilation, allocator, NCCL set-up)."""
    wait: int = 1
    """Profiler schedule: steps skipped after the profiler starts."""
    warmup: int = 2
    """Profiler schedule: steps traced but discarded (the profiler's own warm-up)."""
    active: int = 3
    """Profiler schedule: steps recorded and attributed; as many are timed without it."""
    keep_traces: bool = True
    """Keep every rank's trace in the run folder (traces/rank-NNNNN.pt.trace.json.gz)."""
    input_delay_ms: float = 0.0
    """Sleep this long per micro-batch before every step on every rank (k micro-batches: k
    times as long), as a slow input pipeline would: a planted cause that must come out
    coordination-bound (a check of the attribution)."""
    delay_rank: int = -1
    """Give this rank delay_ms of extra device work per step (a slower GPU): it must come
    out as the straggler.  -1: none."""
    delay_ms: float = 0.0
    """Extra device work per step on delay_rank."""
    accum_sweep: list[int] = field(default_factory=list)
    """Accumulation steps to profile the workload at, after the profile above (e.g. 1, 2, 4,
    8): each rank's idle and collective wait per iteration (one optimizer step of k
    micro-steps), from a trace per k (warmup + active steps each); empty: no sweep.  It runs
    on 2 or more ranks only: one rank has no collective to wait for (training's
    grad_accum_sweep likewise)."""
    accum_min_rise_pct: float = ACCUM_MIN_RISE_PCT
    """The sweep's statement: a rise of idle + wait past four accumulation steps is reported
    when it is beyond the noise and at least this many points of the iteration."""

    def __post_init__(self) -> None:
        if not is_local_model(self.model):
            self.training_config()  # the training settings' own checks (ranges, conflicts)
        for name in ("batch_size", "grad_accum", "active"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "wait", "warmup", "input_delay_ms", "delay_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.delay_rank < -1:
            raise ValueError(f"delay_rank must be a rank or -1 (none), got {self.delay_rank}")
        sweep = self.accum_sweep
        if any(k < 1 for k in sweep) or len(set(sweep)) < len(sweep):
            raise ValueError(f"accum_sweep entries must be distinct and >= 1, got {sweep}")
        if self.accum_min_rise_pct < 0:
            raise ValueError(f"accum_min_rise_pct must be >= 0, got {self.accum_min_rise_pct}")

    def training_config(self) -> TrainingConfig:
        """The ``training`` settings of the same workload."""
        return TrainingConfig(**self.workload_settings())  # type: ignore[arg-type]

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """The ``training`` preset's workload; a shorter profile on CPU; the accumulation sweep
        from the standard suite on (16 steps too in full)."""
        t = TrainingConfig.preset(suite=suite, device_type=device_type)
        short = device_type == "cpu"
        sweep = {"quick": [], "standard": [1, 2, 4, 8]}.get(suite, [1, 2, 4, 8, 16])
        return cls(
            **t.workload_settings(),  # type: ignore[arg-type]
            warmup_steps=2 if short else 10, wait=1, warmup=1 if short else 2,
            active=2 if short else 3, accum_sweep=sweep,
        )  # fmt: skip


def sweep_counts(cfg: AttributionConfig, *, world_size: int) -> list[int]:
    """The accumulation counts the sweep profiles: ``accum_sweep`` with 2 or more ranks, none
    with one (no collective waits for a slower rank there)."""
    return list(cfg.accum_sweep) if world_size > 1 else []
