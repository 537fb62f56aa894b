"""A DataLoader worker started by spawn against one started by fork, inside a spawned process
(as the benchmark's ranks are): seconds to the first batch and batches a second after it.

    python3 scripts/loader_start_method.py [--batches N]

Each case runs in its own spawned process; a loader with one worker decodes nothing (a small
random tensor reduced per sample), so the figures are the start method's, not the data's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset


class _Samples(Dataset[torch.Tensor]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.randn(3, 64, 64).sum(0)


def _case(context: str, batches: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    start = time.perf_counter()
    loader = DataLoader(_Samples(16 * (batches + 1)), batch_size=16, num_workers=1,
                        multiprocessing_context=context)  # fmt: skip
    it = iter(loader)
    next(it)
    first = time.perf_counter() - start
    t0 = time.perf_counter()
    n = sum(1 for _ in it)
    out.put((first, n / (time.perf_counter() - t0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")
    print("workers   first batch s (median)   batches/s (median)")
    for context in ("spawn", "fork"):
        firsts, rates = [], []
        for _ in range(args.repeats):
            out = spawn.Queue()
            rank = spawn.Process(target=_case, args=(context, args.batches, out))
            rank.start()
            first, rate = out.get(timeout=300)
            rank.join()
            firsts.append(first)
            rates.append(rate)
        print(f"{context:8s}  {statistics.median(firsts):20.3f}   {statistics.median(rates):18.0f}")


if __name__ == "__main__":
    main()
