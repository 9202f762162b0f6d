"""p = softmax(scores masked to -inf) — the attention probabilities, and the point hooks read.

A query row with nothing to attend to gets all-zero weights, never NaN. ``AttentionProbs`` holds no
state: callbacks read its outputs through forward hooks (``register_forward_hook``), and while any
hook is registered ``MultiHeadAttention`` takes the explicit path so the probabilities exist.
"""

from __future__ import annotations

import torch
from torch import nn


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis where ``mask`` is True; fully masked rows become zeros.

    Args:
        scores: (b, h, t_q, t_k) attention scores.
        mask: boolean, broadcastable to ``scores``; True = may attend. None = attend everywhere.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    # A finite fill (not -inf) keeps a fully masked row finite: it softmaxes to uniform, then is zeroed.
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)  # (b, h, t_q, t_k)


class AttentionProbs(nn.Module):
    """Masked softmax as a module, so forward hooks can observe attention maps."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return masked_softmax(scores, mask)

    @property
    def observed(self) -> bool:
        """True while a forward hook is registered on this module (or globally)."""
        return bool(self._forward_hooks) or bool(nn.modules.module._global_forward_hooks)
