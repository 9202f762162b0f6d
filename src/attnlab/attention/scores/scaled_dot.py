"""score(q, k) = q · k / sqrt(d)  (Vaswani et al., 2017)."""

from __future__ import annotations

import torch
from torch import nn


class ScaledDotScore(nn.Module):
    """Scaled dot-product score; expressible by SDPA, so it runs on the fused path.

    Score modules share one constructor signature, ``(head_dim, num_heads)``, so that the model can
    finish any ``_partial_`` score config; this one needs neither.
    """

    def __init__(self, head_dim: int, num_heads: int):
        super().__init__()
        self.head_dim = head_dim

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d), (b, h, t_k, d) -> (b, h, t_q, t_k)."""
        return q @ k.transpose(-2, -1) * self.head_dim**-0.5

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The (q, k, scale) for which ``scaled_dot_product_attention`` computes this score."""
        return q, k, self.head_dim**-0.5
