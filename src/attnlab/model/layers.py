"""Encoder and decoder layers: attention and feed-forward sublayers with residuals and LayerNorm.

Shape letters: b batch, t target length, s source length, m d_model.
``norm_first`` = pre-LN (stable for small fast runs); False = post-LN as in Vaswani et al. (2017).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.model.cache import KVCache


class FeedForward(nn.Module):
    """FFN(x) = W_2 ReLU(W_1 x + b_1) + b_2."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn_dim, d_model)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Residual(nn.Module):
    """x + dropout(f(norm(x))) when pre-LN, norm(x + dropout(f(x))) when post-LN."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm, self.dropout, self.norm_first = nn.LayerNorm(d_model), nn.Dropout(dropout), norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, self_attn: MultiHeadAttention, ffn: FeedForward, dropout: float, norm_first: bool):
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn
        d_model = ffn.net[0].in_features
        self.attn_res = Residual(d_model, dropout, norm_first)
        self.ffn_res = Residual(d_model, dropout, norm_first)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor) -> torch.Tensor:
        """x (b, s, m), mask (b, 1, s|1, s) -> (b, s, m)."""
        x = self.attn_res(x, lambda h: self.self_attn(h, h, mask, pos, pos))
        return self.ffn_res(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: MultiHeadAttention,
        cross_attn: MultiHeadAttention,
        ffn: FeedForward,
        dropout: float,
        norm_first: bool,
    ):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        d_model = ffn.net[0].in_features
        self.self_res = Residual(d_model, dropout, norm_first)
        self.cross_res = Residual(d_model, dropout, norm_first)
        self.ffn_res = Residual(d_model, dropout, norm_first)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None,
        cross_mask: torch.Tensor | None,
        tgt_pos: torch.Tensor,
        src_pos: torch.Tensor,
        cache: tuple[KVCache, KVCache] | None = None,
        key_pos: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """y (b, t, m), memory (b, s, m) -> (b, t, m).

        Incremental decoding passes this layer's (self, cross) ``cache`` and the self-attention
        ``key_pos`` (every position so far); ``y`` and ``tgt_pos`` then cover the new tokens only.
        """
        self_cache, cross_cache = (None, None) if cache is None else cache
        key_pos = tgt_pos if key_pos is None else key_pos
        y = self.self_res(y, lambda h: self.self_attn(h, h, self_mask, tgt_pos, key_pos, self_cache))
        y = self.cross_res(y, lambda h: self.cross_attn(h, memory, cross_mask, tgt_pos, src_pos, cross_cache))
        return self.ffn_res(y, self.ffn)
