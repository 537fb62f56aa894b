"""Print the short validation table of a run: the figures the GPU targets are about."""

from __future__ import annotations

import sys
from collections import defaultdict

from clusterbench import load_results
from clusterbench.benchmarks.checkpoint import CheckpointMetrics
from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.training.settings import TrainingMetrics
from clusterbench.benchmarks.transfer import TransferMetrics
from clusterbench.schema import Results

_T = TrainingMetrics
_KEPT = (
    _T.tokens_per_s_per_gpu, _T.samples_per_s_per_gpu, _T.mfu, _T.mfu_vs_gemm, _T.hfu,
    _T.scaling_efficiency, _T.peak_memory_gb, DataloaderMetrics.loader_samples_per_s,
    DataloaderMetrics.gpu_busy, DataloaderMetrics.step_samples_per_s, CheckpointMetrics.save_gbps,
    CheckpointMetrics.load_gbps, CheckpointMetrics.async_stall_pct,
)  # fmt: skip
_CASE_KEYS = ("series", "model", "strategy", "precision", "activation_checkpointing", "compile",
              "world_size", "dataset", "num_workers", "pin_memory", "format")  # fmt: skip


def main(path: str) -> None:
    results = load_results(path)
    rows: dict[str, list[float]] = defaultdict(list)
    for m in results.measurements:
        p = m.params
        if GemmMetrics.tflops_best.matches(m):
            rows[f"gemm best {p['dtype']} (TFLOP/s)"].append(m.value)
        elif MemoryMetrics.bandwidth.matches(m):
            rows[f"memory {p['op']} (GB/s)"].append(m.value)
        elif TransferMetrics.bandwidth.matches(m):
            rows[f"{p['direction']} {p['memory']} {p['numa']} (GB/s)"].append(m.value)
        elif TransferMetrics.p2p_bandwidth.matches(m):
            rows[f"p2p {p['mode']} (GB/s)"].append(m.value)
        elif TransferMetrics.pcie_link_gen.matches(m) or TransferMetrics.pcie_link_width.matches(m):
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


def _training_rows(results: Results, rows: dict[str, list[float]]) -> None:
    """Throughput, MFU, scaling per case; sweep fits; loader, busy and checkpoint figures."""
    for m in results.measurements:
        if not any(metric.matches(m) for metric in _KEPT):
            continue
        parts = [str(m.params[k]) for k in _CASE_KEYS if k in m.params]
        rows[f"{m.benchmark} {m.metric} {' '.join(parts)}"].append(m.value)


def _collective_rows(results: Results, rows: dict[str, list[float]]) -> None:
    """busbw at the largest size per op (back-to-back); 8-byte latency per op and mode."""
    largest: dict[str, tuple[int, float]] = {}
    for m in results.measurements:
        p = m.params
        size = int(p.get("size_bytes") or 0)
        if CollectivesMetrics.busbw.matches(m) and p.get("mode") == "back_to_back":
            key = f"{p['op']} busbw {p['group']} (GB/s)"
            if key not in largest or size > largest[key][0]:
                largest[key] = (size, m.value)
        elif CollectivesMetrics.latency_us.matches(m) and size <= 8:
            rows[f"{p['op']} {size} B latency {p['mode']} (us)"].append(m.value)
    for key, (size, value) in largest.items():
        shown = f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"
        rows[f"{key[:-7]} @{shown} (GB/s)"].append(value)


if __name__ == "__main__":
    main(sys.argv[1])
