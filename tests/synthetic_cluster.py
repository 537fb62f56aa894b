"""A synthetic run of a large cluster, built in Python: ``cluster_results(num_hosts=64,
gpus_per_host=8)`` has the measurements a standard-suite run of that many H200 nodes records
(GEMM, HBM, PCIe and GPU->GPU copies, collectives over the world, per node and per rail, the
node-pair network matrix, training scaling, the per-rank attribution, dataloader and
checkpoint), tens of thousands of them, with one slow node and one straggler rank.

For the HTML report's tests (correctness at that size) and ``scripts/report_size.py``
(its size and render time).  The numbers are made up but plausible; metric names, units and
params are the benchmarks' own.
"""

from __future__ import annotations

import random

from clusterbench.schema import (
    CpuInfo,
    Finding,
    GpuInfo,
    GpuSpecRef,
    HostInfo,
    Measurement,
    NicInfo,
    ParamValue,
    PCIeLink,
    Reference,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)

__all__ = ["cluster_results"]

_SPEC = GpuSpecRef(
    sku="H200 SXM",
    dense_tflops={"bf16": 989.0, "fp8": 1979.0, "fp32": 67.0},
    hbm_gbps=4800.0,
    nvlink_gbps_per_dir=450.0,
    pcie_gen=5,
    pcie_width=16,
    source="NVIDIA H200 datasheet",
)
_SIZES = [1 << s for s in range(10, 31, 2)]  # 1 KiB .. 1 GiB


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.out: list[Measurement] = []

    def add(
        self,
        benchmark: str,
        metric: str,
        unit: str,
        value: float,
        *,
        params: dict[str, ParamValue],
        host: str,
        rank: int,
        device: str,
        ref: tuple[float, str] | None = None,
        repeats: int = 0,
    ) -> None:
        stats = None
        if repeats:
            stats = Stats.from_samples(
                [value * (1 + self.rng.uniform(-0.01, 0.01)) for _ in range(repeats)]
            )
        reference = None
        if ref is not None:
            reference = Reference(value=ref[0], kind=ref[1], source="synthetic")  # type: ignore[arg-type]
        self.out.append(
            Measurement(
                benchmark=benchmark,
                metric=metric,
                unit=unit,
                value=value,
                params=params,
                host=host,
                rank=rank,
                device=device,
                stats=stats,
                reference=reference,
            )
        )

    def jitter(self, value: float, spread: float = 0.02) -> float:
        return value * (1 + self.rng.uniform(-spread, spread))


def _host(name: str, gpus: int, *, driver: str) -> HostInfo:
    return HostInfo(
        hostname=name,
        gpus=[
            GpuInfo(
                index=i,
                name="NVIDIA H200",
                memory_bytes=150_754_820_096,
                numa_node=i // 4,
                pci_bus_id=f"0000:{0x18 + 0x10 * i:02x}:00.0",
                spec=_SPEC,
                pcie=PCIeLink(gen=5, width=16, max_gen=5, max_width=16),
                nvlink_active=18,
            )
            for i in range(gpus)
        ],
        cpu=CpuInfo(
            model="Intel Xeon Platinum 8480+",
            sockets=2,
            cores=112,
            threads=224,
            numa_nodes={"0": "0-55,112-167", "1": "56-111,168-223"},
        ),
        nics=[
            *(
                NicInfo(
                    name=f"mlx5_{i}",
                    kind="infiniband",
                    state="ACTIVE",
                    rate_gbps=400.0,
                    link_layer="InfiniBand",
                    numa_node=i // 4,
                    port=1,
                )
                for i in range(gpus)
            ),
            NicInfo(name="eth0", kind="ethernet", state="up", rate_gbps=100.0),
        ],
        versions={
            "driver": driver,
            "nvml_cuda": "12.8",
            "cuda": "12.8",
            "torch": "2.13.0",
            "nccl": "2.27.3",
            "python": "3.11.7",
            "kernel": "6.8.0-60-generic",
            "clusterbench": "0.1.0",
        },
    )


