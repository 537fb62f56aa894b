"""Print the short validation table of a run: the figures the GPU targets are about."""

from __future__ import annotations

import sys
from collections import defaultdict

from clusterbench import load_results


def main(path: str) -> None:
    results = load_results(path)
    rows: dict[str, list[float]] = defaultdict(list)
    for m in results.measurements:
        p = m.params
        if m.metric == "tflops_best":
            rows[f"gemm best {p['dtype']} (TFLOP/s)"].append(m.value)
        elif m.benchmark == "memory" and m.metric == "bandwidth":
            rows[f"memory {p['op']} (GB/s)"].append(m.value)
        elif m.benchmark == "transfer" and m.metric == "bandwidth":
            rows[f"{p['direction']} {p['memory']} {p['numa']} (GB/s)"].append(m.value)
        elif m.metric == "p2p_bandwidth":
            rows[f"p2p {p['mode']} (GB/s)"].append(m.value)
        elif m.metric in ("pcie_link_gen", "pcie_link_width"):
            rows[f"{m.metric} under load"].append(m.value)
    print(f"run {results.run.id}: status {results.run.status}, world {results.run.world_size}")
    print(f"{'figure':<36} {'min':>9} {'max':>9}  n")
    for name in sorted(rows):
        values = rows[name]
        print(f"{name:<36} {min(values):>9.1f} {max(values):>9.1f}  {len(values)}")
    for f in results.findings:
        print(f"[{f.severity}] {f.id}: {f.message}")
    for e in results.errors:
        print(f"[error] {e.message}")


if __name__ == "__main__":
    main(sys.argv[1])
