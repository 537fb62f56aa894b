"""What does one telemetry poll cost?  Times the sampler's poll (the reader's NVML calls, the
sample kept in memory, its CSV row written and flushed) ``--polls`` times and prints the NVML
calls one poll makes, the median and 99th-percentile time of a poll, and that time as a share
of the sampling interval.  Without ``--nvml`` the reader reads the tests' stand-in NVML (the
cost of clusterbench's own Python); with it, GPU ``--gpu`` through the real driver.

    python scripts/telemetry_cost.py                  # the stand-in
    python scripts/telemetry_cost.py --nvml --gpu 0   # on a GPU machine
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fake_nvml

from tests.fake_nvml import FakeNvml

from clusterbench.hardware.gpu_telemetry import NvmlReader, open_reader
from clusterbench.runtime.telemetry import TelemetrySampler

_SERIES: dict[str, list[Any]] = {
    "sm": [1980, 1590], "mem": [2619], "power_mw": [450_000, 700_000], "limit_mw": [700_000],
    "temp": [60, 70], "reasons": [0, 4], "used": [10**9],
    "field_t_us": [1_700_000_000_000_000 + i * 100_000 for i in range(100_000)],
    "pcie_tx": list(range(0, 10**12, 10**7)), "pcie_rx": list(range(0, 10**12, 10**7)),
    "nvlink_tx": list(range(0, 10**10, 10**5)), "nvlink_rx": list(range(0, 10**10, 10**5)),
    "pcie_kbps_tx": [0], "pcie_kbps_rx": [0],
}  # fmt: skip


class _Counting:
    """The NVML module with every call counted."""

    def __init__(self, nvml: Any) -> None:
        self._nvml, self.calls = nvml, 0
        self.NVMLError = nvml.NVMLError

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._nvml, name)
        if not callable(fn) or not name.startswith("nvml"):
            return fn

        def counted(*args: Any) -> Any:
            self.calls += 1
            return fn(*args)

        return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds, for the share")
    parser.add_argument("--nvml", action="store_true", help="the real NVML, not the stand-in")
    parser.add_argument("--gpu", type=int, default=0)
    args = parser.parse_args()
    if args.nvml:
        import pynvml

        pynvml.nvmlInit()
        nvml = _Counting(pynvml)
        opened = open_reader(args.gpu, amd=False, nvml=nvml)
        if isinstance(opened, str):
            sys.exit(f"telemetry_cost: {opened}")
        reader = opened
    else:
        nvml = _Counting(FakeNvml(series=_SERIES))
        reader = NvmlReader(nvml, nvml.nvmlDeviceGetHandleByIndex(0))
    with tempfile.TemporaryDirectory() as tmp:
        sampler = TelemetrySampler(reader, interval_s=args.interval, rank=0, host="h",
                                   device=f"cuda:{args.gpu}", run_dir=Path(tmp))  # fmt: skip
        sampler.open_series()
        sampler.begin("cost")
        sampler.poll()  # the first poll learns what the GPU does not support
        times, calls = [], []
        for _ in range(args.polls):
            before = nvml.calls
            t0 = time.perf_counter()
            sampler.poll()
            times.append(time.perf_counter() - t0)
            calls.append(nvml.calls - before)
        sampler.stop()
    times.sort()
    median, p99 = statistics.median(times), times[int(0.99 * (len(times) - 1))]
    what = f"GPU {args.gpu} through NVML" if args.nvml else "the stand-in NVML"
    print(f"{what}: {statistics.median(calls):g} NVML calls per poll")
    print(f"one poll: median {median * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us over {args.polls}")
    print(f"share of a {args.interval:g} s interval: {median / args.interval:.3%}")


if __name__ == "__main__":
    main()
