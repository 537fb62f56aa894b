"""Workload presets: the built-in Llama-style decoder at several sizes, and torchvision models.

Decoder FLOPs follow the literature's formula (:func:`.decoder.decoder_flops_per_token`); vision
FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` on a meta-device copy of the
model (no memory, no compute), forward and backward of one image.  FlopCounterMode counts a
multiply-add as 2 FLOPs, so ResNet-50 comes out near 3 × 8.2 GFLOPs per 224² image: torchvision's
table lists "4.09 GFLOPS", which are multiply-adds (He et al. 2016, table 1: 3.8e9 "FLOPs", also
multiply-adds); ViT-B/16 near 3 × 35 GFLOPs (torchvision lists 17.56 multiply-add "GFLOPS").
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import typing
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from clusterbench.benchmarks.training.decoder import (
    Decoder,
    DecoderConfig,
    decoder_flops_per_token,
    decoder_recompute_flops,
)
from clusterbench.benchmarks.training.encoder import (
    Bert,
    EncoderConfig,
    encoder_flops_per_sequence,
    encoder_recompute_flops,
    padded_vocab,
    pretraining_loss,
)
from clusterbench.benchmarks.training.workload import Batch, Workload

__all__ = [
    "DECODER_MODELS",
    "DECODER_PRESETS",
    "ENCODER_PRESETS",
    "PRESETS",
    "VISION_PRESETS",
    "DecoderModel",
    "EncoderModel",
    "Model",
    "VisionModel",
    "build_workload",
    "llama_ffn_dim",
]

DecoderModel = Literal["tiny", "125m", "1.3b", "2b", "7b", "8b"]
"""The Llama-style decoders: the keys of :data:`DECODER_PRESETS`."""
EncoderModel = Literal["bert_tiny", "bert_large"]
"""BERT pre-training: the keys of :data:`ENCODER_PRESETS`."""
VisionModel = Literal["resnet50", "vit_b_16"]
"""torchvision models: the keys of :data:`VISION_PRESETS`."""
Model = Literal[DecoderModel, EncoderModel, VisionModel]
"""Every workload preset (the tables' keys are typed by these names; a test pins that each
table holds all of its names)."""
DECODER_MODELS: tuple[DecoderModel, ...] = typing.get_args(DecoderModel)

_GPT2_VOCAB = 50304  # GPT-2's 50257 tokens padded to a multiple of 64 (nanoGPT)


def llama_ffn_dim(dim: int, *, multiple_of: int = 256) -> int:
    """SwiGLU hidden size of Llama 1/2: 2/3 of 4·dim, rounded up to ``multiple_of`` (3 matrices
    of d x 8d/3 hold as many weights as GPT's 2 of d x 4d)."""
    hidden = int(2 * 4 * dim / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


def _decoder(
    layers: int, dim: int, heads: int, kv_heads: int, *, vocab: int, seq_len: int, **kw: Any
) -> DecoderConfig:
    ffn = kw.pop("ffn_dim", llama_ffn_dim(dim))
    return DecoderConfig(
        num_layers=layers, dim=dim, num_heads=heads, num_kv_heads=kv_heads, ffn_dim=ffn,
        vocab_size=vocab, seq_len=seq_len, **kw,
    )  # fmt: skip


DECODER_PRESETS: dict[DecoderModel, DecoderConfig] = {
    "tiny": _decoder(2, 64, 4, 2, vocab=512, seq_len=64, ffn_dim=192),
    # GPT-2 small's shape (Radford et al. 2019)
    "125m": _decoder(12, 768, 12, 12, vocab=_GPT2_VOCAB, seq_len=1024),
    # docs/reference.md's GPT 1.3B (24 layers, d 2048, 16 heads, T 2048, vocab 50304): N within
    # 2% (SwiGLU ffn 5504 = 8/3·2048 rounded up to a multiple of 128), so the MFUs compare
    "1.3b": _decoder(24, 2048, 16, 16, vocab=_GPT2_VOCAB, seq_len=2048, ffn_dim=5504),
    "2b": _decoder(24, 2560, 20, 5, vocab=_GPT2_VOCAB, seq_len=2048),
    # Llama-2-7B (Touvron et al. 2023): 32 layers, d 4096, 32 heads, ffn 11008, vocab 32000
    "7b": _decoder(32, 4096, 32, 32, vocab=32000, seq_len=4096),
    # Llama-3-8B (Meta, 2024): 8 kv heads, ffn 14336, vocab 128256, RoPE theta 500000
    "8b": _decoder(32, 4096, 32, 8, vocab=128256, seq_len=8192, ffn_dim=14336, rope_theta=500000.0),
}
_BERT_VOCAB = padded_vocab(30522)  # BERT's uncased WordPiece vocabulary, padded to 30528
ENCODER_PRESETS: dict[EncoderModel, EncoderConfig] = {
    # BERT-Tiny (Turc et al. 2019: L 2, H 128, A 2), at BERT's phase-1 length: for CPUs
    "bert_tiny": EncoderConfig(
        num_layers=2, dim=128, num_heads=2, ffn_dim=512, vocab_size=_BERT_VOCAB, seq_len=128,
        max_predictions=20,
    ),
    # BERT-Large as MLPerf Training runs it: 24 layers, d 1024, 16 heads, 512 tokens, 76
    # masked-token predictions per sequence
    "bert_large": EncoderConfig(
        num_layers=24, dim=1024, num_heads=16, ffn_dim=4096, vocab_size=_BERT_VOCAB, seq_len=512,
        max_predictions=76,
    ),
}  # fmt: skip
VISION_PRESETS: dict[VisionModel, str] = {"resnet50": "resnet50", "vit_b_16": "vit_b_16"}
"""Preset name -> torchvision.models builder."""
PRESETS: tuple[Model, ...] = (*DECODER_PRESETS, *ENCODER_PRESETS, *VISION_PRESETS)
_IMAGE_SIZE = 224
_NUM_CLASSES = 1000


def build_workload(name: str, *, device: torch.device, seq_len: int | None = None) -> Workload:
    """The workload of preset ``name`` on ``device``, float32 parameters, synthetic data.

    ``seq_len`` overrides a decoder's or encoder's sequence length (ignored by vision models).
    """
    if name in DECODER_PRESETS:
        return _decoder_workload(name, device=device, seq_len=seq_len)
    if name in ENCODER_PRESETS:
        return _encoder_workload(name, device=device, seq_len=seq_len)
    if name in VISION_PRESETS:
        return _vision_workload(name, device=device)
    raise ValueError(f"unknown model {name!r} (choose from {', '.join(PRESETS)})")


def decoder_config(name: DecoderModel, *, seq_len: int | None = None) -> DecoderConfig:
    cfg = DECODER_PRESETS[name]
    if seq_len is None:
        return cfg
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    return dataclasses.replace(cfg, seq_len=seq_len)


def _decoder_workload(name: DecoderModel, *, device: torch.device, seq_len: int | None) -> Workload:
    cfg = decoder_config(name, seq_len=seq_len)
    t = cfg.seq_len
    with torch.device(device):
        model = Decoder(cfg)

    def make_batch(batch_size: int) -> Batch:
        tokens = torch.randint(0, cfg.vocab_size, (batch_size, t + 1), device=device)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()  # next-token targets

    return Workload(
        name=name,
        kind="decoder",
        model=model,
        make_batch=make_batch,
        loss_fn=_token_loss,
        flops_per_sample=decoder_flops_per_token(cfg, seq_len=t) * t,
        tokens_per_sample=t,
        flops_formula="6N + 12LHQT per token (PaLM appendix B); N without token embedding",
        recompute_flops_per_sample=decoder_recompute_flops(cfg, seq_len=t) * t,
        block_paths=("layers",),
    )


def _encoder_workload(name: EncoderModel, *, device: torch.device, seq_len: int | None) -> Workload:
    preset = ENCODER_PRESETS[name]
    cfg = preset if seq_len is None else preset.with_seq_len(seq_len)
    with torch.device(device):
        model = Bert(cfg)
    p = cfg.max_predictions

    def make_batch(batch_size: int) -> Batch:
        tokens = torch.randint(0, cfg.vocab_size, (batch_size, cfg.seq_len), device=device)
        masked = torch.randint(0, cfg.vocab_size, (batch_size, p), device=device)
        next_sentence = torch.randint(0, 2, (batch_size, 1), device=device)
        return tokens, torch.cat([masked, next_sentence], dim=1)

    return Workload(
        name=name,
        kind="encoder",
        model=model,
        make_batch=make_batch,
        loss_fn=pretraining_loss,
        flops_per_sample=encoder_flops_per_sequence(cfg),
        flops_formula=(
            "6 x matmul weights x tokens they see (blocks: T, MLM head: P, NSP: 1) + 12LHQT^2 "
            "per sequence"
        ),
        recompute_flops_per_sample=encoder_recompute_flops(cfg),
        block_paths=("encoder.layers",),
    )


def _token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def _torchvision_builder(name: VisionModel) -> Callable[..., nn.Module]:
    try:
        models = importlib.import_module("torchvision.models")
    except ImportError:
        raise ValueError(
            f"model {name!r} needs the 'torchvision' package, which is not installed "
            "(pip install torchvision matching your torch)"
        ) from None
    builder: Callable[..., nn.Module] = getattr(models, VISION_PRESETS[name])
    return builder


def _vision_workload(name: VisionModel, *, device: torch.device) -> Workload:
    builder = _torchvision_builder(name)
    flops = count_training_flops(builder, image_size=_IMAGE_SIZE)
    with torch.device(device):
        model = builder(weights=None, num_classes=_NUM_CLASSES)
    # channels_last: the layout cuDNN's fastest convolutions use (docs/reference.md's ResNet-50)
    memory_format = torch.channels_last if name == "resnet50" else torch.contiguous_format
    model = model.to(memory_format=memory_format)  # type: ignore[call-overload]

    def make_batch(batch_size: int) -> Batch:
        images = torch.randn(batch_size, 3, _IMAGE_SIZE, _IMAGE_SIZE, device=device)
        labels = torch.randint(0, _NUM_CLASSES, (batch_size,), device=device)
        return images.contiguous(memory_format=memory_format), labels

    return Workload(
        name=name,
        kind="vision",
        model=model,
        make_batch=make_batch,
        loss_fn=F.cross_entropy,
        flops_per_sample=flops,
        flops_formula="FlopCounterMode, forward + backward of one 224x224 image",
        recompute_flops_per_sample=flops / 3,  # one more forward (= 1/3 of fwd + bwd)
        block_paths=("layer1", "layer2", "layer3", "layer4")
        if name == "resnet50"
        else ("encoder.layers",),
    )


@functools.cache  # a forward and backward on the meta device: once per model and size
def count_training_flops(builder: Callable[..., nn.Module], *, image_size: int) -> float:
    """Forward + backward FLOPs of one image, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        model = builder(weights=None, num_classes=_NUM_CLASSES)
        images = torch.randn(1, 3, image_size, image_size)
    counter = FlopCounterMode(display=False)
    with counter:
        model(images).sum().backward()
    return float(counter.get_total_flops())
