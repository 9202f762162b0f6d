"""RoPE: (x_2i, x_2i+1) at position p is rotated by p·θ_i, θ_i = base^(−2i/d)  (Su et al., RoFormer, 2021).

Rotating q at position i and k at position j gives q·k = Re[Σ_i q̃_i conj(k̃_i) e^{i(i−j)θ_i}]: the score
depends on the positions only through i − j. Pairs are adjacent dimensions, as in the paper (the
"rotate half" layout of GPT-NeoX is the same up to a fixed permutation of the learned projections).

Cross-attention is left unrotated (``acts_in_cross_attention`` is False: see ``attnlab.posenc.base``).
Queries and keys are rotated, values never: pairs run over the query/key width d_k (``model.key_dim``,
which defaults to ``model.head_dim``). Shape letters: b batch, h heads, t length, d_k query/key head dim.
"""

from __future__ import annotations

import torch

from attnlab.posenc.base import PositionalEncoding


class RopePositions(PositionalEncoding):
    """Rotates queries and keys of self-attention (encoder and decoder) by their positions.

    Args:
        d_model: unused (RoPE acts per head).
        num_heads: unused (every head gets the same rotation).
        head_dim: per-head value width; the rotated width when ``key_dim`` is None.
        key_dim: per-head query/key width d_k (None = head_dim); must be even (dimensions rotate in
            pairs).
        base: wavelength base; θ_i = base^(−2i/d_k).
    """

    def __init__(
        self, d_model: int, num_heads: int, head_dim: int, key_dim: int | None = None, base: float = 10000.0
    ):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        key, d_k = ("model.head_dim", head_dim) if key_dim is None else ("model.key_dim", key_dim)
        if d_k % 2:
            raise ValueError(f"rope rotates dimension pairs and needs an even {key}, got {d_k}")
        if base <= 1:
            raise ValueError(f"posenc.base must be greater than 1, got {base}")
        inv_freq = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def _rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (b, h, t, d_k), pos (t,) -> (b, h, t, d_k)."""
        angles = pos.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]  # (t, d_k/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (t, d_k/2)
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (b, h, t, d_k/2)
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # (b, h, t, d_k)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._rotate(q, q_pos), self._rotate(k, k_pos)
