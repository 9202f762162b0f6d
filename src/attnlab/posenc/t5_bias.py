"""T5 relative bias: score_h(i, j) += b_h[bucket(j − i)], learned per head and bucket  (Raffel et al., 2020).

Buckets: half of them are exact for small distances (one bucket per distance), the rest grow
logarithmically up to ``max_distance``, beyond which all distances share the last bucket.
Bidirectional (encoder) buckets split the range in two, keys after the query in the upper half;
unidirectional (decoder) buckets only see past distances (future keys are masked anyway).
One table per stack, shared by its layers, as in T5.

The term is written once, as a ``score_mod`` (the (1, h, t_q, t_k) ``bias`` of the SDPA path is that
function on the whole grid): each score looks its bias up in the table. The buckets of the relative
positions −max_distance … max_distance are computed once per call (every farther distance shares the
last bucket of its direction, so clamping j − i to that range changes no bucket), and the kernel
indexes the table with them, so on FlexAttention gradients reach the table without a (h, t_q, t_k) bias.

Cross-attention gets no bias, as in T5 (``acts_in_cross_attention`` is False: see
``attnlab.posenc.base``).
Shape letters: h heads, t_q / t_k query / key length, B num_buckets.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.posenc.base import PositionalEncoding, ScoreMod


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """Bucket index in [0, num_buckets) for each relative position j − i (key minus query); T5's scheme.

    Args:
        relative_position: integer tensor of j − i, any shape.
        bidirectional: True: distinct buckets for keys before and after the query (keys after in the
            upper half); False: keys after the query all fall in bucket 0 with distance 0.
        num_buckets: total buckets.
        max_distance: distances at or beyond this share the last bucket of their direction.
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    # log-spaced beyond max_exact; clamping first keeps log() away from 0 where the exact bucket wins
    log_ratio = torch.log(distance.clamp(min=max_exact).float() / max_exact)  # same shape, float
    log_ratio = log_ratio / math.log(max_distance / max_exact)  # 1 at max_distance
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


class T5BiasPositions(PositionalEncoding):
    """A learned (num_buckets, h) table of score offsets, looked up by bucketed relative position.

    Args:
        d_model: model width (sets the initial scale of the table, as in T5).
        num_heads: query heads; each has its own column of the table.
        head_dim: unused.
        key_dim: unused.
        num_buckets: buckets per site (bidirectional sites split them between the two directions).
        max_distance: distance from which all keys share one bucket.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        head_dim: int,
        key_dim: int | None = None,
        num_buckets: int = 32,
        max_distance: int = 128,
    ):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        if num_buckets < 4:
            raise ValueError(f"posenc.num_buckets must be at least 4, got {num_buckets}")
        if max_distance <= num_buckets // 2:
            raise ValueError(
                f"posenc.max_distance ({max_distance}) must exceed half of posenc.num_buckets "
                f"({num_buckets} // 2), where the exact buckets end"
            )
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.table = nn.Embedding(num_buckets, num_heads)  # (B, h)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)  # T5's initialisation

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str) -> ScoreMod:
        far = self.max_distance
        rel = torch.arange(-far, far + 1, device=q_pos.device)  # (2 far + 1,), j − i
        buckets = relative_position_bucket(rel, site == "encoder", self.num_buckets, far)  # (2 far + 1,)
        table = self.table.weight  # (B, h)

        def t5_bias(score, b, h, q_idx, kv_idx):
            rel = (k_pos[kv_idx] - q_pos[q_idx]).clamp(-far, far) + far  # index into buckets
            return score + table[buckets[rel], h].to(score.dtype)

        return t5_bias
