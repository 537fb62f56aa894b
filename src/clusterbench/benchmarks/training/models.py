"""Workload presets: the built-in Llama-style decoder at several sizes, and torchvision models.

Decoder FLOPs follow the literature's formula (:func:`.decoder.decoder_flops_per_token`); vision
FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` on a meta-device copy of the
model (no memory, no compute), forward and backward of one image.  FlopCounterMode counts a
multiply-add as 2 FLOPs, so ResNet-50 comes out near 3 × 8.2 GFLOPs per 224² image: torchvision's
table lists "4.09 GFLOPS", which are multiply-adds (He et al. 2016, table 1: 3.8e9 "FLOPs", also
multiply-adds); ViT-B/16 near 3 × 35 GFLOPs (torchvision lists 17.56 multiply-add "GFLOPS").
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.benchmarks.training.encoder import Bert, pretraining_loss
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.model_shapes import (
    DECODER_MODELS,
    DECODER_PRESETS,
    ENCODER_PRESETS,
    PRESETS,
    VISION_PRESETS,
    DecoderModel,
    EncoderModel,
    Model,
    VisionModel,
    decoder_config,
    decoder_flops_per_token,
    decoder_recompute_flops,
    encoder_flops_per_sequence,
    encoder_recompute_flops,
    llama_ffn_dim,
)

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
