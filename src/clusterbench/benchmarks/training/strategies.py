"""Wrap a workload's model for a parallelism strategy on one process group, and train a step.

Strategies (all over the ranks of ``group``):

- ``ddp``: DistributedDataParallel, gradients all-reduced in buckets (gradient_as_bucket_view);
- ``fsdp2``: ``fully_shard`` on every block and the root, reshard after forward (ZeRO-3);
- ``zero2``: the same with reshard_after_forward=False (parameters stay gathered between forward
  and backward: ZeRO-2-like, as torch's FSDP2 documentation describes it);
- ``zero1``: DDP + ZeroRedundancyOptimizer (optimizer state sharded);
- ``tp``: DTensor tensor parallel, Megatron's column/row split of attention and MLP (decoders);
- ``pp``: torch.distributed.pipelining, GPipe schedule (see :mod:`.pipeline`).

The order of wrapping follows torchtitan: tensor parallel, activation checkpointing, compile,
then data parallel.  Mixed precision is autocast (+ GradScaler for fp16) for the DDP family and
tensor parallel, and FSDP2's MixedPrecisionPolicy (reduce in fp32) for fsdp2 / zero2.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from clusterbench.benchmarks.training.blocks import LR, iter_blocks, make_optimizer, prepare_blocks
from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.benchmarks.training.pipeline import build_pipeline_trainer
from clusterbench.benchmarks.training.settings import Case, Precision, case_conflict
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.runtime.precision import matmul_precision

# torch.distributed's tensor, FSDP and optim packages take most of a second to import: they
# are imported where a strategy needs them, not when the benchmarks are registered.
if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

__all__ = [
    "AMP_DTYPES",
    "DATA_PARALLEL",
    "StepTrainer",
    "Trainer",
    "build_trainer",
    "case_scope",
    "check_applicable",
    "gradient_bytes",
    "replicas_agree",
]

AMP_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}
DATA_PARALLEL: frozenset[str] = frozenset({"ddp", "zero1", "fsdp2", "zero2"})
"""Strategies whose step synchronises every gradient over the ranks (tp and pp do not)."""


class StepTrainer(Protocol):
    def step(self, batches: list[Batch], *, sync: bool = True) -> None:
        """One optimizer step over ``batches`` (one per accumulation micro-step).  sync=False
        skips the gradient synchronisation (compute-only timing; DDP family only)."""

    def last_loss(self) -> float:
        """The loss of the last step (a collective for pipelines: call on every group rank)."""


def check_applicable(workload: Workload, *, case: Case, group_size: int) -> str | None:
    """Why ``case`` cannot run on ``workload`` over ``group_size`` ranks (None: it can)."""
    reason = case_conflict(case, decoder=isinstance(workload.model, Decoder))
    if reason is not None:
        return reason
    if case.strategy == "tp" and isinstance(workload.model, Decoder):
        c = workload.model.cfg
        if c.num_kv_heads % group_size or c.ffn_dim % group_size:
            return f"kv heads {c.num_kv_heads} / ffn {c.ffn_dim} not divisible by {group_size}"
    if case.strategy == "tp" and case.precision == "fp16":
        # GradScaler's unscale takes one kind of tensor: DTensor and plain grads mixed fail
        return "tp: fp16 GradScaler cannot unscale DTensor and plain gradients together"
    if case.strategy == "pp":
        if case.precision == "fp16":
            return "pp: fp16 needs a GradScaler inside the pipeline schedule (not supported)"
        if isinstance(workload.model, Decoder) and workload.model.cfg.num_layers < group_size:
            return f"pp: fewer layers than the {group_size} stages"
    return None


@dataclass(kw_only=True)
class Trainer:
    """Forward, backward and optimizer step of a (wrapped) model; see :class:`StepTrainer`."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    device_type: str
    autocast_dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler | None = None
    sync_context: Callable[[bool], contextlib.AbstractContextManager[Any]] = field(
        default=lambda sync: contextlib.nullcontext()
    )
    cuda_graphs: bool = False
    _loss: torch.Tensor | None = None

    def step(self, batches: list[Batch], *, sync: bool = True) -> None:
        total = None
        for i, (inputs, targets) in enumerate(batches):
            if self.cuda_graphs:  # a new iteration: the graphs may reuse their earlier outputs
                torch.compiler.cudagraph_mark_step_begin()
            # DDP reduces gradients only on the last micro-step (no_sync on the others)
            with self.sync_context(sync and i == len(batches) - 1):
                with self._autocast():
                    loss = self.loss_fn(self.model(inputs), targets) / len(batches)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._loss = total

    def last_loss(self) -> float:
        return float("nan") if self._loss is None else float(self._loss)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)


