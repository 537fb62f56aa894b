"""Record torch.profiler traces of a small DDP training job, one file per rank, as a team's own
job would write them (the recipe of docs/commands/analyze.md), for `clusterbench analyze`'s
tests and the cross-check with HolisticTraceAnalysis.

    python scripts/record_traces.py --out DIR                    # 2 CPU ranks, gloo
    python scripts/record_traces.py --out DIR --device cuda      # 1 rank per GPU, NCCL
    python scripts/record_traces.py --out DIR --slow-rank 1      # rank 1 sleeps 100 ms a step
    python scripts/record_traces.py --out DIR --slow-rank 1 --slow-every 2   # every 2nd step
    python scripts/record_traces.py --out DIR --input-ms 50 --slow-every 2   # a slow loader
    python scripts/record_traces.py --out DIR --plain            # no schedule: rank-N.json

Each rank trains a small MLP (DDP) for a torch.profiler schedule of wait 1, warmup 1, active
4 steps and writes HOST_PID.TIME.pt.trace.json(.gz) with tensorboard_trace_handler; with
--plain, the profiler runs over the whole loop without a schedule (no ProfilerStep spans) and
export_chrome_trace writes rank-N.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class _Batches(torch.utils.data.Dataset):
    """The same batch again, after ``delay_s`` for every ``every``-th one: a slow input
    pipeline that the profiler sees in the DataLoader's next()."""

    def __init__(self, x: torch.Tensor, *, delay_s: float, every: int) -> None:
        self.x, self.delay_s, self.every = x, delay_s, every

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> torch.Tensor:
        if (i + 1) % self.every == 0:
            time.sleep(self.delay_s)
        return self.x


def _rank(rank: int, world: int, args: argparse.Namespace, store: str) -> None:
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}",
                            rank=rank, world_size=world)  # fmt: skip
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    width = args.width
    model = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
    model = DDP(model.to(device), device_ids=[rank] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, width, device=device)
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=args.active, repeat=1)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    handler = torch.profiler.tensorboard_trace_handler(args.out, use_gzip=args.gzip)

    count = [0]
    batches = _Batches(x, delay_s=args.input_ms / 1e3, every=args.slow_every)
    loader = iter(torch.utils.data.DataLoader(batches, batch_size=None, num_workers=0))

    def step() -> None:
        count[0] += 1
        if rank == args.slow_rank and count[0] % args.slow_every == 0:
            time.sleep(args.slow_ms / 1e3)  # a straggler: the others wait at the all-reduce
        batch = next(loader) if args.input_ms else x
        loss = model(batch).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()

    if args.plain:
        for _ in range(2):
            step()  # warm-up, not profiled
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(4):
                step()
        prof.export_chrome_trace(str(Path(args.out) / f"rank-{rank}.json"))
    else:
        with torch.profiler.profile(activities=activities, schedule=schedule,
                                    on_trace_ready=handler) as prof:  # fmt: skip
            for _ in range(args.active + 3):
                step()
                prof.step()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--ranks", type=int, default=None, help="default: 2 on CPU, the GPUs")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-ms", type=float, default=100.0)
    parser.add_argument("--slow-every", type=int, default=1, help="delay every Nth step only")
    parser.add_argument(
        "--input-ms",
        type=float,
        default=0.0,
        help="every rank's DataLoader sleeps this long (every Nth step)",
    )
    parser.add_argument("--active", type=int, default=4, help="profiled steps (a schedule)")
    parser.add_argument("--gzip", action="store_true", help="write .pt.trace.json.gz")
    parser.add_argument("--plain", action="store_true", help="no schedule; rank-N.json")
    args = parser.parse_args()
    world = args.ranks or (torch.cuda.device_count() if args.device == "cuda" else 2)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank, args=(world, args, str(Path(tmp) / "store")), nprocs=world)
    for path in sorted(Path(args.out).iterdir()):
        print(f"{path} {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
