"""PE(pos) = P[pos], a learned table row added to the token embedding  (Gehring et al., 2017).

Vaswani et al. (2017), Table 3 row E, found learned absolute positions on par with sinusoids. Unlike
sinusoids, the table stops at ``max_len``: a longer input is refused rather than silently wrapped.
Shape letters: t length, m d_model, L max_len.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.posenc.base import PositionalEncoding


class LearnedPositions(PositionalEncoding):
    """A trainable (max_len, d_model) table, one row per absolute position, added in ``embed``.

    Args:
        d_model: model width (the table's row width).
        num_heads: unused (the table acts on embeddings, not heads).
        head_dim: unused.
        key_dim: unused.
        max_len: number of positions the table holds; positions 0 … max_len − 1 are valid.
    """

    def __init__(
        self, d_model: int, num_heads: int, head_dim: int, key_dim: int | None = None, max_len: int = 512
    ):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        if max_len <= 0:
            raise ValueError(f"posenc.max_len must be positive, got {max_len}")
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)  # (L, m)
        # fairseq's initialisation for learned positions; token embeddings here are N(0, 1/m) · sqrt(m).
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if positions.numel() and int(positions.max()) >= self.max_len:
            raise ValueError(
                f"position {int(positions.max())} is beyond the learned table "
                f"(posenc.max_len={self.max_len}): raise posenc.max_len or shorten the input"
            )
        return x + self.table(positions).to(x.dtype)  # (t, m) broadcast over b -> (b, t, m)
