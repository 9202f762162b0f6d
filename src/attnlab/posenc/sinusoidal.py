"""PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)  (Vaswani et al., 2017).

Added to the (sqrt(d)-scaled) token embeddings; attention itself is untouched.
"""

from __future__ import annotations

import math

import torch

from attnlab.posenc.base import PositionalEncoding


class SinusoidalPositions(PositionalEncoding):
    """Fixed sinusoids, computed for any position on demand (no length limit)."""

    def __init__(
        self, d_model: int, num_heads: int, head_dim: int, key_dim: int | None = None, base: float = 10000.0
    ):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        if d_model % 2:
            raise ValueError(f"sinusoidal positions need an even model.d_model, got {d_model}")
        inv_freq = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d/2,)

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        angles = positions.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]  # (t, d/2)
        pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (t, d)
        return x + pe.to(x.dtype)
