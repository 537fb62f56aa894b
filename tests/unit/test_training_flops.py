"""Training FLOPs, MFU and scaling-efficiency formulas; settings validation and presets."""

from __future__ import annotations

import typing

import pytest
import torch

from clusterbench.benchmarks.training.encoder import Bert
from clusterbench.benchmarks.training.formulas import (
    idle_fraction,
    mfu,
    strong_scaling_efficiency,
    weak_scaling_efficiency,
)
from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.training.pipeline import stage_layers
from clusterbench.benchmarks.training.settings import TrainingConfig, default_world_sizes
from clusterbench.config import ConfigError, build_run_config
from clusterbench.model_shapes import (
    DECODER_PRESETS,
    ENCODER_PRESETS,
    PRESETS,
    VISION_PRESETS,
    DecoderModel,
    EncoderModel,
    Model,
    VisionModel,
    decoder_flops_per_token,
    decoder_recompute_flops,
    encoder_flops_per_sequence,
)

CPU = torch.device("cpu")


def test_decoder_flops_by_hand() -> None:
    # tiny: L 2, d 64, H 4 (Q 16), 2 kv heads, ffn 192, vocab 512, T 64
    cfg = DECODER_PRESETS["tiny"]
    attention = 64 * 64 * 2 + 64 * 32 * 2  # wq wo (64x64), wk wv (64x32)
    mlp = 3 * 64 * 192
    n = 2 * (attention + mlp + 2 * 64) + 64 + 512 * 64  # blocks, final norm, LM head
    assert cfg.num_params_without_embedding() == n
    assert decoder_flops_per_token(cfg, seq_len=64) == 6 * n + 12 * 2 * 4 * 16 * 64
    n_blocks = 2 * (attention + mlp + 2 * 64)
    assert decoder_recompute_flops(cfg, seq_len=64) == 2 * n_blocks + 4 * 2 * 4 * 16 * 64


def test_param_count_matches_the_model() -> None:
    w = build_workload("tiny", device=CPU)
    model = w.model
    n = sum(p.numel() for p in model.parameters()) - model.tok_embeddings.weight.numel()
    assert n == model.cfg.num_params_without_embedding()
    assert w.flops_per_sample == decoder_flops_per_token(model.cfg, seq_len=64) * 64
    assert w.tokens_per_sample == 64 and w.block_paths == ("layers",)
    # hardware FLOPs stay within 4/3 of model FLOPs (8N instead of 6N at most)
    assert 1 < (w.flops_per_sample + w.recompute_flops_per_sample) / w.flops_per_sample <= 4 / 3


def test_presets_match_their_sources() -> None:
    gpt = DECODER_PRESETS["1.3b"]  # docs/reference.md's GPT 1.3B
    assert (gpt.num_layers, gpt.dim, gpt.num_heads, gpt.seq_len) == (24, 2048, 16, 2048)
    # GPT 1.3B, nanoGPT count with tied embeddings: 12 L d^2 + V d
    gpt_n = 12 * 24 * 2048**2 + 50304 * 2048
    assert gpt.num_params_without_embedding() == pytest.approx(gpt_n, rel=0.02)
    llama3 = DECODER_PRESETS["8b"]
    assert (llama3.num_layers, llama3.dim, llama3.num_heads, llama3.num_kv_heads) == (
        32,
        4096,
        32,
        8,
    )
    assert (llama3.ffn_dim, llama3.vocab_size) == (14336, 128256)


def test_tiny_trains_and_seq_len_override() -> None:
    w = build_workload("tiny", device=CPU, seq_len=32)
    x, y = w.make_batch(3)
    assert x.shape == y.shape == (3, 32)
    loss = w.loss_fn(w.model(x), y)
    assert torch.isfinite(loss) and abs(loss.item() - torch.log(torch.tensor(512.0))) < 0.5


def test_vision_without_torchvision_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "torchvision", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "torchvision.models", None)
    with pytest.raises(ValueError, match="torchvision"):
        build_workload("resnet50", device=CPU)
    with pytest.raises(ValueError, match="unknown model"):
        build_workload("gpt5", device=CPU)


def test_mfu_and_scaling_math() -> None:
    # docs/reference.md: 58.4k tok/s of GPT 1.3B at 6N + 12LHQT per token -> ~53.6% of 989
    per_token = 6 * 1.31e9 + 12 * 24 * 16 * 128 * 2048
    assert mfu(flops_per_sample=per_token, samples_per_s_per_gpu=58.4e3, peak_tflops=989) == (
        pytest.approx(0.536, abs=0.01)
    )
    assert weak_scaling_efficiency(throughput_n=180.0, throughput_1=100.0, n=2) == 0.9
    assert strong_scaling_efficiency(step_time_1=1.0, step_time_n=0.625, n=2) == 0.8
    assert idle_fraction(step_time=10.0, compute_time=7.5) == 0.25
    assert idle_fraction(step_time=10.0, compute_time=11.0) == 0.0
    with pytest.raises(ValueError):
        mfu(flops_per_sample=1.0, samples_per_s_per_gpu=1.0, peak_tflops=0)