_DYNAMO_SETTINGS = ("optimize_ddp", "automatic_dynamic_shapes", "recompile_limit")
"""Dynamo settings :func:`build_trainer` changes for compiled cases."""


@contextlib.contextmanager
def case_scope(precision: Precision) -> Iterator[None]:
    """Where a case is built and run: its matmul precision, and the Dynamo settings the
    strategies change, both restored afterwards (the next benchmark of the process sees
    PyTorch's defaults)."""
    dynamo = torch._dynamo.config
    saved = {name: getattr(dynamo, name) for name in _DYNAMO_SETTINGS}
    with matmul_precision(precision), dynamo.patch(saved):
        yield


def build_trainer(
    workload: Workload, *, case: Case, group: dist.ProcessGroup, device: torch.device,
    num_microbatches: int = 1,
) -> StepTrainer:  # fmt: skip
    """Wrap ``workload.model`` in place for ``case`` over ``group``; its trainer."""
    reason = check_applicable(workload, case=case, group_size=dist.get_world_size(group))
    if reason is not None:
        raise ValueError(reason)
    if case.strategy == "pp":
        return build_pipeline_trainer(
            workload, case=case, group=group, device=device, num_microbatches=num_microbatches
        )
    model = workload.model
    if case.strategy == "tp":
        from torch.distributed.device_mesh import DeviceMesh

        _apply_tensor_parallel(model, mesh=DeviceMesh.from_group(group, device.type))
    prepare_blocks(model, case=case, block_paths=workload.block_paths)
    if case.strategy in ("fsdp2", "zero2"):
        trainer = _fsdp_trainer(workload, case=case, group=group, device=device)
    else:
        trainer = _ddp_family_trainer(workload, case=case, group=group, device=device)
    if case.compile:
        # the loss too: for the 1.3b decoder its float32 logits and softmax took 9.7 of 272 ms
        # of kernel time per step (docs/results/H200-level3.md)
        trainer.loss_fn = torch.compile(trainer.loss_fn)
    return trainer


