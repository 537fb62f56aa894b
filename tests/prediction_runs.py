"""Runs made up for the prediction's tests, from known links and a known workload: the
collectives' back-to-back all_reduce sweeps of every group level timed by the alpha-beta
model (with multiplicative noise), the training scaling series timed by the step-time model
itself, the gradient bytes and the attribution's overlap, on hosts of H200s with their NICs.

What the prediction recovers from such a run can be checked against the values put in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from clusterbench.analyses.prediction.comm_model import cost_s
from clusterbench.analyses.prediction.inputs import assumed_fit
from clusterbench.analyses.prediction.scaling_model import Links, Strategy, Workload, predict_step
from clusterbench.benchmarks.attribution import AttributionMetrics as A
from clusterbench.benchmarks.collectives import CollectivesMetrics as C
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.hardware.specs import match_spec, to_spec_ref
from clusterbench.metrics import Metric
from clusterbench.schema import (
    GpuInfo,
    HostInfo,
    Measurement,
    NicInfo,
    ParamValue,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)

__all__ = [
    "COMPUTE_S",
    "GRAD_BYTES",
    "INTER",
    "INTRA",
    "SIZES",
    "make",
    "model_steps",
    "run_of",
]

INTRA = (5e-6, 1 / 200e9)
"""(alpha s, beta s/B) of the intra-node link: 5 us, 200 GB/s busbw."""
INTER = (12e-6, 1 / 20e9)
"""...of one rail across nodes: 12 us, 20 GB/s (a node of 8 rails: 1280 Gb/s)."""
COMPUTE_S = 0.2
GRAD_BYTES = 2.6e9
"""650M parameters' float32 gradients."""
SIZES = [2**e for e in range(3, 31)]  # 8 B .. 1 GiB
_H200 = match_spec("NVIDIA H200")
assert _H200 is not None


def make(
    metric: Metric,
    value: float,
    *,
    rank: int = 0,
    host: str = "node0",
    device: str = "cuda:0",
    samples: int | None = None,
    **params: ParamValue,
) -> Measurement:
    stats = None
    if samples is not None:
        stats = Stats(samples=samples, median=value, min=value, max=value, mean=value, cv=0.0)
    return Measurement(
        benchmark=metric.benchmark, metric=metric.name, value=value, unit=metric.unit,
        params=params, rank=rank, host=host, device=device, stats=stats,
    )  # fmt: skip


def sweep(
    group: str, kind: str, *, p: int, link: tuple[float, float], host: str, rank: int,
    rng: np.random.Generator, noise: float,
) -> list[Measurement]:  # fmt: skip
    """latency_us of a back-to-back all_reduce sweep of ``group`` (and a blocking one, 20%
    slower, which the fit must leave out)."""
    out = []
    alpha, beta = link
    for n in SIZES:
        t = cost_s("all_reduce", p=p, size_bytes=n, alpha_s=alpha, beta_s_per_byte=beta)
        for mode, factor in (
            ("back_to_back", 1.0 + noise * rng.standard_normal()),
            ("blocking", 1.2),
        ):
            params: dict[str, ParamValue] = {
                "op": "all_reduce", "size_bytes": n, "group": group, "group_kind": kind,
                "group_size": p, "mode": mode, "dtype": "bf16",
            }  # fmt: skip
            out.append(make(C.latency_us, t * factor * 1e6, host=host, rank=rank, **params))
    return out


def model_steps(
    world_sizes: Sequence[int], *, gpus_per_node: int, strategy: Strategy = "ddp",
    compute_s: float = COMPUTE_S, grad_bytes: float = GRAD_BYTES, overlap: float = 0.2,
) -> dict[int, float]:  # fmt: skip
    """The step seconds the model gives at each world size with the true links."""
    links = Links(
        gpus_per_node=gpus_per_node,
        intra=assumed_fit(*INTRA) if gpus_per_node > 1 else None,
        inter=assumed_fit(*INTER),
    )
    w = Workload(compute_s=compute_s, grad_bytes=grad_bytes, overlap=overlap)
    return {n: predict_step(w, links, world_size=n, strategy=strategy).step_s for n in world_sizes}


def _hosts(num_nodes: int, gpus: int, *, nics: int, nic_gbps: float | None) -> list[HostInfo]:
    spec = to_spec_ref(_H200)  # type: ignore[arg-type]
    return [
        HostInfo(
            hostname=f"node{i}",
            gpus=[GpuInfo(index=g, name="NVIDIA H200", spec=spec) for g in range(gpus)],
            nics=[
                NicInfo(name=f"mlx5_{j}", kind="infiniband", rate_gbps=nic_gbps, state="ACTIVE")
                for j in range(nics)
            ],
        )
        for i in range(num_nodes)
    ]


