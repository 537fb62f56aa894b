"""What the ``training`` benchmark is asked for and what it emits: its settings (the workload
settings it shares with ``attribution``, and its own), the training cases, and
:class:`TrainingMetrics`, every metric it records.

Every measurement carries the case in its params (model, strategy, precision, world_size,
batch sizes, ...) and ``series``: ``scaling`` (one case per world size), ``sweep`` (every
combination at the largest world size), ``grad_accum`` (the accumulation sweep) or ``partition``
(the batch-size partition search, :mod:`.partition`; its own params: d, micro_batch, accum,
activation_checkpointing, global_batch, default).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.declared.training import (
    PARTITION_PREDICT_UP_TO,
    TrainingMetrics,
    default_world_sizes,
)
from clusterbench.model_shapes import DECODER_MODELS, Model
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "PRECISIONS",
    "SCALING_MODES",
    "STRATEGIES",
    "Case",
    "Precision",
    "ScalingMode",
    "Strategy",
    "TrainingConfig",
    "TrainingMetrics",
    "WorkloadSettings",
    "case_conflict",
    "default_world_sizes",
]

Strategy = Literal["ddp", "fsdp2", "zero2", "zero1", "tp", "pp"]
"""How the model is spread over the ranks (:mod:`.strategies`)."""
Precision = Literal["fp32", "tf32", "bf16", "fp16"]
"""fp32 (TF32 off), tf32, bf16 (autocast), fp16 (autocast and a GradScaler)."""
ScalingMode = Literal["weak", "strong"]
STRATEGIES: tuple[Strategy, ...] = typing.get_args(Strategy)
PRECISIONS: tuple[Precision, ...] = typing.get_args(Precision)
SCALING_MODES: tuple[ScalingMode, ...] = typing.get_args(ScalingMode)


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One training configuration."""

    strategy: Strategy
    precision: Precision
    activation_checkpointing: bool = False
    compile: bool = False
    cuda_graphs: bool = False
    """Compiled blocks replayed as CUDA graphs (mode="reduce-overhead"); ddp and zero1 only:
    sharded strategies move their parameters between steps, which graphs cannot follow."""


def case_conflict(case: Case, *, decoder: bool) -> str | None:
    """What rules ``case`` out whatever the world size (None: nothing); ``decoder``: whether
    the model is one of the decoder presets.  The settings check it up front, the sweep per
    combination."""
    if case.cuda_graphs and not case.compile:
        return "cuda_graphs needs compile=true (the graphs are torch.compile's)"
    if case.cuda_graphs and case.strategy not in ("ddp", "zero1"):
        return f"cuda_graphs runs with strategy ddp or zero1, not {case.strategy}"
    if case.strategy in ("tp", "pp") and not decoder:
        return f"strategy {case.strategy} needs a decoder model"
    return None


