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

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clusterbench.model_shapes import (
    EncoderConfig,
    encoder_flops_per_sequence,
    encoder_recompute_flops,
    padded_vocab,
)

__all__ = [
    "Bert",
    "EncoderConfig",
    "encoder_flops_per_sequence",
    "encoder_recompute_flops",
    "padded_vocab",
    "pretraining_loss",
]


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
