"""The ``training`` benchmark (Level 3): real training steps at several world sizes.

For each world size w, ranks 0..w-1 train the workload with the chosen strategy (the others wait
at a barrier); group rank 0 records step time, throughput per GPU and in total, MFU (and HFU
with activation checkpointing), peak memory and the final loss, then weak (or strong) scaling
efficiency against w = 1.  Optionally a sweep over strategy x precision x activation
checkpointing x compile at the largest world size (Megatron-LM's scripts' table: throughput
and memory, or "does not fit"), and a gradient-accumulation sweep of the synchronisation idle.
Measurements carry ``series``: ``scaling``, ``sweep`` or ``grad_accum``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch.distributed as dist

from clusterbench.benchmarks._settings import check_suite
from clusterbench.benchmarks.registry import register
from clusterbench.benchmarks.training import cases, sweeps
from clusterbench.benchmarks.training.models import DECODER_PRESETS, PRESETS
from clusterbench.benchmarks.training.strategies import PRECISIONS, STRATEGIES, Case, case_conflict
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "SCALING_MODES",
    "TrainingConfig",
    "WorkloadSettings",
    "default_world_sizes",
    "training",
]

SCALING_MODES = ("weak", "strong")


@dataclass(kw_only=True, slots=True)
class WorkloadSettings:
    """The workload and how it trains: the settings ``training`` and ``attribution`` share
    (``--set training.X`` sets both)."""

    model: str = "tiny"
    """Workload preset: tiny, 125m, 1.3b, 2b, 7b, 8b (Llama-style decoders), bert_tiny,
    bert_large (BERT pre-training, MLPerf's model), resnet50, vit_b_16 (torchvision);
    attribution also takes comm_heavy / gemm_heavy (its own checks)."""
    strategy: str = "ddp"
    """ddp, fsdp2 (ZeRO-3), zero2 (FSDP2 without reshard after forward), zero1
    (ZeroRedundancyOptimizer), tp (tensor parallel, decoders), pp (pipeline, decoders)."""
    precision: str = "bf16"
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

    warmup_steps: int = 5
    """Untimed steps before the timed ones."""
    steps: int = 10
    """Timed optimizer steps (the seed: 100 warm-up + 400 timed)."""
    world_sizes: list[int] = field(default_factory=list)
    """World sizes to train at; empty: 1, 2, 4, ... up to the world, and the world."""
    scaling_mode: str = "weak"
    """weak: same work per GPU (E = X(N) / (N X(1))); strong: same global batch, reached by
    more accumulation at smaller sizes (E = t(1) / (N t(N)))."""
    sweep: bool = False
    """Also train every sweep_* combination at the largest world size; a combination that runs
    out of memory or fails is recorded as not fitting (metric fits = 0)."""
    sweep_strategies: list[str] = field(default_factory=lambda: list(STRATEGIES))
    """Strategies of the sweep."""
    sweep_precisions: list[str] = field(default_factory=lambda: ["bf16", "fp16", "tf32"])
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

    def __post_init__(self) -> None:
        _choice("model", self.model, PRESETS)
        _choice("strategy", self.strategy, STRATEGIES)
        _choice("precision", self.precision, PRECISIONS)
        _choice("scaling_mode", self.scaling_mode, SCALING_MODES)
        for s in self.sweep_strategies:
            _choice("sweep strategy", s, STRATEGIES)
        for p in self.sweep_precisions:
            _choice("sweep precision", p, PRECISIONS)
        for name in ("batch_size", "grad_accum", "steps", "sweep_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.seq_len is not None and self.seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {self.seq_len}")
        if any(w < 1 for w in self.world_sizes) or any(k < 1 for k in self.grad_accum_sweep):
            raise ValueError("world_sizes and grad_accum_sweep entries must be >= 1")
        reason = case_conflict(self.case(), decoder=self.model in DECODER_PRESETS)
        if reason is not None:
            raise ValueError(f"{reason} (model {self.model})")

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
        )  # fmt: skip


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r} (choose from {', '.join(choices)})")


def default_world_sizes(world_size: int) -> list[int]:
    """1, 2, 4, ... up to ``world_size``, and ``world_size`` itself."""
    sizes = [1 << i for i in range(world_size.bit_length())]
    return sorted({*sizes, world_size})


def _world_sizes(cfg: TrainingConfig, world_size: int) -> list[int]:
    sizes = sorted(set(cfg.world_sizes)) or default_world_sizes(world_size)
    if sizes[-1] > world_size:
        raise ValueError(f"world_sizes {sizes} exceed the world size {world_size}")
    if cfg.scaling_mode == "strong" and any(sizes[-1] % w for w in sizes):
        raise ValueError(f"strong scaling needs every world size to divide {sizes[-1]}: {sizes}")
    return sizes


@dataclass(frozen=True, slots=True)
class _Group:
    size: int
    pg: dist.ProcessGroup
    owned: bool
    """Created here (destroyed at the end), not the world group."""


def _make_groups(ctx: DistContext, sizes: list[int]) -> dict[int, _Group]:
    """Ranks 0..w-1 for each w; every rank creates every group, in the same order (torch)."""
    out = {}
    for w in sizes:
        if w == ctx.world_size:
            assert dist.group.WORLD is not None
            out[w] = _Group(w, dist.group.WORLD, owned=False)
        else:
            out[w] = _Group(w, dist.new_group(list(range(w))), owned=True)
    return out


@register("training", level=3, scope="workload", config=TrainingConfig)
def training(ctx: DistContext, cfg: TrainingConfig) -> Iterator[Measurement]:
    """Training throughput, MFU, memory and scaling efficiency of a model and strategy."""
    sizes = _world_sizes(cfg, ctx.world_size)
    groups = _make_groups(ctx, sizes)
    largest = groups[sizes[-1]]
    sweep_cases = cases.sweep_cases(cfg) if cfg.sweep else []
    ctx.progress.start(len(sizes) + len(sweep_cases) + len(cfg.grad_accum_sweep))
    outcomes: dict[int, cases.Outcome] = {}
    for w in sizes:
        ga = cfg.grad_accum * (sizes[-1] // w if cfg.scaling_mode == "strong" else 1)
        if ctx.rank < w:
            outcome = cases.run_case(
                ctx, cfg, case=cfg.case(), group=groups[w].pg, grad_accum=ga, series="scaling"
            )
            outcomes[w] = outcome
            yield from outcome.measurements
        ctx.progress.advance()
        ctx.barrier()
    if ctx.rank == 0:
        yield from cases.scaling_measurements(ctx, cfg, outcomes=outcomes)
    if ctx.rank < largest.size:
        for case in sweep_cases:
            yield from sweeps.run_sweep_case(ctx, cfg, case=case, group=largest.pg)
            ctx.progress.advance()
        if largest.size > 1:
            yield from sweeps.grad_accum_sweep(ctx, cfg, group=largest.pg)
    ctx.barrier()  # every rank is done with every group before any is destroyed
    for g in groups.values():
        if g.owned:
            dist.destroy_process_group(g.pg)