def _per_device(b: _Builder, host: str, rank: int, gpu: int, slow: float) -> None:
    dev = f"cuda:{gpu}"
    at = {"host": host, "rank": rank, "device": dev}
    for dtype, peak in _SPEC.dense_tflops.items():
        shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 8192, 1024)]
        values = [b.jitter(peak * eff * slow) for eff in (0.72, 0.64, 0.55)]
        for (m, n, k), v in zip(shapes, values, strict=True):
            shape: dict[str, ParamValue] = {"dtype": dtype, "m": m, "n": n, "k": k}
            b.add("gemm", "tflops", "TFLOP/s", v, params=shape, **at, repeats=10)
        b.add(
            "gemm",
            "tflops_best",
            "TFLOP/s",
            max(values),
            params={"dtype": dtype, "m": 8192, "n": 8192, "k": 8192},
            **at,
            ref=(peak, "spec_peak"),
        )
        geomean = (values[0] * values[1] * values[2]) ** (1 / 3)
        b.add(
            "gemm",
            "tflops_geomean",
            "TFLOP/s",
            geomean,
            params={"dtype": dtype, "num_shapes": 3},
            **at,
        )
        b.add(
            "gemm",
            "rel_error",
            "ratio",
            b.jitter(2e-3 if dtype != "fp32" else 2e-7),
            params={"dtype": dtype, "tolerance": 1e-2},
            **at,
        )
    for op, eff in (("copy", 0.88), ("read", 0.92), ("write", 0.9)):
        b.add(
            "memory",
            "bandwidth",
            "GB/s",
            b.jitter(_SPEC.hbm_gbps * eff * slow),
            params={"op": op, "size_bytes": 4 << 30},
            **at,
            ref=(_SPEC.hbm_gbps, "spec_peak"),
            repeats=5,
        )
    for direction in ("h2d", "d2h"):
        b.add(
            "transfer",
            "bandwidth",
            "GB/s",
            b.jitter(55.0),
            params={
                "direction": direction,
                "memory": "pinned",
                "numa": "local",
                "size_bytes": 1 << 30,
            },
            **at,
            ref=(63.0, "link_rate"),
            repeats=5,
        )
    b.add("transfer", "pcie_link_gen", "gen", 5.0, params={"max_gen": 5}, **at)
    b.add("transfer", "pcie_link_width", "lanes", 16.0, params={"max_width": 16}, **at)


def _p2p(b: _Builder, host: str, rank0: int, gpus: int) -> None:
    for src in range(gpus):
        for dst in range(gpus):
            if src != dst:
                b.add(
                    "transfer",
                    "p2p_bandwidth",
                    "GB/s",
                    b.jitter(390.0),
                    params={
                        "src": src,
                        "dst": dst,
                        "mode": "oneway",
                        "p2p_access": True,
                        "size_bytes": 1 << 30,
                    },
                    host=host,
                    rank=rank0 + src,
                    device=f"cuda:{src}",
                    ref=(450.0, "spec_peak"),
                )


def _collectives(b: _Builder, hosts: list[str], gpus: int) -> None:
    world = len(hosts) * gpus
    groups: list[tuple[str, str, int, int, str]] = [("world", "world", world, 0, hosts[0])]
    groups += [(f"node{i}", "intra_node", gpus, i * gpus, h) for i, h in enumerate(hosts)]
    groups += [(f"rail{j}", "inter_node", len(hosts), j, hosts[0]) for j in range(gpus)]
    for name, kind, size, rank, host in (g for g in groups if g[2] > 1):
        link = 450.0 if kind == "intra_node" else 50.0  # NVLink per direction, IB 400 Gb/s
        for op, factor in (
            ("all_reduce", 2 * (size - 1) / size),
            ("all_gather", (size - 1) / size),
        ):
            for size_bytes in _SIZES:
                busbw = b.jitter(link * 0.85 * size_bytes / (size_bytes + (8 << 20)))
                algbw = busbw / factor
                params: dict[str, ParamValue] = {
                    "op": op,
                    "size_bytes": size_bytes,
                    "group": name,
                    "group_kind": kind,
                    "group_size": size,
                    "mode": "back_to_back",
                    "dtype": "bf16",
                }
                at = {"host": host, "rank": rank, "device": f"cuda:{rank % gpus}"}
                b.add("collectives", "busbw", "GB/s", busbw, params=params, **at, repeats=5)
                b.add("collectives", "algbw", "GB/s", algbw, params=params, **at)
                b.add(
                    "collectives",
                    "latency_us",
                    "us",
                    size_bytes / algbw / 1e3 + 8.0,
                    params=params,
                    **at,
                )


