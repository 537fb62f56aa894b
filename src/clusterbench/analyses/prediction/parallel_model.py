"""Step time of a training step under tensor, pipeline, context, expert and data parallelism.

The communication of each strategy is a list of collectives on the link its group spans, costed
by the alpha-beta formulas of :mod:`.comm_model`; the data-parallel ones are the same terms as
the run's prediction (:func:`.scaling_model.collective_terms`). Sources of every formula are in
docs/reference.md ("Step time under model parallelism"):

* TP (Shoeybi et al. 2019, "Megatron-LM", section 3; Narayanan et al. 2021, SC21, section 3.2):
  per transformer layer and micro-batch, 2 all_reduces of the layer's activations (b s h
  elements) in the forward pass and 2 in the backward pass, one forward more of each with full
  activation recomputation; with sequence parallelism the same bytes move as reduce_scatter plus
  all_gather (Korthikanti et al. 2022, section 4.2.2). On the critical path (no overlap).
* PP (Narayanan et al. 2021, sections 2.2.1-2.2.2): ``m`` micro-batches over ``p`` stages take
  ``(m + (p - 1) / v) * t_mb``: the bubble is ``(p - 1) / (v m)`` of the ideal time, its share
  of the step ``(p - 1) / (v m + p - 1)`` (1F1B: v = 1; interleaved: v model chunks per GPU).
  Each micro-batch sends its activations forward and their gradients back: b s h elements, cut
  by the TP size with the scatter/gather optimisation (section 4.1).
* CP, ring attention (Liu, Zaharia and Abbeel 2023, "Ring attention with blockwise transformers",
  section 3): each layer passes the K and V blocks of b (s / cp) kv-hidden elements around the
  ring, cp - 1 steps forward and, with their gradients, twice that backward; each step hides
  under the attention of one block pair (4 b c^2 h FLOP forward for block length c).
* EP (Lepikhin et al. 2021, "GShard", section 2; Fedus et al. 2022, "Switch Transformers"):
  per MoE layer and micro-batch an all_to_all dispatch and an all_to_all combine of the rank's
  tokens x top_k x hidden, forward and backward (4 in all). On the critical path.
* DP: DDP (ZeRO-1/2 move the same bytes: reduce_scatter + all_gather = one all_reduce) reduces
  the gradients in buckets during the last micro-batch's backward (Li et al. 2020, "PyTorch
  Distributed", section 3.2.3; bucket 25 MB by default): at least the last bucket is exposed.
  FSDP / ZeRO-3 gathers each unit's parameters before its forward and again before its backward
  and reduce-scatters its gradients, every micro-batch, prefetching the next unit's gather under
  the current unit's compute (Zhao et al. 2023, "PyTorch FSDP", section 3.3.2; Rajbhandari et al.
  2020, "ZeRO", section 7.2.1): the first gathers and the last reduce-scatter are exposed, and a
  unit's communication wherever it outlasts the unit's compute.

No I/O here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from clusterbench.analyses.prediction.comm_model import Fit
from clusterbench.analyses.prediction.scaling_model import Links, Strategy, collective_terms

__all__ = [
    "DDP_BUCKET_BYTES",
    "Breakdown",
    "Layout",
    "Overlap",
    "Schedule",
    "Shape",
    "Sharding",
    "Which",
    "bubble_share",
    "calibrate_compute_s",
    "cp_ring_bytes",
    "ep_all_to_all_bytes",
    "fsdp_exposed_s",
    "megatron_flops_per_token",
    "megatron_params",
    "pipeline_time_s",
    "step_breakdown",
    "tp_all_reduces_per_layer",
]

Sharding = Literal["ddp", "zero1", "zero2", "fsdp"]
Schedule = Literal["1f1b", "interleaved"]
Overlap = Literal["auto", "none"] | float
"""How data-parallel communication meets compute: ``auto`` the bucketing / prefetch model above;
``none`` all exposed; a fraction: that much of it hidden, at most under the compute it can meet."""
Which = Literal["central", "low", "high"]
"""Which end of the link fits' prediction intervals a cost is taken at."""