def run_of(
    *,
    num_nodes: int = 2,
    gpus_per_node: int = 8,
    world_sizes: Sequence[int] | None = None,
    steps_s: Mapping[int, float] | None = None,
    strategy: str = "ddp",
    model: str = "1.3b",
    grad_bytes: float | None = GRAD_BYTES,
    overlap_pairs: Sequence[tuple[float, float]] | None = ((4.0, 16.0),) * 3,
    collectives: bool = True,
    intra_slowdown: Mapping[int, float] | None = None,
    rail_slowdown: Mapping[int, float] | None = None,
    nics: int = 8,
    nic_gbps: float | None = 400.0,
    cpu: bool = False,
    noise: float = 0.01,
    seed: int = 0,
) -> Results:
    """A run of ``num_nodes`` x ``gpus_per_node``: training at ``world_sizes`` (default 1, 2,
    4, ... up to the world) with the model's step times (or ``steps_s``), gradient bytes and
    attribution (overlapped, exposed) per rank, collectives of every group level (node ``i``'s
    beta times ``intra_slowdown[i]``, rail ``j``'s times ``rail_slowdown[j]``)."""
    rng = np.random.default_rng(seed)
    world = num_nodes * gpus_per_node
    sizes = list(world_sizes or [1 << i for i in range(world.bit_length()) if 1 << i <= world])
    modelled: Strategy = "fsdp" if strategy in ("fsdp2", "fsdp") else "ddp"
    steps = dict(steps_s or model_steps(sizes, gpus_per_node=gpus_per_node, strategy=modelled))
    device = "cpu:0" if cpu else "cuda:0"
    ms: list[Measurement] = []
    for w in sizes:
        case: dict[str, ParamValue] = {
            "model": model, "strategy": strategy, "precision": "bf16", "world_size": w,
            "batch_size": 8, "global_batch": 8 * w, "grad_accum": 1,
            "activation_checkpointing": False, "compile": False, "cuda_graphs": False,
            "seq_len": 2048, "series": "scaling",
        }  # fmt: skip
        ms.append(make(T.step_time_ms, 1e3 * steps[w], device=device, samples=10, **case))
        if grad_bytes is not None and strategy not in ("tp", "pp"):
            ms.append(make(T.gradient_bytes, grad_bytes, device=device, **case))
        if w > 1:
            eff = 100 * steps[1] / steps[w] if 1 in steps else 100.0
            ms.append(make(T.scaling_efficiency, eff, device=device, scaling_mode="weak", **case))
    if collectives:
        ms += _collective_sweeps(num_nodes, gpus_per_node, rng=rng, noise=noise,
                                 intra_slowdown=intra_slowdown or {},
                                 rail_slowdown=rail_slowdown or {})  # fmt: skip
    for rank, (over, exposed) in enumerate(overlap_pairs or ()):
        params: dict[str, ParamValue] = {
            "model": model, "strategy": strategy, "world_size": world, "rank_step": "mean",
        }  # fmt: skip
        ms.append(make(A.communication_overlapped, over, rank=rank, device=device, **params))
        ms.append(make(A.communication_exposed, exposed, rank=rank, device=device, **params))
    run = RunInfo(
        id="predicted", started="2026-12-01T10:00:00+00:00", suite="standard",
        world_size=world, num_nodes=num_nodes, backend="gloo" if cpu else "nccl",
        command="clusterbench run", benchmarks=["collectives", "training", "attribution"],
    )  # fmt: skip
    hosts = _hosts(num_nodes, 0 if cpu else gpus_per_node, nics=nics, nic_gbps=nic_gbps)
    return Results(tool=ToolInfo(version="0.1.0"), run=run, hosts=hosts, measurements=ms)


def _collective_sweeps(
    num_nodes: int, g: int, *, rng: np.random.Generator, noise: float,
    intra_slowdown: Mapping[int, float], rail_slowdown: Mapping[int, float],
) -> list[Measurement]:  # fmt: skip
    ms: list[Measurement] = []
    world = num_nodes * g
    if num_nodes == 1:
        if world > 1:
            ms += sweep("world", "world", p=world, link=INTRA, host="node0", rank=0, rng=rng,
                        noise=noise)  # fmt: skip
        return ms
    # the world spans nodes: a mix of both links, which the prediction must not fit
    mixed = (INTRA[0], INTER[1])
    ms += sweep("world", "world", p=world, link=mixed, host="node0", rank=0, rng=rng, noise=noise)
    for i in range(num_nodes):
        if g > 1:
            link = (INTRA[0], INTRA[1] * intra_slowdown.get(i, 1.0))
            ms += sweep(f"node{i}", "intra_node", p=g, link=link, host=f"node{i}", rank=i * g,
                        rng=rng, noise=noise)  # fmt: skip
    for j in range(g):
        link = (INTER[0], INTER[1] * rail_slowdown.get(j, 1.0))
        ms += sweep(f"rail{j}", "inter_node", p=num_nodes, link=link, host="node0", rank=j,
                    rng=rng, noise=noise)  # fmt: skip
    return ms
