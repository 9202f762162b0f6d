"""score(q, k) = q · k  (Luong et al., 2015, "dot")."""

from __future__ import annotations

import torch

from attnlab.attention.scores.base import Score


class DotScore(Score):
    """Unscaled dot-product score; SDPA computes it with ``scale=1``, so it runs on the fused path.

    Without the 1/sqrt(d_k) of scaled dot, score variance grows with the query/key width d_k, which is
    the ablation this option exists for.
    """

    def __init__(self, key_dim: int, num_heads: int):
        super().__init__(key_dim, num_heads)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        return q @ k.transpose(-2, -1)  # (b, h, t_q, t_k)

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The (q, k, scale) for which ``scaled_dot_product_attention`` computes this score."""
        return q, k, 1.0