DDP_BUCKET_BYTES = 25 * 2**20
"""DDP's default gradient bucket (``bucket_cap_mb=25``, torch.nn.parallel.DistributedDataParallel
docs); Megatron's buckets are larger, which only shrinks the exposed tail."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """How ``gpus`` GPUs split the work (Megatron's order, innermost first: TP, CP, DP, PP)."""

    gpus: int
    gpus_per_node: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sharding: Sharding = "ddp"
    schedule: Schedule = "1f1b"
    virtual_stages: int = 1
    """Model chunks per GPU of the interleaved schedule (1 for 1F1B)."""
    microbatches: int = 1
    """Micro-batches each pipeline (data-parallel replica) runs per step."""

    def __post_init__(self) -> None:
        for name in ("gpus", "gpus_per_node", "tp", "pp", "cp", "ep", "virtual_stages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.microbatches < 1:
            raise ValueError(f"micro-batches per step must be >= 1, got {self.microbatches}")
        model = self.tp * self.pp * self.cp
        if self.gpus % model:
            raise ValueError(f"{self.gpus} GPUs do not split into TP {self.tp} x PP {self.pp} x "
                             f"CP {self.cp}")  # fmt: skip
        if self.tp > self.gpus_per_node:
            raise ValueError(f"TP {self.tp} spans nodes of {self.gpus_per_node} GPUs: not modelled")
        if (self.dp * self.cp) % self.ep:
            raise ValueError(f"EP {self.ep} does not divide DP x CP = {self.dp * self.cp}")
        if self.gpus > self.gpus_per_node and self.gpus % self.gpus_per_node:
            raise ValueError(f"{self.gpus} GPUs is not a multiple of {self.gpus_per_node} per node")

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """The model and one micro-batch, as the communication sees them."""

    params: float
    layers: int
    hidden: int
    seq_len: int
    micro_batch: float
    """Sequences per micro-batch on one data-parallel replica."""
    kv_hidden: int | None = None
    """Width of K (and V) for ring attention (grouped-query attention: heads_kv x head dim)."""
    moe_layers: int = 0
    top_k: int = 1
    grad_bytes: float = 2.0
    """Bytes per gradient element reduced."""
    gather_bytes: float | None = None
    """Bytes per parameter FSDP gathers (its compute dtype; None: ``grad_bytes``)."""
    act_bytes: float = 2.0
    """Bytes per activation element moved by TP, PP, CP and EP."""
    recompute: bool = False
    """Full activation recomputation: the forward runs twice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakdown:
    """One step on one GPU, seconds."""

    compute_s: float
    bubble_s: float
    tp_s: float
    pp_s: float
    cp_s: float
    ep_s: float
    dp_s: float
    """All data-parallel communication, hidden or not."""
    dp_exposed_s: float
    step_s: float


def megatron_params(*, layers: int, hidden: int, vocab: int, seq_len: int) -> float:
    """Parameters of a GPT of Megatron's shape: 12 l h^2 (1 + 13 / 12h + (V + s) / 12lh)
    (Narayanan et al. 2021, eq. 2)."""
    n, h = layers, hidden
    return 12 * n * h**2 * (1 + 13 / (12 * h) + (vocab + seq_len) / (12 * n * h))


def megatron_flops_per_token(
    *, layers: int, hidden: int, vocab: int, seq_len: int, recompute: bool
) -> float:
    """Training FLOP per token of Megatron's count: 96 l h^2 (1 + s / 6h + V / 16lh) with the
    recomputed forward, 3/4 of it without (Narayanan et al. 2021, eq. 3 divided by B s)."""
    n, h = layers, hidden
    per = 96 * n * h**2 * (1 + seq_len / (6 * h) + vocab / (16 * n * h))
    return per if recompute else per * 3 / 4


def tp_all_reduces_per_layer(*, recompute: bool) -> int:
    """All_reduces per layer and micro-batch: 2 forward, 2 backward (Megatron's f and g), 2 more
    with the recomputed forward."""
    return 6 if recompute else 4


def bubble_share(p: int, m: int, v: int = 1) -> float:
    """Share of the step the pipeline idles: (p - 1) / (v m + p - 1) (Narayanan et al. 2021)."""
    return (p - 1) / (v * m + p - 1)


def pipeline_time_s(microbatch_s: float, *, p: int, m: int, v: int = 1) -> float:
    """``m`` micro-batches of ``microbatch_s`` each through ``p`` stages, ``v`` chunks a GPU:
    (m + (p - 1) / v) micro-batch times (the ideal m t plus the bubble (p - 1) t / v)."""
    return (m + (p - 1) / v) * microbatch_s


def cp_ring_bytes(shape: Shape, cp: int) -> float:
    """Bytes one ring-attention step passes on per layer and micro-batch, forward: the K and V
    blocks of b (s / cp) tokens."""
    kv = shape.kv_hidden or shape.hidden
    return 2 * shape.micro_batch * shape.seq_len / cp * kv * shape.act_bytes


def ep_all_to_all_bytes(shape: Shape, cp: int = 1) -> float:
    """Per-rank buffer of one dispatch or combine all_to_all: its tokens x top_k x hidden."""
    return shape.micro_batch * shape.seq_len / cp * shape.top_k * shape.hidden * shape.act_bytes


def fsdp_exposed_s(
    *, gather_s: float, scatter_s: float, forward_s: float, backward_s: float, units: int
) -> float:
    """Exposed seconds of one micro-batch's FSDP traffic over ``units`` equal units, with the
    next unit's all_gather prefetched under the current unit's compute: the first gathers of
    the forward and the backward and the last reduce_scatter are exposed, and in the ``units -
    1`` others the part of (gather) or (gather + scatter) that outlasts the unit's compute."""
    g, r = gather_s / units, scatter_s / units
    f, b = forward_s / units, backward_s / units
    return 2 * g + r + (units - 1) * (max(0.0, g - f) + max(0.0, g + r - b))


def _cost(fit: Fit, op: str, p: int, size_bytes: float, which: Which) -> float:
    if p < 2 or size_bytes <= 0:
        return 0.0
    term = dataclasses.replace(fit, op=op, p=p, algorithm="ring")
    if which == "central":
        return term.predict_s(size_bytes)
    low, high = term.prediction_interval_s(size_bytes)
    return low if which == "low" else high


def _link(links: Links, spans_nodes: bool) -> Fit:
    fit = links.inter if spans_nodes else links.intra
    if fit is None:
        raise ValueError("a group " + ("spans nodes" if spans_nodes else "sits in a node")
                         + " but that link is not known")  # fmt: skip
    return fit


def _dp_s(layout: Layout, shape: Shape, links: Links, which: Which) -> tuple[float, float, float]:
    """(all_reduce-like seconds, all_gather seconds, reduce_scatter seconds) of the DP group:
    DDP's one all_reduce, or one FSDP gather and one scatter, of this stage's TP shard."""
    if layout.dp == 1:
        return 0.0, 0.0, 0.0
    inner = layout.tp * layout.cp
    g = layout.gpus_per_node
    per_node = max(1, g // inner) if inner < g else 1
    dp_links = Links(gpus_per_node=min(per_node, layout.dp), intra=links.intra, inter=links.inter)
    shard = shape.params / (layout.tp * layout.pp)

    def total(strategy: Strategy, n: float, ops: set[str]) -> float:
        terms = collective_terms(strategy, world_size=layout.dp, size_bytes=n, links=dp_links)
        return sum(_cost(t.fit, t.op, t.p, t.size_bytes, which) for t in terms if t.op in ops)

    if layout.sharding != "fsdp":
        every = {"all_reduce", "reduce_scatter", "all_gather"}
        return total("ddp", shard * shape.grad_bytes, every), 0.0, 0.0
    # FSDP's terms: a gather before the forward, one before the backward, a scatter after it
    gather_bytes = shape.gather_bytes or shape.grad_bytes
    gathers = total("fsdp", shard * gather_bytes, {"all_gather"})
    scatters = total("fsdp", shard * shape.grad_bytes, {"reduce_scatter"})
    return 0.0, gathers / 2, scatters


def _dp_exposed_s(
    layout: Layout, shape: Shape, *, ar: float, ag: float, rs: float, compute_mb: float,
    overlap: Overlap,
) -> float:  # fmt: skip
    m = layout.microbatches
    # the backward costs two forwards; with recomputation it runs the forward again first
    backward_mb = compute_mb * (3 / 4 if shape.recompute else 2 / 3)
    forward_mb = compute_mb - backward_mb
    if layout.sharding != "fsdp":
        if overlap == "none":
            return ar
        if overlap == "auto":
            n = shape.params / (layout.tp * layout.pp) * shape.grad_bytes
            last_bucket = ar * min(1.0, DDP_BUCKET_BYTES / n) if n > 0 else 0.0
            return max(last_bucket, ar - backward_mb)
        # a measured fraction, bounded by the compute as the run's prediction bounds it
        return ar - min(overlap * ar, compute_mb)
    per_mb = 2 * ag + rs
    if overlap == "none":
        return m * per_mb
    if overlap == "auto":
        units = max(1, shape.layers // layout.pp)
        return m * fsdp_exposed_s(gather_s=ag, scatter_s=rs, forward_s=forward_mb,
                                  backward_s=backward_mb, units=units)  # fmt: skip
    return m * (per_mb - min(overlap * per_mb, compute_mb))


def step_breakdown(
    layout: Layout,
    shape: Shape,
    links: Links,
    *,
    compute_s: float,
    flop_rate: float | None = None,
    overlap: Overlap = "auto",
    which: Which = "central",
) -> Breakdown:
    """The step of one GPU: ``compute_s`` is its stage's compute for all its micro-batches (no
    communication, no bubble); ``flop_rate`` (FLOP/s) times the ring-attention blocks (needed
    with CP > 1)."""
    m, p, v = layout.microbatches, layout.pp, layout.virtual_stages
    g = layout.gpus_per_node
    compute_mb = compute_s / m
    layers_here = max(1, shape.layers // p)
    act = shape.micro_batch * shape.seq_len / layout.cp * shape.hidden * shape.act_bytes
    tp = 0.0
    if layout.tp > 1:
        per_layer = tp_all_reduces_per_layer(recompute=shape.recompute)
        tp = (
            layers_here
            * per_layer
            * _cost(_link(links, False), "all_reduce", layout.tp, act, which)
        )
    cp = 0.0
    if layout.cp > 1:
        if not flop_rate:
            raise ValueError("context parallelism needs the FLOP rate to time attention blocks")
        spans = layout.tp * layout.cp > g
        send = _cost(_link(links, spans), "send_recv", 2, cp_ring_bytes(shape, layout.cp), which)
        c = shape.seq_len / layout.cp
        block_fwd = 4 * shape.micro_batch * c * c * shape.hidden / flop_rate
        passes = 3 if shape.recompute else 2  # forward (again) and backward, which sends 2x
        exposed_fwd = max(0.0, send - block_fwd)
        exposed_bwd = max(0.0, 2 * send - 2 * block_fwd)
        cp = layers_here * (layout.cp - 1) * ((passes - 1) * exposed_fwd + exposed_bwd)
    ep = 0.0
    if layout.ep > 1 and shape.moe_layers:
        spans = layout.tp * layout.ep > g
        one = _cost(
            _link(links, spans),
            "all_to_all",
            layout.ep,
            ep_all_to_all_bytes(shape, layout.cp),
            which,
        )
        ep = max(1, shape.moe_layers // p) * 4 * one
    pp = 0.0
    if p > 1:
        boundary = act / layout.tp  # scatter/gather: each TP rank sends its slice
        pp = 2 * _cost(_link(links, layout.gpus > g), "send_recv", 2, boundary, which)
    microbatch_s = compute_mb + tp + cp + ep + pp
    pipeline = pipeline_time_s(microbatch_s, p=p, m=m, v=v)
    ar, ag, rs = _dp_s(layout, shape, links, which)
    dp_total = ar + m * (2 * ag + rs)
    dp_exposed = _dp_exposed_s(layout, shape, ar=ar, ag=ag, rs=rs, compute_mb=compute_mb,
                               overlap=overlap)  # fmt: skip
    return Breakdown(
        compute_s=compute_s, bubble_s=pipeline - m * microbatch_s, tp_s=m * tp, pp_s=m * pp,
        cp_s=m * cp, ep_s=m * ep, dp_s=dp_total, dp_exposed_s=dp_exposed,
        step_s=pipeline + dp_exposed,
    )  # fmt: skip


def calibrate_compute_s(
    step_s: float,
    layout: Layout,
    shape: Shape,
    links: Links,
    *,
    flops: float,
    overlap: Overlap = "auto",
) -> float:
    """The compute seconds for which the modelled step is ``step_s`` (the published one), with
    ``flops`` the GPU's FLOP per step (for the ring-attention blocks). The step grows with the
    compute (the bubble multiplies it, overlap hides at most as much as it grows), so bisection
    finds it. Raises ValueError when communication alone outlasts ``step_s``."""
    if not (step_s > 0 and math.isfinite(step_s)):
        raise ValueError(f"the published step must be finite and > 0, got {step_s}")

    def model(c: float) -> float:
        return step_breakdown(layout, shape, links, compute_s=c, flop_rate=flops / c,
                              overlap=overlap).step_s  # fmt: skip

    low, high = step_s * 1e-9, step_s
    if model(low) >= step_s:
        raise ValueError(
            f"the modelled communication alone ({model(low):.3g} s) outlasts the published "
            f"step ({step_s:.3g} s) at {layout.gpus} GPUs: the stated links are too slow"
        )
    for _ in range(200):
        mid = (low + high) / 2
        if model(mid) < step_s:
            low = mid
        else:
            high = mid
        if high - low <= step_s * 1e-12:
            break
    return (low + high) / 2