@dataclass(kw_only=True, slots=True)
class WorkloadSettings:
    """The workload and how it trains: the settings ``training`` and ``attribution`` share
    (``--set training.X`` sets both)."""

    model: str = "tiny"
    """Workload preset: tiny, 125m, 1.3b, 2b, 7b, 8b (Llama-style decoders), bert_tiny,
    bert_large (BERT pre-training, MLPerf's model), resnet50, vit_b_16 (torchvision);
    attribution also takes comm_heavy / gemm_heavy (each benchmark types its own names)."""
    strategy: Strategy = "ddp"
    """ddp, fsdp2 (ZeRO-3), zero2 (FSDP2 without reshard after forward), zero1
    (ZeroRedundancyOptimizer), tp (tensor parallel, decoders), pp (pipeline, decoders)."""
    precision: Precision = "bf16"
    """fp32 (TF32 off), tf32, bf16, fp16 (with a GradScaler)."""
    batch_size: int = 8
    """Samples per GPU per micro-step (tp / pp: the group trains batch_size x w samples)."""
    seq_len: int | None = None
    """Decoder or encoder sequence length; None: the preset's."""
    grad_accum: int = 1
    """Micro-steps per optimizer step (gradients synchronised on the last only)."""
    activation_checkpointing: bool = False
    """Recompute every block's forward in backward (non-reentrant torch.utils.checkpoint)."""
    compile: bool = False
    """torch.compile every block (one graph per block, as torchtitan does) and the loss."""
    cuda_graphs: bool = False
    """With compile, ddp or zero1, on GPUs: replay every compiled block as CUDA graphs
    (torch.compile's mode="reduce-overhead"), for steps bound by the host launching kernels
    (ResNet-50 compiled per block; docs/results/H200-level3.md).  No effect on CPU workers."""

    def workload_settings(self) -> dict[str, object]:
        """These fields by name (what a ``TrainingConfig`` of the same workload takes)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(WorkloadSettings)}


@dataclass(kw_only=True, slots=True)
class TrainingConfig(WorkloadSettings):
    """Settings of the ``training`` benchmark."""

    model: Model = "tiny"
    """Workload preset: tiny, 125m, 1.3b, 2b, 7b, 8b (Llama-style decoders), bert_tiny,
    bert_large (BERT pre-training, MLPerf's model), resnet50, vit_b_16 (torchvision)."""
    warmup_steps: int = 5
    """Untimed steps before the timed ones."""
    steps: int = 10
    """Timed optimizer steps (the cluster-benchmarking guide: 100 warm-up + 400 timed)."""
    world_sizes: list[int] = field(default_factory=list)
    """World sizes to train at; empty: 1, 2, 4, ... up to the world, and the world."""
    scaling_mode: ScalingMode = "weak"
    """weak: same work per GPU (E = X(N) / (N X(1))); strong: same global batch, reached by
    more accumulation at smaller sizes (E = t(1) / (N t(N)))."""
    sweep: bool = False
    """Also train every sweep_* combination at the largest world size; a combination that runs
    out of memory or fails is recorded as not fitting (metric fits = 0)."""
    sweep_strategies: list[Strategy] = field(default_factory=lambda: list(STRATEGIES))
    """Strategies of the sweep."""
    sweep_precisions: list[Precision] = field(default_factory=lambda: ["bf16", "fp16", "tf32"])
    """Precisions of the sweep."""
    sweep_activation_checkpointing: list[bool] = field(default_factory=lambda: [False, True])
    """Activation checkpointing settings of the sweep."""
    sweep_compile: list[bool] = field(default_factory=lambda: [False, True])
    """torch.compile settings of the sweep."""
    sweep_steps: int = 20
    """Timed steps per sweep or grad-accum case (warm-up: a quarter of it, at least 2)."""
    grad_accum_sweep: list[int] = field(default_factory=list)
    """Accumulation steps to compare (e.g. 1, 2, 4, 8) at the largest world size with DDP:
    synchronisation idle = step time - compute-only (no all-reduce) step time."""
    gemm_reference: bool = True
    """CUDA: time one 8192^3 matmul of the precision once, for mfu_vs_gemm."""
    partition: bool = False
    """Also search the partition of one global batch B into data-parallel size d (among the
    world sizes) x micro-batch m x accumulation k = B, with activation checkpointing on or off:
    each candidate that may fit the device memory is trained for a few steps (:mod:`.partition`);
    a data-parallel strategy only (ddp, zero1, fsdp2, zero2)."""
    partition_global_batch: int | None = None
    """Samples per optimizer step to partition; None: the workload's, batch_size x the largest
    world size x grad_accum.  It must be a multiple of batch_size x the largest world size,
    so that the default partition (the workload's batch_size at the largest world size) is
    one of the candidates."""
    partition_activation_checkpointing: list[bool] = field(default_factory=lambda: [False, True])
    """Activation checkpointing settings of the partition search."""
    partition_max_candidates: int = 48
    """At most this many candidates are trained: the default partition, then the largest
    data-parallel size's (largest micro-batch first) with their 1-rank twins, then the rest."""
    partition_steps: int = 8
    """Timed steps per partition candidate (warm-up: a quarter of it, at least 2); the
    recommendation's test needs 5 or more to reach p < 0.01."""
    partition_predict_up_to: int = PARTITION_PREDICT_UP_TO
    """Analysis predicts the time to batch of data-parallel sizes beyond the run's (the largest
    world size times 2, 4, ... dividing the global batch) up to this many GPUs."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum", "steps", "sweep_steps", "partition_steps",
                     "partition_max_candidates", "partition_predict_up_to"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.seq_len is not None and self.seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {self.seq_len}")
        if any(w < 1 for w in self.world_sizes) or any(k < 1 for k in self.grad_accum_sweep):
            raise ValueError("world_sizes and grad_accum_sweep entries must be >= 1")
        reason = case_conflict(self.case(), decoder=self.model in DECODER_MODELS)
        if reason is not None:
            raise ValueError(f"{reason} (model {self.model})")
        self._check_partition()

    def _check_partition(self) -> None:
        if self.partition_global_batch is not None and self.partition_global_batch < 1:
            raise ValueError(
                f"partition_global_batch must be >= 1, got {self.partition_global_batch}"
            )
        if self.partition and self.strategy in ("tp", "pp"):
            raise ValueError(
                f"partition needs a data-parallel strategy (ddp, zero1, fsdp2, zero2), not "
                f"{self.strategy}"
            )
        if self.partition and not self.partition_activation_checkpointing:
            raise ValueError("partition_activation_checkpointing needs at least one setting")

    def case(self) -> Case:
        return Case(
            strategy=self.strategy,
            precision=self.precision,
            activation_checkpointing=self.activation_checkpointing,
            compile=self.compile,
            cuda_graphs=self.cuda_graphs,
        )

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            return cls(
                model="tiny", precision="fp32", batch_size=4, warmup_steps=2, steps=4,
                sweep_precisions=["fp32", "bf16"], sweep_compile=[False], sweep_steps=4,
                grad_accum_sweep=[] if suite == "quick" else [1, 2, 4, 8],
                # a small search: 4 candidates of 5 steps (5 against 5 can reach p < 0.01)
                partition=suite != "quick", partition_activation_checkpointing=[False],
                partition_steps=5, partition_max_candidates=4,
            )  # fmt: skip
        if suite == "quick":
            return cls(model="125m", batch_size=8, warmup_steps=5, steps=10)
        full = suite == "full"
        # 1.3b, batch 8, bf16, compiled: the shape of docs/reference.md's GPT 1.3B baseline; this
        # preset reached 55.1% MFU on one H200 (docs/results/H200-level3.md)
        return cls(
            model="1.3b", batch_size=8, compile=True,
            warmup_steps=100 if full else 10, steps=400 if full else 40,  # seed: 100 + 400
            sweep=full, sweep_precisions=["bf16", "fp16", "tf32", "fp32"] if full else ["bf16"],
            grad_accum_sweep=[1, 2, 4, 8],
            # each candidate builds (and compiles) its model anew: 16 bound the search's time
            partition=full, partition_max_candidates=16,
        )  # fmt: skip
