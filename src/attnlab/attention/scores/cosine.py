"""score(q, k) = τ · q · k / (‖q‖ ‖k‖), τ learned per head  (Henry et al., 2020, QKNorm; Liu et al., 2022).

Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.attention.scores.base import Score


class CosineScore(Score):
    """Cosine similarity times a learned temperature; SDPA computes it from normalised q and k.

    Cosines lie in [-1, 1], so the temperature sets how peaked attention can get. It is stored as
    log τ, which keeps it positive and lets it move by factors rather than steps.

    Args:
        key_dim: query/key width d_k.
        num_heads: heads h (one temperature each).
        init_temperature: τ at initialisation; None = sqrt(d_k), the scale of scaled dot product.
    """

    def __init__(self, key_dim: int, num_heads: int, init_temperature: float | None = 10.0):
        super().__init__(key_dim, num_heads)
        tau = math.sqrt(key_dim) if init_temperature is None else init_temperature
        if tau <= 0:
            raise ValueError(f"attention.score.init_temperature must be positive, got {tau}")
        self.log_temperature = nn.Parameter(torch.full((num_heads,), math.log(tau)))  # (h,)

    @property
    def temperature(self) -> torch.Tensor:
        """τ per head, (h,)."""
        return self.log_temperature.exp()

    def _normalised(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tau = self.temperature.to(q.dtype)[:, None, None]  # (h, 1, 1)
        return F.normalize(q, dim=-1) * tau, F.normalize(k, dim=-1)  # (b, h, t_q, d_k), (b, h, t_k, d_k)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        q, k = self._normalised(q, k)
        return q @ k.transpose(-2, -1)  # (b, h, t_q, t_k)

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The (q, k, scale) for which ``scaled_dot_product_attention`` computes this score."""
        return *self._normalised(q, k), 1.0
