"""ALiBi: score_h(i, j) += −m_h · |i − j|, slopes m_h geometric from 2^(−8/n)  (Press et al., 2022).

No position is added to the embeddings; each head penalises distant keys linearly, with its own slope,
which is what lets a model trained on short inputs read longer ones. Sites:

- encoder (bidirectional): −m_h · |i − j|, symmetric in the distance, as Press et al. recommend for
  encoders (their paper only trains causal language models);
- decoder (causal): −m_h · (i − j) for keys j ≤ i, the paper's bias; keys j > i are masked by the
  causal mask, and get 0 here rather than a reward, so the bias never favours the future;
- cross: no bias (``acts_in_cross_attention`` is False: see ``attnlab.posenc.base``; ALiBi was defined
  for decoder-only language models).

The penalty is written once, as a ``score_mod`` computed per score from the two positions and the
head's slope (on FlexAttention no (h, t_q, t_k) bias exists; the SDPA path's ``bias`` is that function on
the whole grid).

Shape letters: h heads, t_q / t_k query / key length.
"""

from __future__ import annotations

import math

import torch

from attnlab.posenc.base import PositionalEncoding, ScoreMod


def alibi_slopes(num_heads: int) -> list[float]:
    """m_h = 2^(−8h/n), h = 1 … n, for n a power of two; otherwise the paper's code's interleave.

    For n not a power of two, take the slopes of the largest power of two below n, then the
    odd-indexed slopes (every other one, starting from the first) of twice that power, until n.
    """
    if num_heads <= 0:
        raise ValueError(f"model.num_heads must be positive, got {num_heads}")
    if math.log2(num_heads).is_integer():
        start = 2 ** (-8 / num_heads)
        return [start ** (h + 1) for h in range(num_heads)]
    closest = 2 ** math.floor(math.log2(num_heads))
    return alibi_slopes(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


class AlibiPositions(PositionalEncoding):
    """A fixed linear distance penalty per head on encoder and decoder self-attention scores.

    Args:
        d_model: unused.
        num_heads: query heads; each gets its own slope.
        head_dim: unused.
        key_dim: unused.
    """

    def __init__(self, d_model: int, num_heads: int, head_dim: int, key_dim: int | None = None):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(num_heads)), persistent=False)  # (h,)

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str) -> ScoreMod:
        slopes, symmetric = self.slopes, site == "encoder"  # (h,)

        def alibi(score, b, h, q_idx, kv_idx):
            rel = q_pos[q_idx] - k_pos[kv_idx]  # i − j
            dist = rel.abs() if symmetric else rel.clamp(min=0)
            return score - (slopes[h] * dist).to(score.dtype)

        return alibi