def test_world_sizes_and_stages() -> None:
    assert default_world_sizes(1) == [1]
    assert default_world_sizes(2) == [1, 2]
    assert default_world_sizes(6) == [1, 2, 4, 6]
    assert default_world_sizes(8) == [1, 2, 4, 8]
    assert [list(stage_layers(5, num_stages=2, stage=s)) for s in (0, 1)] == [[0, 1, 2], [3, 4]]


def test_model_names_are_the_preset_tables_keys() -> None:
    assert set(DECODER_PRESETS) == set(typing.get_args(DecoderModel))
    assert set(ENCODER_PRESETS) == set(typing.get_args(EncoderModel))
    assert set(VISION_PRESETS) == set(typing.get_args(VisionModel))
    assert sorted(PRESETS) == sorted(typing.get_args(Model))


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("training.model=gpt5", r"training\.model: input should be 'tiny', '125m'"),
        ("training.strategy=zero3", r"training\.strategy: input should be 'ddp', 'fsdp2'"),
        ("training.precision=fp8", r"training\.precision: input should be 'fp32', 'tf32'"),
        ("training.scaling_mode=both", r"training\.scaling_mode: input should be 'weak'"),
        ("training.sweep_strategies=ddp,nope", r"training\.sweep_strategies: input should be"),
        ("training.sweep_precisions=fp8", r"training\.sweep_precisions: input should be"),
        ("training.batch_size=0", "batch_size must be >= 1"),
        ("training.cuda_graphs=true", "cuda_graphs needs compile=true"),
    ],
)
def test_settings_refuse_unknown_choices(setting: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        build_run_config(device_type="cpu", suite="standard", sets=[setting])


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"steps": 0}, "steps must be >= 1"),
        ({"warmup_steps": -1}, "warmup_steps must be >= 0"),
        ({"world_sizes": [0]}, "world_sizes"),
        ({"model": "resnet50", "strategy": "tp"}, "needs a decoder model"),
        ({"model": "bert_large", "strategy": "pp"}, "needs a decoder model"),
        ({"cuda_graphs": True}, "cuda_graphs needs compile=true"),
        ({"cuda_graphs": True, "compile": True, "strategy": "fsdp2"}, "ddp or zero1"),
    ],
)
def test_config_rejects(bad: dict[str, object], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        TrainingConfig(**bad)  # type: ignore[arg-type]


def test_presets() -> None:
    cpu = TrainingConfig.preset(suite="quick", device_type="cpu")
    assert cpu.model == "tiny" and cpu.steps <= 4 and cpu.sweep_compile == [False]
    full = TrainingConfig.preset(suite="full", device_type="cuda")
    assert (full.warmup_steps, full.steps, full.model, full.sweep) == (100, 400, "1.3b", True)
    assert TrainingConfig.preset(suite="standard", device_type="cuda").grad_accum_sweep == [
        1,
        2,
        4,
        8,
    ]
    with pytest.raises(ValueError):
        TrainingConfig.preset(suite="huge", device_type="cpu")


@pytest.mark.parametrize("seq_len", [None, 64])
def test_encoder_flops_equal_torchs_count(seq_len: int | None) -> None:
    # FlopCounterMode counts every matmul and attention product of forward + backward
    from torch.utils.flop_counter import FlopCounterMode

    cfg = ENCODER_PRESETS["bert_tiny"]
    cfg = cfg if seq_len is None else cfg.with_seq_len(seq_len)
    with torch.device("meta"):
        model = Bert(cfg)
        tokens = torch.randint(0, cfg.vocab_size, (1, cfg.seq_len))
    counter = FlopCounterMode(display=False)
    with counter:
        mlm, nsp = model(tokens)
        (mlm.sum() + nsp.sum()).backward()
    assert encoder_flops_per_sequence(cfg) == counter.get_total_flops()


def test_bert_presets_and_training_step() -> None:
    large = ENCODER_PRESETS["bert_large"]  # MLPerf: 24 x 1024, 16 heads, 512 tokens, 76 masked
    assert (large.num_layers, large.dim, large.num_heads, large.seq_len) == (24, 1024, 16, 512)
    assert (large.max_predictions, large.vocab_size) == (76, 30528)
    with torch.device("meta"):
        params = sum(p.numel() for p in Bert(large).parameters())
    assert 330e6 < params < 340e6  # BERT-Large: 335M (Devlin et al. 2019 round it to 340M)
    assert large.with_seq_len(128).max_predictions == 19  # the same 15% share
    w = build_workload("bert_tiny", device=CPU, seq_len=32)
    x, y = w.make_batch(3)
    assert x.shape == (3, 32) and y.shape == (3, 5 + 1)  # 5 masked labels + the NSP label
    loss = w.loss_fn(w.model(x), y)
    loss.backward()
    expected = torch.log(torch.tensor(30528.0)) + torch.log(torch.tensor(2.0))
    assert torch.isfinite(loss) and abs(loss.item() - expected.item()) < 0.5
    assert w.kind == "encoder" and w.block_paths == ("encoder.layers",)
    # recomputation adds one forward of the blocks: at most 8/6 of the model FLOPs
    assert 1 < (w.flops_per_sample + w.recompute_flops_per_sample) / w.flops_per_sample <= 4 / 3
    assert all(p.grad is not None for p in w.model.parameters())
