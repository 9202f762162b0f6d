"""The score contract: ``score(q, k)`` maps queries and keys of each head to attention logits.

    q (b, h, t_q, d_k), k (b, h, t_k, d_k)  ->  scores (b, h, t_q, t_k)

Every score is built as ``Score(key_dim, num_heads, **its own hyperparameters)``: a Hydra ``_partial_``
(``conf/attention/score/<name>.yaml``) that ``build_transformer`` finishes with the model's d_k and head
count. A score that ``scaled_dot_product_attention`` can compute also says how (``fused``), and then runs
on the fused path; ``MultiHeadAttention`` checks that both paths agree (tested for every score).

A new score is one file here, ``<name>.py`` defining ``<Name>Score(Score)``, and one YAML,
``conf/attention/score/<name>.yaml``; the tests, the ``scores`` sweep and the experiments pick it up.
"""

from __future__ import annotations

import torch
from torch import nn


class Score(nn.Module):
    """Base of every score function.

    Args:
        key_dim: query/key width d_k that the score compares.
        num_heads: heads h (for per-head parameters).
    """

    def __init__(self, key_dim: int, num_heads: int):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        raise NotImplementedError

    def fused(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float] | None:
        """(q', k', scale) for which ``scaled_dot_product_attention`` computes this score, q'·k' × scale;
        ``None`` when it cannot (the explicit path is taken)."""
        return None
