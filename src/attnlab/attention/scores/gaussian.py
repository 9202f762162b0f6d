"""score(q, k) = −‖q − k‖² / (2σ²), σ learned per head  (a Gaussian / RBF kernel on q, k).

Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim.

‖q − k‖² is expanded as ‖q‖² − 2 q·k + ‖k‖², so no (b, h, t_q, t_k, d_k) tensor is ever made. The ‖q‖²
term is constant along a softmax row and does not change the attention, but ``forward`` keeps it so the
score is the true one (hooks and tests see −distance). SDPA has no per-key bias other than the mask, so
there is no ``fused`` form: this score always takes the explicit path.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.attention.scores.base import Score


class GaussianScore(Score):
    """Negative squared distance over a learned width; nearer keys get more attention.

    σ is stored as log σ (positive, multiplicative steps).

    Args:
        key_dim: query/key width d_k.
        num_heads: heads h (one width each).
        init_sigma: σ at initialisation; None = d_k^(1/4), for which the q·k term is q·k / sqrt(d_k),
            the scaled dot product.
    """

    def __init__(self, key_dim: int, num_heads: int, init_sigma: float | None = None):
        super().__init__(key_dim, num_heads)
        sigma = key_dim**0.25 if init_sigma is None else init_sigma
        if sigma <= 0:
            raise ValueError(f"attention.score.init_sigma must be positive, got {sigma}")
        self.log_sigma = nn.Parameter(torch.full((num_heads,), math.log(sigma)))  # (h,)

    @property
    def sigma(self) -> torch.Tensor:
        """σ per head, (h,)."""
        return self.log_sigma.exp()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        qq = q.pow(2).sum(-1, keepdim=True)  # (b, h, t_q, 1)
        kk = k.pow(2).sum(-1).unsqueeze(-2)  # (b, h, 1, t_k)
        sq_dist = (qq + kk - 2 * (q @ k.transpose(-2, -1))).clamp_min(0)  # (b, h, t_q, t_k)
        inv_two_var = (0.5 * torch.exp(-2 * self.log_sigma)).to(q.dtype)[:, None, None]  # (h, 1, 1)
        return -sq_dist * inv_two_var  # (b, h, t_q, t_k)
