"""The decoder's building blocks: rotary embeddings and RMSNorm."""

from __future__ import annotations

import pytest
import torch

from clusterbench.benchmarks.training import decoder as dec


def test_rope_is_a_rotation_that_sees_only_relative_position() -> None:
    head_dim, seq_len = 16, 32
    rope = dec.rope_tables(head_dim=head_dim, seq_len=seq_len, theta=10000.0)
    torch.manual_seed(1)
    q, k = torch.randn(head_dim), torch.randn(head_dim)
    # the same q and k at every position: (1, 1, T, Q)
    rq = dec.apply_rope(q.expand(1, 1, seq_len, head_dim), rope)[0, 0]
    rk = dec.apply_rope(k.expand(1, 1, seq_len, head_dim), rope)[0, 0]
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(seq_len))  # norms kept
    torch.testing.assert_close(rq[0], q)  # position 0: no rotation
    # q at position m against k at n depends on m - n only
    torch.testing.assert_close(rq[5] @ rk[2], rq[20] @ rk[17])
    torch.testing.assert_close(rq[9] @ rk[9], q @ k)
    assert not torch.allclose(rq[5] @ rk[2], q @ k)


def test_rope_half_layout_is_metas_pairs_relabelled() -> None:
    # Meta's Llama rotates (x[2i], x[2i+1]) by angle i; the rotate-half layout (x[i], x[i+Q/2]).
    # Moving dimension 2i to i and 2i+1 to i+Q/2 must turn one into the other.
    head_dim, seq_len = 8, 12
    rope = dec.rope_tables(head_dim=head_dim, seq_len=seq_len, theta=10000.0)
    x = torch.randn(2, 3, seq_len, head_dim)
    cos, sin = rope[0], rope[1]
    even, odd = x[..., 0::2], x[..., 1::2]
    pairs = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    to_half = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    torch.testing.assert_close(dec.apply_rope(x[..., to_half], rope), pairs[..., to_half])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_by_its_definition(dtype: torch.dtype) -> None:
    norm = dec.RMSNorm(32, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 32))
    x = (torch.randn(4, 32) * 3).to(dtype)
    xf = x.float()
    expected = xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    out = norm(x)
    assert out.dtype == dtype
    torch.testing.assert_close(
        out.float(),
        expected,
        rtol=1e-2 if dtype != torch.float32 else 1e-5,
        atol=1e-2 if dtype != torch.float32 else 1e-5,
    )