def _apply_tensor_parallel(model: nn.Module, *, mesh: DeviceMesh) -> None:
    """Megatron-LM's split (Shoeybi et al. 2019): q/k/v and w1/w3 by columns (heads / hidden
    units), wo and w2 by rows; one all-reduce after attention and one after the MLP."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan: dict[str, Any] = {
        **{f"attention.{w}": ColwiseParallel() for w in ("wq", "wk", "wv")},
        "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    }
    assert isinstance(model, Decoder)
    for block in model.layers.values():
        parallelize_module(block, mesh, plan)


def _amp(
    case: Case, device: torch.device
) -> tuple[torch.dtype | None, torch.amp.GradScaler | None]:
    dtype = AMP_DTYPES.get(case.precision)
    scaler = torch.amp.GradScaler(device.type) if case.precision == "fp16" else None
    return dtype, scaler


def replicas_agree(model: nn.Module, group: dist.ProcessGroup) -> bool:
    """Whether every rank of ``group`` holds bit-identical weights: after data-parallel steps
    (ddp, zero1) they must, else the gradients were not synchronised.  One float64 checksum
    per parameter, gathered from every rank."""
    params = [p for p in model.parameters()]
    if not params:
        return True
    sums = torch.stack([p.detach().to(torch.float64).sum() for p in params])
    gathered = [torch.empty_like(sums) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, sums, group=group)
    return all(torch.equal(g, gathered[0]) for g in gathered[1:])


def _ddp_family_trainer(
    workload: Workload, *, case: Case, group: dist.ProcessGroup, device: torch.device
) -> Trainer:
    model: nn.Module = workload.model
    sync_context: Callable[[bool], contextlib.AbstractContextManager[Any]]
    sync_context = lambda sync: contextlib.nullcontext()  # noqa: E731
    if case.strategy in ("ddp", "zero1"):
        if case.compile:
            # Dynamo's DDPOptimizer splits a compiled graph at DDP's bucket boundaries (25 MB)
            # so that a whole-model graph can overlap its all-reduces.  Our graphs are single
            # blocks, whose backward already ends at a block boundary; the split only breaks
            # their fusions: a 1.3b step took 322 ms on 2 H200s with it, 277 ms without, and
            # compiling the whole DDP model instead was slower too (docs/results/H200-level3.md).
            torch._dynamo.config.optimize_ddp = False
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            process_group=group,
            gradient_as_bucket_view=True,
        )
        model = ddp
        sync_context = lambda sync: contextlib.nullcontext() if sync else ddp.no_sync()  # noqa: E731
    params = list(model.parameters())
    optimizer: torch.optim.Optimizer
    if case.strategy == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        optimizer = ZeroRedundancyOptimizer(
            params, optimizer_class=torch.optim.AdamW, process_group=group, lr=LR,
            **({"fused": True} if device.type == "cuda" else {}),
        )  # fmt: skip
    else:
        optimizer = make_optimizer(params, device=device)
    dtype, scaler = _amp(case, device)
    return Trainer(
        model=model, optimizer=optimizer, loss_fn=workload.loss_fn, device_type=device.type,
        autocast_dtype=dtype, scaler=scaler, sync_context=sync_context,
        cuda_graphs=case.cuda_graphs,
    )  # fmt: skip


def _fsdp_dtypes(case: Case) -> tuple[torch.dtype | None, torch.dtype | None]:
    """(param_dtype, reduce_dtype) of the fsdp2 / zero2 MixedPrecisionPolicy: parameters in the
    compute dtype, gradients reduced in fp32 (torchtitan's default)."""
    amp = AMP_DTYPES.get(case.precision)
    return amp, torch.float32 if amp else None


def gradient_bytes(model: nn.Module, *, case: Case) -> int:
    """Bytes of the gradients one data-parallel step synchronises: every trainable parameter's
    element count times the size of the dtype its gradient is reduced in.  DDP (ddp, zero1)
    all-reduces gradients in the parameters' dtype (autocast leaves them float32); FSDP2
    (fsdp2, zero2) reduce-scatters in its policy's reduce_dtype, else its param_dtype, else the
    parameters' own (torch's MixedPrecisionPolicy rule).  A sharded parameter (DTensor) counts
    its whole (global) shape."""
    param_dtype, reduce_dtype = (
        _fsdp_dtypes(case) if case.strategy in ("fsdp2", "zero2") else (None, None)
    )
    return sum(
        p.numel() * (reduce_dtype or param_dtype or p.dtype).itemsize
        for p in model.parameters()
        if p.requires_grad
    )


def _fsdp_trainer(
    workload: Workload, *, case: Case, group: dist.ProcessGroup, device: torch.device
) -> Trainer:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    mesh = DeviceMesh.from_group(group, device.type)
    param_dtype, reduce_dtype = _fsdp_dtypes(case)
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    reshard = case.strategy == "fsdp2"  # False: zero2
    kwargs: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": reshard, "mp_policy": policy}
    for _, block, _ in iter_blocks(workload.model, workload.block_paths):
        fully_shard(block, **kwargs)
    root = fully_shard(workload.model, **kwargs)
    assert isinstance(root, FSDPModule)

    @contextlib.contextmanager
    def sync_context(sync: bool) -> Iterator[None]:
        root.set_requires_gradient_sync(sync)
        yield

    _, scaler = _amp(case, device)
    return Trainer(
        model=workload.model,
        optimizer=make_optimizer(list(workload.model.parameters()), device=device),
        loss_fn=workload.loss_fn,
        device_type=device.type,
        scaler=scaler,
        sync_context=sync_context,
    )
