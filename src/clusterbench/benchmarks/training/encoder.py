"""BERT pre-training (Devlin et al. 2019), the model of MLPerf Training's BERT-Large benchmark.

Token, position and segment embeddings, post-LayerNorm encoder blocks (torch's
``nn.TransformerEncoderLayer``: self-attention through ``scaled_dot_product_attention``, a GELU
MLP), then the two pre-training heads: masked-language-model predictions at ``max_predictions``
positions per sequence (MLPerf: 76 of 512) through a dense + GELU + LayerNorm transform and a
decoder tied to the token embedding, and next-sentence prediction from the pooled first token.
The blocks live in ``encoder.layers`` so that the strategies can checkpoint, compile and shard
them one by one.  Synthetic data: the masked positions are fixed per model (throughput does not
depend on where they are).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "Bert",
    "EncoderConfig",
    "encoder_flops_per_sequence",
    "encoder_recompute_flops",
    "padded_vocab",
    "pretraining_loss",
]


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


class Bert(nn.Module):
    """Tokens (B, T) -> (MLM logits (B, P, vocab), NSP logits (B, 2))."""

    segments: torch.Tensor
    mlm_positions: torch.Tensor

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.dim
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, d)
        self.pos_embeddings = nn.Embedding(cfg.seq_len, d)
        self.type_embeddings = nn.Embedding(2, d)
        self.embed_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        layer = nn.TransformerEncoderLayer(
            d, cfg.num_heads, cfg.ffn_dim, dropout=cfg.dropout, activation="gelu",
            layer_norm_eps=cfg.norm_eps, batch_first=True, norm_first=False,
        )  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.mlm_transform = nn.Sequential(
            nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=cfg.norm_eps)
        )
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.pooler = nn.Linear(d, d)
        self.nsp = nn.Linear(d, 2)
        # two segments (sentence A, sentence B) of half the sequence each; fixed masked positions
        segments = (torch.arange(cfg.seq_len) >= cfg.seq_len // 2).long()
        # drawn on the CPU (the same positions on every device and rank), then moved to where
        # the model is being built
        generator = torch.Generator().manual_seed(0)
        positions = torch.randperm(cfg.seq_len, generator=generator, device="cpu")
        positions = positions[: cfg.max_predictions].sort().values.to(segments.device)
        self.register_buffer("segments", segments, persistent=False)
        self.register_buffer("mlm_positions", positions, persistent=False)
        for module in self.modules():  # BERT's initialisation: normal(0, 0.02)
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        h = self.tok_embeddings(tokens) + self.pos_embeddings(positions)
        h = self.dropout(self.embed_norm(h + self.type_embeddings(self.segments[:t])))
        h = self.encoder(h)
        masked = self.mlm_transform(h[:, self.mlm_positions])
        mlm = F.linear(masked, self.tok_embeddings.weight, self.mlm_bias)  # tied decoder
        nsp = self.nsp(torch.tanh(self.pooler(h[:, 0])))
        return mlm, nsp


def pretraining_loss(output: Any, targets: torch.Tensor) -> torch.Tensor:
    """MLM cross-entropy over the predicted positions + NSP cross-entropy; ``targets`` holds
    the P masked-token labels and then the NSP label of each sequence, shape (B, P + 1)."""
    mlm, nsp = output
    p = mlm.shape[1]
    mlm_loss = F.cross_entropy(mlm.flatten(0, 1).float(), targets[:, :p].flatten())
    return mlm_loss + F.cross_entropy(nsp.float(), targets[:, p])


def padded_vocab(size: int, multiple: int = 8) -> int:
    """The vocabulary rounded up to ``multiple`` rows (NVIDIA's BERT pads 30522 to 30528)."""
    return multiple * math.ceil(size / multiple)
