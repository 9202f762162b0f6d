"""score(q, k) = q · k / sqrt(d_k)  (Vaswani et al., 2017), d_k the query/key width."""

from __future__ import annotations

import torch

from attnlab.attention.scores.base import Score


class ScaledDotScore(Score):
    """Scaled dot-product score; expressible by SDPA, so it runs on the fused path.

    ``key_dim`` is d_k, the width of the queries and keys the score compares (``model.key_dim``, which
    defaults to ``model.head_dim``); the score needs nothing else.
    """

    def __init__(self, key_dim: int, num_heads: int):
        super().__init__(key_dim, num_heads)
        self.key_dim = key_dim

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        return q @ k.transpose(-2, -1) * self.key_dim**-0.5

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The (q, k, scale) for which ``scaled_dot_product_attention`` computes this score."""
        return q, k, self.key_dim**-0.5
