"""Is a vision training step bound by the GPU or by the host that launches its kernels?

One step of a torchvision preset (bf16 autocast, fused AdamW, blocks and loss compiled as
``training.compile=true`` does, no DDP), timed two ways per step: the GPU's time between CUDA
events, and the host's time to issue the step (no synchronisation inside it).  Where the two
are about equal the host sets the pace.  Median and spread of 20 steps after 5 warm-up.

    python3 scripts/probe_vision.py                 # resnet50, batch 256
    PRESET=vit_b_16 BATCH=128 python3 scripts/probe_vision.py block block-cudagraphs

Variants: ``block`` (as the benchmark), ``block-cudagraphs`` (the blocks compiled with
``mode="reduce-overhead"``: CUDA graphs replay each block's kernels in one launch), ``eager``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch

from clusterbench.benchmarks.training import models
from clusterbench.benchmarks.training.blocks import prepare_blocks
from clusterbench.benchmarks.training.settings import Case

PRESET = os.environ.get("PRESET", "resnet50")
BATCH = int(os.environ.get("BATCH", "256"))


def run(name: str) -> None:
    torch._dynamo.reset()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    wl = models.build_workload(PRESET, device=dev)
    loss_fn = wl.loss_fn
    if name != "eager":  # the benchmark's own block compilation (and its Dynamo settings)
        case = Case(
            strategy="ddp", precision="bf16", compile=True, cuda_graphs=name == "block-cudagraphs"
        )
        prepare_blocks(wl.model, case=case, block_paths=wl.block_paths)
        loss_fn = torch.compile(loss_fn)
    opt = torch.optim.AdamW(wl.model.parameters(), lr=1e-4, fused=True)
    x, y = wl.make_batch(BATCH)

    def step() -> None:
        if name == "block-cudagraphs":  # a new iteration: earlier graph outputs may be reused
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(wl.model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    gpu_ms, host_ms = [], []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        step()
        host_ms.append((time.perf_counter() - t0) * 1e3)
        b.record()
        b.synchronize()
        gpu_ms.append(a.elapsed_time(b))
    med = statistics.median(gpu_ms)
    print(
        f"{PRESET} {name:18s} batch {BATCH}: GPU step {med:6.1f} ms (min {min(gpu_ms):5.1f}, "
        f"max {max(gpu_ms):5.1f}), host issue {statistics.median(host_ms):6.1f} ms, "
        f"{BATCH / med * 1e3:7.0f} img/s",
        flush=True,
    )


if __name__ == "__main__":
    for variant in sys.argv[1:] or ["block", "block-cudagraphs"]:
        run(variant)
        torch.cuda.empty_cache()  # the variant's model and graphs are garbage now
