"""Where does a decoder training step go?  Variants of one step of a preset, timed with CUDA
events (median of 10 after 4 warm-up steps), one line each; ``-prof`` adds a kernel table.

    python3 scripts/probe_decoder.py block block-ddp block-ddp:optddp=0 whole+loss
    torchrun --nproc-per-node 2 scripts/probe_decoder.py block-ddp:optddp=0

Variants: ``block`` (every block and the loss compiled, as ``training.compile=true``),
``eager``, ``whole`` (model.compile()), ``whole+loss`` (model and loss in one compiled function),
``block-ropepairs`` (Meta's interleaved RoPE pairs instead of rotate-half), ``block-rmsmanual``
(RMSNorm written out instead of F.rms_norm), ``block-lossbf16`` (cross-entropy on bf16 logits),
``block-b4`` / ``block-b16`` (batch), ``block-ddp[:k=v...]``
(DistributedDataParallel; k: optddp=0 turns Dynamo's DDP graph splitting off, bucket_cap_mb,
static_graph, gradient_as_bucket_view, hook=bf16).  Env: PRESET (default 1.3b), FFN (SwiGLU
width override), OUT (where -prof writes its table and trace).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from clusterbench.benchmarks.training import decoder as dec
from clusterbench.benchmarks.training import models
from clusterbench.benchmarks.training.blocks import prepare_blocks
from clusterbench.benchmarks.training.settings import Case
from clusterbench.hardware.specs import match_spec

_SPEC = match_spec(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
PEAK = _SPEC.dense_tflops["bf16"] * 1e12 if _SPEC else math.nan  # dense bf16 of this GPU
PRESET = os.environ.get("PRESET", "1.3b")
OUT = os.environ.get("OUT", "/tmp")
if "FFN" in os.environ:
    models.DECODER_PRESETS[PRESET] = dataclasses.replace(
        models.DECODER_PRESETS[PRESET], ffn_dim=int(os.environ["FFN"])
    )


def rope_pairs(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    t = x.shape[-2]
    cos, sin = rope[0, :t].to(x.dtype), rope[1, :t].to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def rms_manual(self: dec.RMSNorm, x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


ORIGINAL = (dec.apply_rope, dec.RMSNorm.forward)


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def run(
    name: str, dev: torch.device, *, compile_mode: str = "block", ddp: dict[str, Any] | None = None,
    batch: int = 8, loss_bf16: bool = False, profile: bool = False, rope: Any = None,
    rms: Any = None,
) -> None:  # fmt: skip
    dec.apply_rope = rope or ORIGINAL[0]
    dec.RMSNorm.forward = rms or ORIGINAL[1]  # type: ignore[method-assign]
    torch._dynamo.reset()
    ddp = dict(ddp) if ddp is not None else None
    torch._dynamo.config.optimize_ddp = ddp is None or ddp.pop("optddp", 1) != 0
    torch.manual_seed(0)
    t0 = time.perf_counter()
    wl = models.build_workload(PRESET, device=dev)
    model = wl.model
    loss_fn = wl.loss_fn
    if compile_mode == "block":  # as the benchmark does: every block, and the loss
        case = Case(strategy="ddp", precision="bf16", compile=True)
        prepare_blocks(model, case=case, block_paths=wl.block_paths)
        loss_fn = torch.compile(loss_fn)
    elif compile_mode == "whole":
        model.compile()
    net = model
    if ddp is not None:
        hook = ddp.pop("hook", None)
        kw = {"gradient_as_bucket_view": True, **ddp}
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], **kw)
        if hook == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            net.register_comm_hook(None, default_hooks.bf16_compress_hook)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = net(x)
        if loss_bf16:
            return F.cross_entropy(logits.flatten(0, 1), y.flatten())
        return loss_fn(logits, y)

    if compile_mode == "whole+loss":
        loss_of = torch.compile(loss_of)
    x, y = wl.make_batch(batch)

    def step() -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    for _ in range(4):
        loss = step()
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    med = statistics.median(times)
    tok = batch * wl.tokens_per_sample / (med / 1e3)
    mfu = wl.flops_per_sample / wl.tokens_per_sample * tok / PEAK
    if is_main():
        label = name + (f" ffn={os.environ['FFN']}" if "FFN" in os.environ else "")
        print(
            f"{label:36s} step {med:7.1f} ms  tok/s {tok:9.0f}  MFU {100 * mfu:5.1f}%  "
            f"peak {torch.cuda.max_memory_allocated() / 1e9:5.1f} GB  loss {float(loss):.3f}  "
            f"setup {setup_s:5.1f}s",
            flush=True,
        )
    if profile:  # every rank profiles (DDP's collectives need them all)
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        if is_main():
            p.export_chrome_trace(f"{OUT}/trace-{name}.json")
            kernels = sorted(
                (e for e in p.key_averages() if e.device_type.name == "CUDA"),
                key=lambda e: -e.device_time_total,
            )
            total = sum(e.device_time_total for e in kernels)
            print(f"  GPU time per step {total / 3 / 1e3:.1f} ms")
            for e in kernels[:25]:
                ms = e.device_time_total / 3 / 1e3
                print(f"  {ms:7.2f} ms  x{e.count // 3:<4d} {e.key[:100]}")


def variant(name: str, dev: torch.device) -> None:
    base = name.removesuffix("-prof")
    kw: dict[str, Any] = {"profile": name.endswith("-prof")}
    if base.startswith("block-ddp"):
        ddp: dict[str, Any] = {}
        for part in base.split(":")[1:]:
            key, value = part.split("=")
            if key == "hook":
                ddp[key] = value
            elif key in ("static_graph", "gradient_as_bucket_view"):
                ddp[key] = value == "1"
            else:
                ddp[key] = int(value)
        kw["ddp"] = ddp
    else:
        kw.update(
            {
                "block": {},
                "eager": {"compile_mode": "none"},
                "whole": {"compile_mode": "whole"},
                "whole+loss": {"compile_mode": "whole+loss"},
                "block-ropepairs": {"rope": rope_pairs},
                "block-rmsmanual": {"rms": rms_manual},
                "block-lossbf16": {"loss_bf16": True},
                "block-b4": {"batch": 4},
                "block-b16": {"batch": 16},
            }[base]
        )
    run(name, dev, **kw)
    gc.collect()  # the run's model, optimizer and graphs are garbage now
    torch.cuda.empty_cache()


def main(names: list[str]) -> None:
    if "RANK" in os.environ:  # under torchrun
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        if any(n.startswith("block-ddp") for n in names):
            dist.init_process_group(
                "nccl", init_method="tcp://127.0.0.1:29561", rank=0, world_size=1, device_id=dev
            )
    for name in names:
        variant(name, dev)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:] or ["block"])
