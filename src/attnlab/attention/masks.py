"""Boolean attention masks, True = may attend, shaped (b or 1, 1, t_q, t_k).

Padding and causal masks are always on (``attention.padding_mask=false`` drops padding, as an
ablation); a structural pattern (``attention/mask=...``, one file each in ``attention/patterns/``)
composes on top for the sites in ``attention.mask_sites``. Patterns take query and key positions, so
they work unchanged during incremental decoding.
"""

from __future__ import annotations

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int | None) -> torch.Tensor | None:
    """Keys that are real tokens: (b, t) token ids -> (b, 1, 1, t); None when ``pad_id`` is None."""
    if pad_id is None:
        return None
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
