"""The step model of tensor, pipeline, context, expert and data parallelism
(analyses/prediction/parallel_model.py) against worked examples of its sources."""

from __future__ import annotations

import math

import pytest

from clusterbench.analyses.prediction.inputs import assumed_fit
from clusterbench.analyses.prediction.parallel_model import (
    DDP_BUCKET_BYTES,
    Layout,
    Shape,
    bubble_share,
    calibrate_compute_s,
    ep_all_to_all_bytes,
    fsdp_exposed_s,
    megatron_flops_per_token,
    megatron_params,
    pipeline_time_s,
    step_breakdown,
    tp_all_reduces_per_layer,
)
from clusterbench.analyses.prediction.scaling_model import Links

NVLINK = 300e9  # B/s
RAIL = 25e9


def _links(*, alpha: float = 0.0, intra: float = NVLINK, inter: float = RAIL, g: int = 8) -> Links:
    return Links(gpus_per_node=g, intra=assumed_fit(alpha, 1 / intra),
                 inter=assumed_fit(alpha, 1 / inter))  # fmt: skip


def _shape(**kw: object) -> Shape:
    base: dict[str, object] = dict(params=1e9, layers=24, hidden=2048, seq_len=2048, micro_batch=1)
    base.update(kw)
    return Shape(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("layers", "hidden", "billions"),
    [(24, 2304, 1.7), (36, 4096, 7.5), (80, 12288, 145.6), (128, 25600, 1008.0)],
)
def test_megatron_parameter_count_gives_table_1(layers: int, hidden: int, billions: float) -> None:
    # Narayanan et al. 2021, Table 1: vocabulary 51,200, sequence 2048
    p = megatron_params(layers=layers, hidden=hidden, vocab=51200, seq_len=2048)
    assert p / 1e9 == pytest.approx(billions, abs=0.06)


def test_megatron_flops_give_the_papers_training_time() -> None:
    # section 5.1: GPT-3 (175B) on 1024 A100s at 140 TFLOP/s, 300B tokens: about 34 days
    # (8 T P / (n X), the FLOP count with recomputation about 8 P per token)
    per_token = megatron_flops_per_token(layers=96, hidden=12288, vocab=51200, seq_len=2048,
                                         recompute=True)  # fmt: skip
    days = per_token * 300e9 / (1024 * 140e12) / 86400
    assert days == pytest.approx(34, rel=0.05)
    without = megatron_flops_per_token(layers=96, hidden=12288, vocab=51200, seq_len=2048,
                                       recompute=False)  # fmt: skip
    assert without / per_token == pytest.approx(3 / 4)


def test_pipeline_bubble_of_the_papers_example() -> None:
    # section 2.2: p = 4 stages, m = 8 micro-batches: the bubble is (p-1)/m = 3/8 of the ideal
    # time, (p-1)/(m+p-1) = 3/11 of the step; interleaved with v = 2: 3/16
    assert pipeline_time_s(1.0, p=4, m=8) == pytest.approx(8 * (1 + 3 / 8))
    assert bubble_share(4, 8) == pytest.approx(3 / 11)
    assert pipeline_time_s(1.0, p=4, m=8, v=2) == pytest.approx(8 * (1 + 3 / 16))
    assert bubble_share(4, 8, 2) == pytest.approx(3 / 19)
    layout = Layout(gpus=4, gpus_per_node=8, pp=4, microbatches=8)
    b = step_breakdown(layout, _shape(layers=24), _links(inter=math.inf), compute_s=8.0)
    assert b.bubble_s / b.step_s == pytest.approx(3 / 11, rel=1e-3)  # p2p at infinite bandwidth


def test_tensor_parallel_all_reduces() -> None:
    # Megatron's f and g: 2 all_reduces forward, 2 backward per layer; recomputation adds 2
    assert tp_all_reduces_per_layer(recompute=False) == 4
    assert tp_all_reduces_per_layer(recompute=True) == 6
    shape = _shape(layers=24, hidden=4096, seq_len=2048, micro_batch=1)
    layout = Layout(gpus=4, gpus_per_node=8, tp=4)
    b = step_breakdown(layout, shape, _links(), compute_s=1.0)
    act = 2048 * 4096 * 2
    one = 2 * 3 / 4 * act / NVLINK  # ring all_reduce over 4: 2(p-1)/p n / busbw
    assert b.tp_s == pytest.approx(24 * 4 * one)
    assert b.step_s == pytest.approx(1.0 + b.tp_s)


def test_ring_attention_hides_blocks_longer_than_flops_over_bandwidth() -> None:
    # Liu et al. 2023, section 3: a block's K/V pass hides under its attention when the block
    # length c >= F / B; A100 at 312 TFLOP/s over 300 GB/s NVLink: 1040 tokens
    rate = 312e12
    threshold = rate / NVLINK
    assert threshold == pytest.approx(1040)
    for seq, hidden in ((8192, 4096), (4096, 4096)):  # blocks of 2048 and 1024 over 4 GPUs
        layout = Layout(gpus=4, gpus_per_node=8, cp=4)
        b = step_breakdown(layout, _shape(seq_len=seq, hidden=hidden), _links(), compute_s=1.0,
                           flop_rate=rate)  # fmt: skip
        assert (b.cp_s == 0.0) == (seq / 4 >= threshold)


