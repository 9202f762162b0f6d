"""Boolean attention masks, True = may attend, shaped (b or 1, 1, t_q, t_k).

Padding and causal masks are always on; a structural pattern (``attention/mask=...``) composes on top
for the sites it is configured for. Patterns take query and key positions, so they work unchanged
during incremental decoding.
"""

from __future__ import annotations

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Keys that are real tokens: (b, t) token ids -> (b, 1, 1, t)."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """Key position <= query position: (t_q,), (t_k,) -> (1, 1, t_q, t_k)."""
    return (k_pos[None, :] <= q_pos[:, None])[None, None]


def combine(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the masks that are not None (broadcasting); None if all are None."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


class FullPattern:
    """No structural restriction: every key the padding/causal masks allow."""

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool) -> torch.Tensor | None:
        return None
