"""The attribution benchmark's moving parts: its workload and trainer, the planted delays, the
profiled steps and the trace files (writing, reading back)."""

from __future__ import annotations

import gzip
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

from clusterbench.benchmarks.training import cases
from clusterbench.benchmarks.training.strategies import LR, Trainer
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import synchronize, wall_clock

if TYPE_CHECKING:
    from clusterbench.benchmarks.attribution import AttributionConfig

__all__ = ["LOCAL_MODELS", "Profiled", "build_step", "load_trace_events", "profile_steps"]

LOCAL_MODELS = {
    # name: (width, layers or parameters, rows per sample, DDP bucket MB)
    "comm_heavy": (1024, 1 << 22, 1, 0.0625),
    "gemm_heavy": (1024, 2, 128, 25.0),
}
"""Attribution-only workloads to check the classification: ``comm_heavy`` (4.2 M parameters in
256 tensors, only summed into a scale: almost no compute, then 256 all-reduces of 64 KB, one
bucket each: latency-bound communication over gloo) and ``gemm_heavy`` (large matmuls, few
parameters: compute-bound).  Always DDP with plain SGD (a cheap optimizer step)."""
_DELAY_MATMUL = 256


@dataclass(frozen=True, slots=True)
class Profiled:
    plain_s: list[float]
    """Step times without the profiler."""
    profiled_s: list[float]
    """Step times of the profiler's active steps."""
    trace: Path


class _SummedScale(nn.Module):
    _NUM_TENSORS = 256

    def __init__(self, size: int) -> None:
        super().__init__()
        chunk = size // self._NUM_TENSORS
        self.weights = nn.ParameterList(
            nn.Parameter(torch.full((chunk,), 1.0 / size)) for _ in range(self._NUM_TENSORS)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.stack([w.sum() for w in self.weights]).sum()


def _local_workload(name: str, *, device: torch.device) -> Workload:
    """gemm_heavy: a stack of square linear layers, each sample ``rows`` input rows;
    comm_heavy: inputs times the sum of ``size`` parameters (gradients as large as the model
    for almost no work)."""
    width, size, rows, _ = LOCAL_MODELS[name]
    torch.manual_seed(cases.SEED)
    with torch.device(device):
        layers = [_SummedScale(size)] if name == "comm_heavy" else [
            nn.Linear(width, width) for _ in range(size)
        ]  # fmt: skip
        model = nn.Sequential(*layers)
    num_params = sum(p.numel() for p in model.parameters())

    def make_batch(batch_size: int) -> Batch:
        x = torch.randn(batch_size * rows, width, device=device)
        return x, torch.zeros_like(x)

    return Workload(
        name=name, kind="encoder", model=model, make_batch=make_batch, loss_fn=F.mse_loss,
        flops_per_sample=6.0 * num_params * rows, flops_formula="6 x parameters x rows",
    )  # fmt: skip


def _local_trainer(ctx: DistContext, workload: Workload) -> Trainer:
    ddp = DistributedDataParallel(
        workload.model,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        gradient_as_bucket_view=True,
        bucket_cap_mb=LOCAL_MODELS[workload.name][3],
    )
    return Trainer(
        model=ddp,
        optimizer=torch.optim.SGD(ddp.parameters(), lr=LR),
        loss_fn=workload.loss_fn,
        device_type=ctx.device.type,
    )


def build_step(ctx: DistContext, cfg: AttributionConfig) -> Callable[[], None]:
    """One training step of the configured workload, planted delays first, then a device
    synchronize (so each step's kernels lie inside its ProfilerStep span)."""
    if cfg.model in LOCAL_MODELS:
        workload = _local_workload(cfg.model, device=ctx.device)
        trainer: Any = _local_trainer(ctx, workload)
        batches = [workload.make_batch(cfg.batch_size) for _ in range(cfg.grad_accum)]
    else:
        assert dist.group.WORLD is not None
        training = cfg.training_config()
        _, trainer, batches = cases.setup_case(
            ctx, training, case=training.case(), group=dist.group.WORLD,
            grad_accum=cfg.grad_accum,
        )  # fmt: skip
    straggle = _busy_delay(ctx, cfg.delay_ms) if ctx.rank == cfg.delay_rank else None

    def step() -> None:
        if cfg.input_delay_ms > 0:
            time.sleep(cfg.input_delay_ms / 1e3)  # idle, as if waiting for the next batch
        if straggle is not None:
            straggle()
        trainer.step(batches)
        synchronize(ctx.device)

    return step


def _busy_delay(ctx: DistContext, delay_ms: float) -> Callable[[], None]:
    """Device work of about ``delay_ms`` (a slower GPU): a spin kernel on CUDA, matmuls on CPU."""
    if ctx.is_cuda:
        cycles_per_ms = _spin_cycles_per_ms(ctx.device)
        return lambda: torch.cuda._sleep(int(delay_ms * cycles_per_ms))
    a = torch.randn(_DELAY_MATMUL, _DELAY_MATMUL)

    def spin() -> None:
        deadline = time.perf_counter() + delay_ms / 1e3
        while time.perf_counter() < deadline:
            torch.mm(a, a)

    return spin


def _spin_cycles_per_ms(device: torch.device) -> float:
    cycles = 10_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm-up
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize(device)
    return cycles / max(start.elapsed_time(end), 1e-3)


def profile_steps(
    ctx: DistContext, cfg: AttributionConfig, *, step: Callable[[], None], trace: Path
) -> Profiled:
    """Warm up, time ``active`` steps without the profiler, then profile wait + warmup +
    active steps (the active ones timed too) and write the trace to ``trace`` (gzip)."""
    for _ in range(cfg.warmup_steps):
        step()
        ctx.progress.advance()
    plain = [wall_clock(step)[1] for _ in range(cfg.active)]  # the step synchronizes
    ctx.progress.advance(cfg.active)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.is_cuda else [])
    trace.parent.mkdir(parents=True, exist_ok=True)
    profiled = []
    with profile(
        activities=activities,
        schedule=schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1),
        record_shapes=True,
        with_flops=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),  # .gz: gzip-compressed
    ) as prof:
        for i in range(cfg.wait + cfg.warmup + cfg.active):
            seconds = wall_clock(step)[1]
            if i >= cfg.wait + cfg.warmup:
                profiled.append(seconds)
            prof.step()
            ctx.progress.advance()
    return Profiled(plain_s=plain, profiled_s=profiled, trace=trace)


def overhead_pct(p: Profiled) -> float:
    """(median profiled step - median plain step) / median plain step x 100."""
    plain = statistics.median(p.plain_s)
    return 100.0 * (statistics.median(p.profiled_s) - plain) / plain


def load_trace_events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Chrome/Kineto trace (no traceEvents list)")
    return events
