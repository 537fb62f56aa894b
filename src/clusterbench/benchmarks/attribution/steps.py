"""The steps the ``attribution`` benchmark profiles: its own check workloads, the planted
delays, the profiled steps and the trace files (writing, reading back).

Its functions take plain arguments, not the benchmark's settings (attribution.py, which
holds them, imports this module).
"""

from __future__ import annotations

import gzip
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

from clusterbench.benchmarks.attribution.settings import LOCAL_MODELS, LocalModel, is_local_model
from clusterbench.benchmarks.training import cases
from clusterbench.benchmarks.training.blocks import LR
from clusterbench.benchmarks.training.strategies import Trainer
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.quiet import quiet_profiler
from clusterbench.runtime.timing import synchronize, wall_clock

__all__ = [
    "LOCAL_MODELS",
    "LocalModel",
    "Profiled",
    "build_step",
    "is_local_model",
    "load_trace_events",
    "local_trainer",
    "overhead_pct",
    "profile_steps",
    "trace_steps",
]


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


def _local_workload(name: LocalModel, *, device: torch.device) -> Workload:
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


def local_trainer(
    ctx: DistContext, name: LocalModel, *, batch_size: int, grad_accum: int
) -> tuple[Trainer, list[Batch]]:
    """The check workload ``name`` under DDP with plain SGD, and its ``grad_accum`` batches."""
    workload = _local_workload(name, device=ctx.device)
    ddp = DistributedDataParallel(
        workload.model,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        gradient_as_bucket_view=True,
        bucket_cap_mb=LOCAL_MODELS[name][3],
    )
    trainer = Trainer(
        model=ddp,
        optimizer=torch.optim.SGD(ddp.parameters(), lr=LR),
        loss_fn=workload.loss_fn,
        device_type=ctx.device.type,
    )
    return trainer, [workload.make_batch(batch_size) for _ in range(grad_accum)]


def build_step(
    ctx: DistContext,
    *,
    train: Callable[[], None],
    input_delay_ms: float,
    straggle_ms: float | None,
) -> Callable[[], None]:
    """One training step (``train``), planted delays first, then a device synchronize (so each
    step's kernels lie inside its ProfilerStep span).  ``input_delay_ms``: sleep first, as a
    slow input pipeline would; ``straggle_ms``: this rank's extra device work (None: none)."""
    straggle = _busy_delay(ctx, straggle_ms) if straggle_ms is not None else None

    def step() -> None:
        if input_delay_ms > 0:
            time.sleep(input_delay_ms / 1e3)  # idle, as if waiting for the next batch
        if straggle is not None:
            straggle()
        train()
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
    ctx: DistContext,
    *,
    step: Callable[[], None],
    trace: Path,
    warmup_steps: int,
    wait: int,
    warmup: int,
    active: int,
) -> Profiled:
    """Run ``warmup_steps``, time ``active`` steps without the profiler, then profile wait +
    warmup + active steps (the active ones timed too) and write the trace to ``trace`` (gzip)."""
    for _ in range(warmup_steps):
        step()
        ctx.progress.advance()
    plain = [wall_clock(step)[1] for _ in range(active)]  # the step synchronizes
    ctx.progress.advance(active)
    profiled = trace_steps(ctx, step=step, trace=trace, wait=wait, warmup=warmup, active=active)
    return Profiled(plain_s=plain, profiled_s=profiled, trace=trace)


def trace_steps(
    ctx: DistContext,
    *,
    step: Callable[[], None],
    trace: Path,
    wait: int,
    warmup: int,
    active: int,
    shapes: bool = True,
) -> list[float]:
    """Profile wait + warmup + active steps and write the trace to ``trace`` (gzip); the
    active steps' times.  ``shapes``: record the ops' input shapes and FLOPs (the roofline
    needs them; idle time does not, and the trace is smaller and faster without)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.is_cuda else [])
    trace.parent.mkdir(parents=True, exist_ok=True)
    profiled = []
    with (
        quiet_profiler(trace.parent / f"{trace.name}.stderr"),
        profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            record_shapes=shapes,
            with_flops=shapes,
            on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),  # .gz: gzip-compressed
        ) as prof,
    ):
        for i in range(wait + warmup + active):
            seconds = wall_clock(step)[1]
            if i >= wait + warmup:
                profiled.append(seconds)
            prof.step()
            ctx.progress.advance()
    return profiled


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
