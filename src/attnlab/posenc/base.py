"""The three places a positional encoding may act; each encoding overrides only those it needs.

- ``embed``: add to token embeddings (sinusoidal, learned);
- ``rotate``: transform queries and keys per head (RoPE);
- ``bias``: add to attention scores (ALiBi, T5).

One instance serves one stack (encoder or decoder); the decoder's also serves cross-attention.
``site`` is ``"encoder"``, ``"decoder"`` or ``"cross"``, so an encoding can treat them differently
(e.g. symmetric vs causal ALiBi).
"""

from __future__ import annotations

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """Acts nowhere (``posenc=none``); subclasses override the hooks they need."""

    def __init__(self, d_model: int, num_heads: int, head_dim: int):
        super().__init__()

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x (b, t, d_model), positions (t,) -> (b, t, d_model)."""
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q (b, h, t_q, d), k (b, h_kv, t_k, d) -> same shapes."""
        return q, k

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str) -> torch.Tensor | None:
        """Additive score bias (1, h, t_q, t_k), or None."""
        return None
