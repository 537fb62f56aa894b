"""The training workloads' shapes without torch: the model presets (Llama-style decoders, BERT,
torchvision names), their configs and FLOP counts, read by the CLI, the duration model and the
analysis (so it sits below the benchmarks and the analyses); the models themselves are built in
:mod:`clusterbench.benchmarks.training.models`."""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DECODER_MODELS",
    "DECODER_PRESETS",
    "ENCODER_PRESETS",
    "PRESETS",
    "VISION_PRESETS",
    "DecoderConfig",
    "DecoderModel",
    "EncoderConfig",
    "EncoderModel",
    "Model",
    "VisionModel",
    "decoder_config",
    "decoder_flops_per_token",
    "decoder_recompute_flops",
    "encoder_flops_per_sequence",
    "encoder_recompute_flops",
    "llama_ffn_dim",
    "padded_vocab",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class DecoderConfig:
    num_layers: int
    dim: int
    num_heads: int
    num_kv_heads: int
    ffn_dim: int
    vocab_size: int
    seq_len: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.dim % self.num_heads:
            raise ValueError(f"dim {self.dim} is not divisible by num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} not divisible by {self.num_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    def num_params_without_embedding(self) -> int:
        """Parameters by hand: the blocks, the final norm and the LM head; not the token
        embedding (a table lookup, no matmul)."""
        d, q = self.dim, self.head_dim
        attention = d * self.num_heads * q * 2 + d * self.num_kv_heads * q * 2  # wq wo, wk wv
        mlp = 3 * d * self.ffn_dim  # w1 w2 w3
        block = attention + mlp + 2 * d  # + two RMSNorm weights
        return self.num_layers * block + d + self.vocab_size * d  # + final norm, LM head


def decoder_flops_per_token(cfg: DecoderConfig, *, seq_len: int) -> float:
    """Training model FLOPs per token: 6N + 12·L·H·Q·T (PaLM, Chowdhery et al. 2022, appendix B;
    nanoGPT ``estimate_mfu``; torchtitan ``get_num_flop_per_token``).

    N counts every matmul weight once: the blocks and the (untied) LM head, not the token
    embedding, as torchtitan subtracts it (with RoPE there are no position embeddings to
    subtract, which is what nanoGPT removes).  The attention term is not halved for the causal
    mask (PaLM's convention; Megatron-LM's counts differ, docs/reference.md).
    """
    n = cfg.num_params_without_embedding()
    return 6.0 * n + 12.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq_len


def decoder_recompute_flops(cfg: DecoderConfig, *, seq_len: int) -> float:
    """FLOPs per token that full activation checkpointing adds: one more forward of every
    block, 2·N_blocks + 4·L·H·Q·T (the LM head sits outside the checkpointed blocks).  Hardware
    FLOPs = model FLOPs + this, at most 4/3 of the model FLOPs (8N instead of 6N)."""
    n_blocks = cfg.num_params_without_embedding() - cfg.vocab_size * cfg.dim - cfg.dim
    return 2.0 * n_blocks + 4.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq_len


@dataclass(frozen=True, kw_only=True, slots=True)
class EncoderConfig:
    num_layers: int
    dim: int
    num_heads: int
    ffn_dim: int
    vocab_size: int
    seq_len: int
    max_predictions: int
    """Masked positions predicted per sequence."""
    norm_eps: float = 1e-12
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.dim % self.num_heads:
            raise ValueError(f"dim {self.dim} is not divisible by num_heads {self.num_heads}")
        if not 1 <= self.max_predictions <= self.seq_len:
            raise ValueError(f"max_predictions must be in 1..{self.seq_len}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    def with_seq_len(self, seq_len: int) -> EncoderConfig:
        """The same model at another sequence length, predicting the same share of tokens
        (BERT's phase 1 trains at 128 tokens with 20 predictions, phase 2 at 512 with 80)."""
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        predictions = max(1, round(seq_len * self.max_predictions / self.seq_len))
        return dataclasses.replace(self, seq_len=seq_len, max_predictions=predictions)


def encoder_flops_per_sequence(cfg: EncoderConfig) -> float:
    """Training FLOPs of one sequence: 6 x every matmul weight x the tokens it is applied to
    (the blocks to all T tokens, the MLM head to the P predicted ones, pooler and NSP to one),
    plus 12·L·H·Q·T² for attention scores and values (no causal mask to halve it).  Biases,
    norms and embedding lookups are not counted (PaLM appendix B's convention)."""
    d, t, p = cfg.dim, cfg.seq_len, cfg.max_predictions
    weighted = cfg.num_layers * _block_weights(cfg) * t + (d * d + d * cfg.vocab_size) * p
    return 6.0 * (weighted + d * d + 2 * d) + 12.0 * cfg.num_layers * cfg.dim * t * t


def encoder_recompute_flops(cfg: EncoderConfig) -> float:
    """FLOPs per sequence that full activation checkpointing adds: one more forward of every
    block, 2 x block weights x T + 4·L·H·Q·T² (the heads sit outside the blocks)."""
    t = cfg.seq_len
    return 2.0 * cfg.num_layers * _block_weights(cfg) * t + 4.0 * cfg.num_layers * cfg.dim * t * t


def _block_weights(cfg: EncoderConfig) -> int:
    """Matmul weights of one block: q k v o projections and the two MLP matrices."""
    return 4 * cfg.dim * cfg.dim + 2 * cfg.dim * cfg.ffn_dim


def padded_vocab(size: int, multiple: int = 8) -> int:
    """The vocabulary rounded up to ``multiple`` rows (NVIDIA's BERT pads 30522 to 30528)."""
    return multiple * math.ceil(size / multiple)


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


def decoder_config(name: DecoderModel, *, seq_len: int | None = None) -> DecoderConfig:
    cfg = DECODER_PRESETS[name]
    if seq_len is None:
        return cfg
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    return dataclasses.replace(cfg, seq_len=seq_len)
