"""allowed(i, j) = |i − j| ≤ w: a sliding window (Luong et al., 2015 "local"; Beltagy et al., 2020).

Symmetric in the encoder; in the decoder the causal mask composes underneath, so the window becomes
the w previous positions and the current one.
"""

from __future__ import annotations

import torch

from attnlab.attention.patterns.base import MaskPattern


class LocalPattern(MaskPattern):
    """Attend only within ``window`` positions of the query.

    Args:
        window: half-width w ≥ 1 (``attention.mask.window``).
    """

    def __init__(self, window: int = 4):
        if window <= 0:
            raise ValueError(f"attention.mask.window must be positive, got {window}")
        self.window = window

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(t_q,), (t_k,) -> (1, 1, t_q, t_k)."""
        dist = (q_pos[:, None] - k_pos[None, :]).abs()  # (t_q, t_k)
        return (dist <= self.window)[None, None]
