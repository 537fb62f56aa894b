"""A Llama-style decoder in plain torch, and its model FLOPs.

RMSNorm, rotary position embeddings (RoPE), a SwiGLU MLP and grouped-query attention through
``F.scaled_dot_product_attention(is_causal=True)``, as in Llama 2/3.  The token embedding and the
LM head are *untied* (Llama 2/3 untie them).  The blocks live in ``model.layers`` so that the
training strategies can checkpoint, compile, shard or split them one by one; the attention and
MLP projections are named ``wq wk wv wo`` and ``w1 w2 w3`` as torchtitan names them, which the
tensor-parallel plan relies on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from clusterbench.model_shapes import (
    DecoderConfig,
    decoder_flops_per_token,
    decoder_recompute_flops,
)

__all__ = ["Decoder", "DecoderConfig", "decoder_flops_per_token", "decoder_recompute_flops"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # y = x / sqrt(mean(x^2) + eps) * w, computed in float32 (Llama's RMSNorm)
        w = self.weight.float()
        return F.rms_norm(x.float(), (x.shape[-1],), w, self.eps).type_as(x)


def rope_tables(*, head_dim: int, seq_len: int, theta: float) -> torch.Tensor:
    """cos and sin of RoPE (Su et al. 2021), shape (2, T, head_dim / 2)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return torch.stack([angles.cos(), angles.sin()])


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[i], x[i + Q/2]) of x (B, heads, T, Q) by the position's angles: the
    "rotate half" layout of GPT-NeoX and Hugging Face's Llama, which pairs dimensions i and
    i + Q/2 instead of Meta's 2i and 2i + 1 (a fixed permutation of the head dimensions; the
    same model up to relabelling, and one contiguous slice per half instead of two strided)."""
    t, half = x.shape[-2], x.shape[-1] // 2
    cos, sin = rope[0, :t].to(x.dtype), rope[1, :t].to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
        )
        self.wq = nn.Linear(cfg.dim, cfg.num_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        # -1 instead of the head count: under tensor parallelism each rank holds a shard of heads
        q = self.wq(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, rope), apply_rope(k, rope)
        repeats = q.shape[1] // k.shape[1]
        if repeats > 1:  # grouped-query attention: each kv head serves `repeats` query heads
            k = k.repeat_interleave(repeats, dim=1)
            v = v.repeat_interleave(repeats, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # SwiGLU (Shazeer 2020): w2(silu(w1 x) * w3 x)
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Decoder(nn.Module):
    """Tokens (B, T) -> logits (B, T, vocab).  Any of ``tok_embeddings``, ``norm`` and
    ``output`` may be None: a pipeline stage keeps only the parts it runs."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.num_layers)})
        self.norm: RMSNorm | None = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output: nn.Linear | None = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        rope = rope_tables(head_dim=cfg.head_dim, seq_len=cfg.seq_len, theta=cfg.rope_theta)
        self.register_buffer("rope", rope, persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2 / nanoGPT: normal(0, 0.02); the loss starts near ln(vocab)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        for layer in self.layers.values():
            h = layer(h, self.rope)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h
