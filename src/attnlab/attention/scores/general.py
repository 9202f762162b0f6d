"""score(q, k) = qᵀ W k, one W per head  (Luong et al., 2015, "general" / bilinear).

Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.attention.scores.base import Score


class GeneralScore(Score):
    """Bilinear score with a learned (d_k, d_k) matrix per head; SDPA computes it from q' = q W.

    W starts at I / sqrt(d_k), so an untrained model scores exactly like scaled dot product and training
    moves away from it only where that helps.

    Args:
        key_dim: query/key width d_k.
        num_heads: heads h (one W each).
    """

    def __init__(self, key_dim: int, num_heads: int):
        super().__init__(key_dim, num_heads)
        eye = torch.eye(key_dim) * key_dim**-0.5  # (d_k, d_k)
        self.weight = nn.Parameter(eye.expand(num_heads, key_dim, key_dim).clone())  # (h, d_k, d_k)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        return (q @ self.weight) @ k.transpose(-2, -1)  # (b, h, t_q, d_k) -> (b, h, t_q, t_k)

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The (q, k, scale) for which ``scaled_dot_product_attention`` computes this score."""
        return q @ self.weight, k, 1.0  # (b, h, t_q, d_k)
