"""e_ij = q_i · (k_j + a^K_ij) / sqrt(d_k),  z_i = Σ_j α_ij (v_j + a^V_ij),  a_ij = w_clip(j − i, k)
(Shaw et al., 2018, "Self-Attention with Relative Position Representations").

Learned relative-position vectors for keys and values, one per clipped distance in [−k, k], shared by
all heads (as in the paper) and, here, by all layers of a stack (one encoding instance per stack;
the paper learns them per layer). k = 0 gives every pair the same vector: no position information,
the paper's 12.5-BLEU row. The value term needs the attention probabilities, so with ``values: true``
attention takes the explicit path; keys only runs fused (the key term joins the SDPA mask).

Cross-attention gets no relative terms (``acts_in_cross_attention`` is False: see
``attnlab.posenc.base``): the paper defines them for self-attention.
a^K is as wide as the keys (d_k, ``model.key_dim``), a^V as the values (d_v, ``model.head_dim``).
Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim, d_v value head dim.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.posenc.base import PositionalEncoding


class ShawPositions(PositionalEncoding):
    """Relative position representations on keys and/or values of self-attention.

    Args:
        d_model: unused.
        num_heads: unused (vectors are shared by heads).
        head_dim: width d_v of the relative values a^V.
        key_dim: width d_k of the relative keys a^K (None = head_dim).
        clip: maximum distance k ≥ 0 (``posenc.clip``); farther pairs share the edge vectors.
        keys: learn a^K (relative keys).
        values: learn a^V (relative values).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        head_dim: int,
        key_dim: int | None = None,
        clip: int = 16,
        keys: bool = True,
        values: bool = True,
    ):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        d_k = head_dim if key_dim is None else key_dim
        if clip < 0:
            raise ValueError(f"posenc.clip must be >= 0, got {clip}")
        if not (keys or values):
            raise ValueError("posenc.keys and posenc.values are both false: enable at least one")
        self.clip, self.scale = clip, d_k**-0.5
        self.rel_keys = nn.Embedding(2 * clip + 1, d_k) if keys else None  # (2k + 1, d_k)
        self.rel_values = nn.Embedding(2 * clip + 1, head_dim) if values else None  # (2k + 1, d_v)
        for table in (self.rel_keys, self.rel_values):
            if table is not None:
                nn.init.normal_(table.weight, std=table.embedding_dim**-0.5)
        self.needs_probs = values

    def _index(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(t_q,), (t_k,) -> clipped distance j − i shifted to [0, 2k]: (t_q, t_k)."""
        return (k_pos[None, :] - q_pos[:, None]).clamp(-self.clip, self.clip) + self.clip

    def score_terms(self, q, q_pos, k_pos, site):
        if self.rel_keys is None:
            return None
        a = self.rel_keys(self._index(q_pos, k_pos)).to(q.dtype)  # (t_q, t_k, d_k)
        return torch.einsum("bhqd,qkd->bhqk", q, a) * self.scale  # (b, h, t_q, t_k)

    def value_terms(self, p, q_pos, k_pos, site):
        if self.rel_values is None:
            return None
        a = self.rel_values(self._index(q_pos, k_pos)).to(p.dtype)  # (t_q, t_k, d_v)
        return torch.einsum("bhqk,qkd->bhqd", p, a)  # (b, h, t_q, d_v)
