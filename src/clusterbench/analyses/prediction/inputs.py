"""What the run's scaling prediction (:mod:`.prediction`) reads from a run, and where each
figure came from: measured, fitted, assumed (a stated default) or given (on the command line).

- Links: alpha-beta fits (:mod:`.comm_model`) of the collectives benchmark's back-to-back
  ``all_reduce`` sweeps, per group level. Intra-node: the ``intra_node`` groups (one per node),
  or on one node the ``world`` group; inter-node: the rails (``inter_node``, one per local rank
  across nodes, measured all at once). Every group is fitted and kept; the slowest of a level
  (largest beta) is the one used. A level not measured is assumed: intra-node from the GPU
  spec, inter-node from the hosts' NIC inventory (else 400 Gb/s per node).
- The training scaling series: median step time per world size, the model and strategy.
- Gradient bytes: ``training.gradient_bytes`` (older runs: a decoder preset's parameter count).
- Overlap: attribution's communication_overlapped / (overlapped + exposed), median over ranks.

No I/O here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from clusterbench.analyses.prediction.comm_model import Fit, collectives_fit
from clusterbench.analyses.prediction.scaling_model import Strategy, beta_for_node_gbps
from clusterbench.declared.attribution import AttributionMetrics
from clusterbench.declared.collectives import CollectivesMetrics
from clusterbench.declared.training import TrainingMetrics
from clusterbench.metrics import Metric
from clusterbench.model_shapes import DECODER_PRESETS
from clusterbench.schema import Measurement, Results

__all__ = [
    "ASSUMED_INTER_ALPHA_S",
    "ASSUMED_INTRA_ALPHA_S",
    "DEFAULT_GPUS_PER_NODE",
    "DEFAULT_NIC_GBPS",
    "Kind",
    "Link",
    "NoPrediction",
    "Quantity",
    "TrainingSeries",
    "assumed_fit",
    "assumed_intra",
    "gpus_per_node",
    "gradient_bytes",
    "inter_for",
    "inter_link",
    "measured_links",
    "nic_node_gbps",
    "overlap",
    "ranks_per_node",
    "slowest",
    "training_series",
]

Kind = Literal["measured", "fitted", "assumed", "given"]
"""Where a figure came from: measured in the run, fitted to the run's measurements through the
model, assumed (a stated default: every figure resting on one is marked), given by the user."""

ASSUMED_INTRA_ALPHA_S = 7e-6
"""Intra-node latency per ring step when not measured: docs/reference.md's 13-14 us all_reduce
of 8 B on 2 H200s (NV18), over its 2(p-1) = 2 ring steps."""
ASSUMED_INTER_ALPHA_S = 10e-6
"""Inter-node latency per ring step when not measured: an assumption (docs/reference.md has no
measured inter-node latency; at gradient sizes the alpha terms are small)."""
DEFAULT_GPUS_PER_NODE = 8
"""GPUs per node predicted for when the run has one per node (an HGX / DGX node's eight)."""
DEFAULT_NIC_GBPS = 400.0
"""Inter-node Gb/s per node when neither measured nor in the NIC inventory (one NDR NIC)."""
_RDMA_KINDS = frozenset({"infiniband", "roce", "efa"})
_DOWN_STATES = frozenset({"down", "disabled", "polling", "init", "armed", "dormant"})
_MODELLED: dict[str, Strategy] = {
    "ddp": "ddp",
    "zero1": "ddp",  # DDP's all_reduce; only the optimizer state is sharded
    # FSDP2 without reshard after forward: one all_gather and one reduce_scatter per step,
    # the volume (and ring terms) of one all_reduce
    "zero2": "ddp",
    "fsdp2": "fsdp",
    "fsdp": "fsdp",
}


class NoPrediction(ValueError):
    """Why no prediction can be made from a run (one line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One link's alpha and beta, and where they came from."""

    level: Literal["intra", "inter"]
    fit: Fit
    kind: Kind
    source: str
    """One line: the group and sweep it was fitted on, or what was assumed and its source."""
    group: str | None = None
    """The measured group (world, node0, rail0); None when not measured."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantity:
    """One workload figure and where it came from."""

    value: float
    kind: Kind
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSeries:
    """The training benchmark's scaling series of one case."""

    model: str
    strategy: str
    """As trained (ddp, fsdp2, zero2, zero1, ...)."""
    modelled: Strategy
    step_s: dict[int, float]
    """World size -> median step seconds."""
    num_steps: int | None
    """Timed steps behind each median (None: not recorded)."""
    on_cpu: bool
    measurements: tuple[Measurement, ...]
    """The series' step_time_ms measurements."""

    @property
    def unit(self) -> str:
        """What one device is: "GPU", or "rank" for CPU workers."""
        return "rank" if self.on_cpu else "GPU"

    def same_case(self, m: Measurement) -> bool:
        return m.params.get("model") == self.model and m.params.get("strategy") == self.strategy


def assumed_fit(alpha_s: float, beta_s_per_byte: float) -> Fit:
    """A link known only by assumption: no points, zero covariance and residuals, so its band
    is zero (dof 1 only so that the prediction interval is that point, not unbounded)."""
    return Fit(
        op="all_reduce", algorithm="ring", p=2, alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte,
        alpha_stderr_s=0.0, beta_stderr_s_per_byte=0.0, sizes_bytes=(), times_s=(),
        residuals_s=(), rel_sigma=0.0, dof=1, covariance=((0.0, 0.0), (0.0, 0.0)),
    )  # fmt: skip


def _all_reduce_groups(results: Results) -> dict[str, str]:
    """Group -> group kind, of every back-to-back all_reduce sweep, in the order measured."""
    out: dict[str, str] = {}
    for m in CollectivesMetrics.latency_us.select(results):
        p = m.params
        if p.get("op") == "all_reduce" and p.get("mode") == "back_to_back":
            out.setdefault(str(p.get("group")), str(p.get("group_kind")))
    return out


def measured_links(results: Results) -> tuple[list[Link], list[str]]:
    """Every measured group's link fit (intra-node and inter-node), and a note for each group
    that could not be fitted."""
    single_node = results.run.num_nodes <= 1
    links, notes = [], []
    for group, kind in _all_reduce_groups(results).items():
        if kind == "intra_node" or (kind == "world" and single_node):
            level: Literal["intra", "inter"] = "intra"
        elif kind == "inter_node":
            level = "inter"
        else:
            continue  # a world over several nodes mixes both links; node pairs are for finding
        try:
            fit = collectives_fit(results, op="all_reduce", group=group)
        except ValueError as exc:
            notes.append(f"group {group}: no alpha-beta fit ({exc})")
            continue
        source = (
            f"measured: all_reduce back-to-back sweep of {group} ({fit.p} ranks, "
            f"{len(fit.sizes_bytes)} sizes)"
        )
        links.append(Link(level=level, fit=fit, kind="measured", source=source, group=group))
    return links, notes


def assumed_intra(results: Results) -> Link | None:
    """The intra-node link from the GPUs' spec (the slowest host's): the all_reduce busbw
    healthy nodes of that SKU reach where the spec table has it (no collective reaches the
    raw NVLink rate), else the NVLink rate per direction; alpha :data:`ASSUMED_INTRA_ALPHA_S`.
    None: no GPU with a spec, or one without NVLink."""
    options: list[tuple[float, str]] = []
    for host in results.hosts:
        for gpu in host.gpus:
            spec = gpu.spec
            if spec is None:
                continue
            achievable = spec.busbw_achievable.get("all_reduce")
            if achievable:
                what = f"the all_reduce busbw healthy {spec.sku} reach ({spec.busbw_source})"
                options.append((achievable, what))
            elif spec.nvlink_gbps_per_dir:
                what = f"{spec.sku} NVLink per direction ({spec.source})"
                options.append((spec.nvlink_gbps_per_dir, what))
    if not options:
        return None
    gbps, what = min(options)
    source = (
        f"assumed: {gbps:g} GB/s, {what}; alpha {ASSUMED_INTRA_ALPHA_S * 1e6:g} us "
        "(all_reduce of 8 B on 2 H200s, 13-14 us over 2 ring steps: docs/reference.md)"
    )
    fit = assumed_fit(ASSUMED_INTRA_ALPHA_S, 1.0 / (gbps * 1e9))
    return Link(level="intra", fit=fit, kind="assumed", source=source)


def inter_link(gbps: float, *, gpus_per_node: int, alpha_s: float, kind: Kind, source: str) -> Link:
    """An inter-node link of ``gbps`` per node shared by its ``gpus_per_node`` rails."""
    fit = assumed_fit(alpha_s, beta_for_node_gbps(gbps, gpus_per_node=gpus_per_node))
    return Link(level="inter", fit=fit, kind=kind, source=source)


def slowest(links: Sequence[Link], level: str) -> Link | None:
    """The link of ``level`` with the largest beta (the slowest), None without one."""
    of_level = [link for link in links if link.level == level]
    return max(of_level, key=lambda link: link.fit.beta_s_per_byte) if of_level else None


def inter_for(
    results: Results, *, measured: Link | None, gpus_per_node: int, nic_gbps: float | None
) -> Link:
    """The inter-node link: the measured (slowest rail's) fit, unless a NIC speed is given
    (kept: the measured alpha); else the NIC inventory's rate, else the default 400 Gb/s per
    node, with the assumed alpha."""
    if nic_gbps is not None:
        if not (nic_gbps > 0 and math.isfinite(nic_gbps)):
            raise ValueError(f"--nic-gbps must be > 0, got {nic_gbps}")
        alpha = measured.fit.alpha_s if measured else ASSUMED_INTER_ALPHA_S
        alpha_from = "the measured rails'" if measured else "assumed"
        source = f"given: {nic_gbps:g} Gb/s per node; alpha {alpha * 1e6:.3g} us ({alpha_from})"
        return inter_link(
            nic_gbps, gpus_per_node=gpus_per_node, alpha_s=alpha, kind="given", source=source
        )
    if measured is not None:
        return measured
    inventory = nic_node_gbps(results)
    gbps, what = inventory or (DEFAULT_NIC_GBPS, "the default: no NIC of the run reports a rate")
    alpha = ASSUMED_INTER_ALPHA_S
    source = f"assumed: {gbps:g} Gb/s per node, {what}; alpha {alpha * 1e6:g} us (assumed)"
    return inter_link(
        gbps, gpus_per_node=gpus_per_node, alpha_s=alpha, kind="assumed", source=source
    )


def nic_node_gbps(results: Results) -> tuple[float, str] | None:
    """The slowest node's inter-node Gb/s from the NIC inventory: its RDMA NICs' rates summed
    (InfiniBand, RoCE, EFA), else its ethernet NICs' (links that are up, rate known)."""
    per_host: list[tuple[float, str]] = []
    for host in results.hosts:
        up = [n for n in host.nics if n.rate_gbps and (n.state or "up").lower() not in _DOWN_STATES]
        rdma = [n for n in up if n.kind in _RDMA_KINDS]
        chosen = rdma or [n for n in up if n.kind == "ethernet"]
        if chosen:
            total = sum(n.rate_gbps or 0.0 for n in chosen)
            what = "RDMA" if rdma else "ethernet"
            per_host.append((total, f"{len(chosen)} {what} NIC(s) of {host.hostname}"))
    if not per_host:
        return None
    total, what = min(per_host)
    return total, f"from the NIC inventory: {what} (the slowest node)"


def ranks_per_node(results: Results) -> int:
    """The run's ranks (GPUs, or CPU workers) per node."""
    return max(1, results.run.world_size // max(1, results.run.num_nodes))


def gpus_per_node(results: Results, given: int | None, unit: str) -> tuple[int, str]:
    """GPUs per node to predict for, and where the figure came from: given, the run's, or
    :data:`DEFAULT_GPUS_PER_NODE` when the run had one per node."""
    if given is not None:
        if isinstance(given, bool) or given < 1:
            raise ValueError(f"--gpus-per-node must be >= 1, got {given}")
        return given, "given"
    run = ranks_per_node(results)
    if run > 1:
        return run, f"the run's {run} {unit}s per node"
    return DEFAULT_GPUS_PER_NODE, (
        f"assumed {DEFAULT_GPUS_PER_NODE}: the run has one {unit} per node"
    )


def training_series(results: Results) -> TrainingSeries:
    """The scaling series of the run's training case (the first recorded)."""
    ms = [
        m
        for m in TrainingMetrics.step_time_ms.select(results)
        if m.params.get("series", "scaling") == "scaling"
    ]
    if not ms:
        raise NoPrediction(
            "no training scaling series in the run (clusterbench run --only "
            "training,collectives,attribution measures what the prediction needs)"
        )
    first = ms[0]
    keys = ("model", "strategy", "precision", "batch_size", "activation_checkpointing",
            "compile", "cuda_graphs")  # fmt: skip
    case = [m for m in ms if all(m.params.get(k) == first.params.get(k) for k in keys)]
    model, strategy = str(first.params.get("model")), str(first.params.get("strategy"))
    modelled = _MODELLED.get(strategy)
    if modelled is None:
        raise NoPrediction(
            f"strategy {strategy}: the model covers data parallelism only (ddp, zero1, zero2, "
            "fsdp2), not tensor or pipeline parallelism"
        )
    strong = any(
        m.params.get("scaling_mode") == "strong"
        for m in TrainingMetrics.scaling_efficiency.select(results)
    )
    if strong or len({m.params.get("grad_accum") for m in case}) > 1:
        raise NoPrediction(
            "the training series is strong scaling (the per-GPU work changes with the world "
            "size); the model predicts weak scaling: run with training.scaling_mode=weak"
        )
    step_s: dict[int, float] = {}
    for m in case:
        w = m.params.get("world_size")
        if isinstance(w, int) and not isinstance(w, bool) and w not in step_s:
            step_s[w] = m.value / 1e3
    return TrainingSeries(
        model=model, strategy=strategy, modelled=modelled, step_s=dict(sorted(step_s.items())),
        num_steps=first.stats.samples if first.stats is not None else None,
        on_cpu=first.device.startswith("cpu"), measurements=tuple(case),
    )  # fmt: skip


def gradient_bytes(results: Results, series: TrainingSeries) -> Quantity:
    """The series' recorded gradient bytes; for runs from before the metric, a decoder
    preset's parameter count x 4 B (every strategy reduced float32 gradients then)."""
    recorded = [m for m in TrainingMetrics.gradient_bytes.select(results) if series.same_case(m)]
    if recorded:
        return Quantity(
            value=recorded[0].value,
            kind="measured",
            source=f"measured: training.gradient_bytes of {series.model} {series.strategy}",
        )
    preset = DECODER_PRESETS.get(series.model)  # type: ignore[call-overload]
    if preset is None:
        raise NoPrediction(
            f"the run records no training.gradient_bytes (an older clusterbench) and model "
            f"{series.model} has no parameter count here: run training again"
        )
    params = preset.num_params_without_embedding() + preset.vocab_size * preset.dim
    count = f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"
    return Quantity(
        value=4.0 * params,
        kind="assumed",
        source=(
            f"assumed: the {series.model} preset's {count} parameters x 4 B "
            "(float32 gradients); the run predates training.gradient_bytes"
        ),
    )


def overlap(results: Results, series: TrainingSeries) -> Quantity:
    """The median over ranks of overlapped / (overlapped + exposed) communication, from the
    attribution of the same model and strategy; 0 (assumed) without one."""

    def by_rank(metric: Metric) -> dict[int, float]:
        return {
            m.rank: m.value
            for m in metric.select(results)
            if m.params.get("rank_step") == "mean" and series.same_case(m)
        }

    over = by_rank(AttributionMetrics.communication_overlapped)
    exposed = by_rank(AttributionMetrics.communication_exposed)
    ranks = sorted(set(over) & set(exposed))
    shares = [over[r] / (over[r] + exposed[r]) for r in ranks if over[r] + exposed[r] > 0]
    if shares:
        return Quantity(
            value=statistics.median(shares),
            kind="measured",
            source=(
                f"measured: attribution of {series.model} {series.strategy}, median over "
                f"{len(shares)} ranks of overlapped / (overlapped + exposed) communication"
            ),
        )
    why = (
        "attribution saw no communication"
        if ranks
        else f"no attribution of {series.model} {series.strategy} in the run"
    )
    return Quantity(value=0.0, kind="assumed", source=f"assumed 0: {why}")
