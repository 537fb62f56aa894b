"""Pipeline parallelism for the decoder: torch.distributed.pipelining with the GPipe schedule.

Every rank builds the whole model and keeps only its stage (torchtitan's manual split): the
layers are cut into ``num_stages`` runs of near-equal length; the first stage keeps the token
embedding, the last the final norm and the LM head.  A step pushes ``num_microbatches``
microbatches through the pipeline (GPipe: all forwards, then all backwards; bubble
(S - 1) / (M + S - 1), Huang et al. 2019).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from clusterbench.benchmarks.training.blocks import make_optimizer, prepare_blocks
from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.benchmarks.training.settings import Case
from clusterbench.benchmarks.training.workload import Batch, Workload

__all__ = ["PipelineTrainer", "build_pipeline_trainer", "stage_layers"]

_AMP_DTYPES = {"bf16": torch.bfloat16}


def stage_layers(num_layers: int, *, num_stages: int, stage: int) -> range:
    """The layer indices of ``stage``: near-equal runs, the first stages one longer."""
    base, extra = divmod(num_layers, num_stages)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (1 if stage < extra else 0))


class _Autocast(nn.Module):
    """Runs the wrapped stage under autocast (the schedule calls the stage's forward itself)."""

    def __init__(self, inner: nn.Module, *, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.inner, self.device_type, self.dtype = inner, device_type, dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device_type, dtype=self.dtype):
            out: torch.Tensor = self.inner(x)
        return out


@dataclass(kw_only=True)
class PipelineTrainer:
    schedule: Any
    optimizer: torch.optim.Optimizer
    group: dist.ProcessGroup
    stage: int
    num_stages: int
    _loss: torch.Tensor | None = None

    def step(self, batches: list[Batch], *, sync: bool = True) -> None:
        inputs = torch.cat([b[0] for b in batches])
        targets = torch.cat([b[1] for b in batches])
        first, last = self.stage == 0, self.stage == self.num_stages - 1
        losses: list[torch.Tensor] = []
        args = (inputs,) if first else ()
        kwargs: dict[str, Any] = {"target": targets, "losses": losses} if last else {}
        self.schedule.step(*args, **kwargs)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if last:
            self._loss = torch.stack([loss.detach() for loss in losses]).mean()

    def last_loss(self) -> float:
        """The last stage's loss, broadcast over the pipeline group (every rank must call)."""
        device = next(iter(self.optimizer.param_groups[0]["params"])).device
        box = torch.full((1,), float("nan"), device=device)
        if self._loss is not None:
            box.fill_(float(self._loss))
        src = dist.get_global_rank(self.group, self.num_stages - 1)
        dist.broadcast(box, src=src, group=self.group)
        return float(box)


def build_pipeline_trainer(
    workload: Workload,
    *,
    case: Case,
    group: dist.ProcessGroup,
    device: torch.device,
    num_microbatches: int,
) -> PipelineTrainer:
    """This rank's stage of the decoder, its blocks prepared for ``case``, on a GPipe schedule."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    model = workload.model
    assert isinstance(model, Decoder)
    num_stages, stage = dist.get_world_size(group), dist.get_rank(group)
    _keep_stage(model, num_stages=num_stages, stage=stage)
    prepare_blocks(model, case=case, block_paths=workload.block_paths)
    module: nn.Module = model
    if case.precision in _AMP_DTYPES:
        module = _Autocast(model, device_type=device.type, dtype=_AMP_DTYPES[case.precision])
    pipe_stage = PipelineStage(module, stage, num_stages, device, group=group)
    schedule = ScheduleGPipe(pipe_stage, n_microbatches=num_microbatches, loss_fn=workload.loss_fn)
    return PipelineTrainer(
        schedule=schedule,
        optimizer=make_optimizer(list(model.parameters()), device=device),
        group=group,
        stage=stage,
        num_stages=num_stages,
    )


def _keep_stage(model: Decoder, *, num_stages: int, stage: int) -> None:
    keep = stage_layers(model.cfg.num_layers, num_stages=num_stages, stage=stage)
    for name in list(model.layers.keys()):
        if int(name) not in keep:
            del model.layers[name]
    if stage > 0:
        model.tok_embeddings = None
    if stage < num_stages - 1:
        model.norm = None
        model.output = None