def _network(b: _Builder, hosts: list[str], gpus: int, slow_host: str) -> None:
    for i, src in enumerate(hosts):
        for dst in hosts:
            if src == dst:
                continue
            slow = 0.4 if slow_host in (src, dst) else 1.0
            params: dict[str, ParamValue] = {"src_host": src, "dst_host": dst, "loopback": False}
            at = {"host": src, "rank": i * gpus, "device": "cuda:0"}
            b.add(
                "network",
                "tcp_throughput",
                "Gb/s",
                b.jitter(92.0 * slow),
                params={**params, "streams": 8, "tool": "iperf3"},
                **at,
                ref=(100.0, "link_rate"),
            )
            b.add("network", "tcp_latency_us", "us", b.jitter(24.0 / slow), params=params, **at)


def _training(b: _Builder, hosts: list[str], gpus: int) -> None:
    sizes = [n * gpus for n in (1, 2, 4, 8, 16, 32, 64) if n <= len(hosts)]
    for world in sizes:
        eff = 1.0 - 0.012 * (world // gpus).bit_length()
        params: dict[str, ParamValue] = {
            "series": "scaling",
            "model": "llama-1.3b",
            "strategy": "fsdp",
            "precision": "bf16",
            "activation_checkpointing": False,
            "compile": True,
            "cuda_graphs": False,
            "world_size": world,
            "grad_accum": 1,
            "global_batch": 8 * world,
        }
        at = {"host": hosts[0], "rank": 0, "device": "cuda:0"}
        per_gpu = b.jitter(21000.0 * eff, 0.005)
        b.add("training", "tokens_per_s_per_gpu", "tokens/s", per_gpu, params=params, **at)
        b.add("training", "tokens_per_s", "tokens/s", per_gpu * world, params=params, **at)
        b.add("training", "step_time_ms", "ms", 8 * 2048 / per_gpu * 1e3, params=params, **at)
        b.add("training", "mfu", "%", 100 * 0.41 * eff, params=params, **at)
        b.add("training", "scaling_efficiency", "%", 100 * eff, params=params, **at)
        b.add("training", "peak_memory_gb", "GB", 61.5, params=params, **at)


def _attribution(b: _Builder, hosts: list[str], gpus: int, straggler: int) -> None:
    base: dict[str, ParamValue] = {
        "model": "llama-1.3b",
        "strategy": "fsdp",
        "precision": "bf16",
        "world_size": len(hosts) * gpus,
        "rank_step": "mean",
    }
    for rank in range(len(hosts) * gpus):
        at = {"host": hosts[rank // gpus], "rank": rank, "device": f"cuda:{rank % gpus}"}
        late = 9.0 if rank == straggler else b.jitter(0.3, 0.5)
        shares = {"compute": 62.0, "memory": 18.0, "communication": 11.0, "coordination": 9.0}
        if rank == straggler:
            shares = {"compute": 52.0, "memory": 16.0, "communication": 9.0, "coordination": 23.0}
        for metric, share in shares.items():
            b.add("attribution", metric, "%", b.jitter(share, 0.03), params=base, **at)
        b.add("attribution", "communication_overlapped", "%", b.jitter(6.0), params=base, **at)
        b.add("attribution", "step_time_ms", "ms", b.jitter(812.0, 0.01), params=base, **at)
        b.add("attribution", "collective_start_lateness_ms", "ms", late, params=base, **at)


def _dataloader_checkpoint(b: _Builder, hosts: list[str]) -> None:
    at = {"host": hosts[0], "rank": 0, "device": "cuda:0"}
    for workers in (0, 2, 4, 8, 16):
        for prefetch in (2, 4):
            params: dict[str, ParamValue] = {
                "num_workers": workers,
                "prefetch_factor": prefetch,
                "dataset": "synthetic_images",
            }
            rate = 900.0 * (1 + workers) ** 0.7 * (1 + 0.05 * prefetch)
            b.add(
                "dataloader",
                "loader_samples_per_s",
                "samples/s",
                b.jitter(rate),
                params=params,
                **at,
            )
    for fmt in ("torch", "safetensors", "dcp"):
        params = {"format": fmt, "size_bytes": 8 << 30, "num_ranks": 8}
        b.add("checkpoint", "save_gbps", "GB/s", b.jitter(3.1), params=params, **at)
        b.add("checkpoint", "load_gbps", "GB/s", b.jitter(5.4), params=params, **at)


def cluster_results(*, num_hosts: int = 64, gpus_per_host: int = 8, seed: int = 15) -> Results:
    """The run of ``num_hosts`` nodes of ``gpus_per_host`` H200 each; node ``num_hosts // 4``
    is slow (GEMM, HBM and its links), rank ``gpus_per_host + 3`` the training straggler, and
    the last node runs a different driver."""
    b = _Builder(seed)
    hosts = [f"gpu-node-{i:03d}" for i in range(num_hosts)]
    slow_host = hosts[num_hosts // 4]
    for i, host in enumerate(hosts):
        slow = 0.7 if host == slow_host else 1.0
        for gpu in range(gpus_per_host):
            _per_device(b, host, i * gpus_per_host + gpu, gpu, slow)
        _p2p(b, host, i * gpus_per_host, gpus_per_host)
    _collectives(b, hosts, gpus_per_host)
    _network(b, hosts, gpus_per_host, slow_host)
    _training(b, hosts, gpus_per_host)
    _attribution(b, hosts, gpus_per_host, straggler=gpus_per_host + 3)
    _dataloader_checkpoint(b, hosts)
    names = [
        "gemm",
        "memory",
        "transfer",
        "collectives",
        "network",
        "training",
        "dataloader",
        "checkpoint",
        "attribution",
    ]
    seconds = dict(
        zip(names, (41.0, 12.5, 30.2, 96.7, 210.4, 155.0, 44.1, 61.8, 72.3), strict=True)
    )
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(
            id="synthetic-64x8",
            started="2026-12-01T10:00:00+00:00",
            finished="2026-12-01T10:12:05+00:00",
            suite="standard",
            world_size=num_hosts * gpus_per_host,
            num_nodes=num_hosts,
            backend="nccl",
            command=f"srun -N {num_hosts} clusterbench run --suite standard",
            benchmarks=names,
            benchmark_seconds=seconds,
        ),
        hosts=[
            _host(h, gpus_per_host, driver="570.86.15" if h != hosts[-1] else "565.57.01")
            for h in hosts
        ],
        measurements=b.out,
        findings=[
            Finding(
                id="network.slow_node",
                severity="fail",
                scope=f"host:{slow_host}",
                message=f"TCP throughput to and from {slow_host} is 40% of its peers'",
                fix=f"check the NIC, cable and switch port of {slow_host}",
            ),
            Finding(
                id="gemm.peer_outlier",
                severity="warn",
                scope=f"host:{slow_host}",
                message=f"bf16 GEMM on {slow_host} runs at 70% of the other nodes'",
                fix="nvidia-smi -q -d PERFORMANCE: look for clock throttling",
            ),
            Finding(
                id="hosts.driver_mismatch",
                severity="warn",
                scope="run",
                message=f"{hosts[-1]} runs driver 565.57.01, the others 570.86.15",
                fix="install one driver version on every node",
            ),
            Finding(
                id="attribution.straggler",
                severity="info",
                scope=f"rank:{gpus_per_host + 3}",
                message="one rank starts its collectives 9 ms late",
                fix="",
            ),
        ],
    )