def test_expert_all_to_all() -> None:
    # GShard / Switch: dispatch and combine, forward and backward: 4 all_to_all per MoE layer
    shape = _shape(moe_layers=12, top_k=2, hidden=1024, seq_len=4096, micro_batch=1)
    assert ep_all_to_all_bytes(shape) == 4096 * 2 * 1024 * 2
    layout = Layout(gpus=8, gpus_per_node=8, ep=8)
    b = step_breakdown(layout, shape, _links(), compute_s=1.0)
    one = 7 / 8 * ep_all_to_all_bytes(shape) / NVLINK  # pairwise exchange: (p-1)/p n / busbw
    assert b.ep_s == pytest.approx(12 * 4 * one)


def test_fsdp_moves_one_and_a_half_times_ddp() -> None:
    # ZeRO (Rajbhandari et al. 2020, 7.2.1): stage 3 moves 3 Psi against DDP's 2 Psi
    shape = _shape(params=8e9, grad_bytes=2.0)
    ddp = step_breakdown(Layout(gpus=64, gpus_per_node=8), shape, _links(), compute_s=1.0)
    fsdp = step_breakdown(Layout(gpus=64, gpus_per_node=8, sharding="fsdp"), shape, _links(),
                          compute_s=1.0)  # fmt: skip
    assert fsdp.dp_s / ddp.dp_s == pytest.approx(1.5)


def test_fsdp_prefetch_exposes_the_first_gathers_and_the_last_scatter() -> None:
    # compute outlasting each unit's traffic: only 2 gathers and 1 scatter of one unit show
    assert fsdp_exposed_s(gather_s=1.0, scatter_s=1.0, forward_s=10, backward_s=20,
                          units=10) == pytest.approx(0.3)  # fmt: skip
    # no compute to hide under: all of it (2 gathers + 1 scatter)
    assert fsdp_exposed_s(gather_s=1.0, scatter_s=1.0, forward_s=0, backward_s=0,
                          units=10) == pytest.approx(3.0)  # fmt: skip


def test_ddp_exposes_at_least_the_last_bucket() -> None:
    shape = _shape(params=1e9, grad_bytes=4.0)
    layout = Layout(gpus=16, gpus_per_node=8)
    long = step_breakdown(layout, shape, _links(), compute_s=100.0)
    assert long.dp_exposed_s == pytest.approx(long.dp_s * DDP_BUCKET_BYTES / 4e9)
    none = step_breakdown(layout, shape, _links(), compute_s=100.0, overlap="none")
    assert none.dp_exposed_s == pytest.approx(none.dp_s)


def test_calibration_inverts_the_step() -> None:
    layout = Layout(gpus=512, gpus_per_node=8, tp=8, pp=2, microbatches=48)
    shape = _shape(params=39e9, layers=48, hidden=8192, recompute=True)
    links = _links(alpha=1e-5)
    step = step_breakdown(layout, shape, links, compute_s=3.0, overlap="none").step_s
    assert calibrate_compute_s(step, layout, shape, links, flops=1e15,
                               overlap="none") == pytest.approx(3.0, rel=1e-9)  # fmt: skip
    with pytest.raises(ValueError, match="communication alone"):
        calibrate_compute_s(1e-6, layout, shape, links, flops=1e15)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(gpus=12, tp=8), "do not split"),
        (dict(gpus=16, tp=16), "spans nodes"),
        (dict(gpus=24, gpus_per_node=16), "not a multiple"),
        (dict(gpus=8, ep=3), "EP 3"),
        (dict(gpus=0), "gpus must be"),
    ],
)
def test_bad_layouts_say_why(kw: dict[str, int], message: str) -> None:
    args = dict(gpus=8, gpus_per_node=8) | kw
    with pytest.raises(ValueError, match=message):
        Layout(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("gpus", [4, 8, 64])
@pytest.mark.parametrize("overlap", [0.0, 0.4, 1.0])
def test_data_parallel_alone_is_the_runs_prediction(
    strategy: str, gpus: int, overlap: float
) -> None:
    # one model, two front doors: a DP-only layout with a measured overlap fraction gives the
    # step the run's prediction (scaling_model.predict_step) gives for the same links
    from clusterbench.analyses.prediction.scaling_model import Workload, predict_step

    links = _links(alpha=7e-6)
    grad_bytes = 2.6e9
    run = predict_step(Workload(compute_s=0.5, grad_bytes=grad_bytes, overlap=overlap), links,
                       world_size=gpus, strategy=strategy)  # type: ignore[arg-type]  # fmt: skip
    layout = Layout(gpus=gpus, gpus_per_node=8, sharding=strategy)  # type: ignore[arg-type]
    shape = _shape(params=grad_bytes / 2, grad_bytes=2.0)
    stated = step_breakdown(layout, shape, links, compute_s=0.5, overlap=overlap)
    assert stated.step_s == pytest.approx(run.step_s, rel=1e-12)
