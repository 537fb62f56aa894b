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
    _collective_rows(results, rows)
    _training_rows(results, rows)
    print(f"run {results.run.id}: status {results.run.status}, world {results.run.world_size}")
    print(f"{'figure':<46} {'min':>9} {'max':>9}  n")
    for name in sorted(rows):
        values = rows[name]
        print(f"{name:<46} {min(values):>9.1f} {max(values):>9.1f}  {len(values)}")
    for info in results.nccl:
        print(f"nccl rank {info.rank}: transports {info.transports} networks {info.networks}")
    for f in results.findings:
        print(f"[{f.severity}] {f.id}: {f.message}")
    for e in results.errors:
        print(f"[error] {e.message}")


def _training_rows(results: object, rows: dict[str, list[float]]) -> None:
    """Throughput, MFU, scaling per case; sweep fits; loader, busy and checkpoint figures."""
    keep = {
        "tokens_per_s_per_gpu",
        "samples_per_s_per_gpu",
        "mfu",
        "mfu_vs_gemm",
        "hfu",
        "scaling_efficiency",
        "peak_memory_gb",
        "loader_samples_per_s",
        "gpu_busy",
        "step_samples_per_s",
        "save_gbps",
        "load_gbps",
        "async_stall_pct",
    }
    for m in results.measurements:  # type: ignore[attr-defined]
        if m.benchmark not in ("training", "dataloader", "checkpoint") or m.metric not in keep:
            continue
        p = m.params
        parts = [
            str(p[k])
            for k in (
                "series",
                "model",
                "strategy",
                "precision",
                "activation_checkpointing",
                "compile",
                "world_size",
                "dataset",
                "num_workers",
                "pin_memory",
                "format",
            )
            if k in p
        ]
        rows[f"{m.benchmark} {m.metric} {' '.join(parts)}"].append(m.value)


def _collective_rows(results: object, rows: dict[str, list[float]]) -> None:
    """busbw at the largest size per op (back-to-back); 8-byte latency per op and mode."""
    largest: dict[str, tuple[int, float]] = {}
    for m in results.measurements:  # type: ignore[attr-defined]
        if m.benchmark != "collectives":
            continue
        p = m.params
        size = int(p.get("size_bytes") or 0)
        if m.metric == "busbw" and p.get("mode") == "back_to_back":
            key = f"{p['op']} busbw {p['group']} (GB/s)"
            if key not in largest or size > largest[key][0]:
                largest[key] = (size, m.value)
        elif m.metric == "latency_us" and size <= 8:
            rows[f"{p['op']} {size} B latency {p['mode']} (us)"].append(m.value)
    for key, (size, value) in largest.items():
        shown = f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"
        rows[f"{key[:-7]} @{shown} (GB/s)"].append(value)


if __name__ == "__main__":
    main(sys.argv[1])
