"""allowed(i, j) = (i − j) mod r = 0 and |i − j| ≤ w·r: a strided, dilated window (Child et al., 2019).

Each query sees every r-th position (always itself), up to ``window`` strides away (null = no limit).
In the decoder the causal mask composes underneath.
"""

from __future__ import annotations

import torch

from attnlab.attention.patterns.base import MaskPattern


class DilatedPattern(MaskPattern):
    """Strided attention.

    Args:
        dilation: stride r ≥ 1 (``attention.mask.dilation``); 1 with no window = full attention.
        window: number of strides w ≥ 1 each side, or None for no limit (``attention.mask.window``).
    """

    def __init__(self, dilation: int = 2, window: int | None = None):
        if dilation <= 0:
            raise ValueError(f"attention.mask.dilation must be positive, got {dilation}")
        if window is not None and window <= 0:
            raise ValueError(f"attention.mask.window must be positive or null, got {window}")
        self.dilation, self.window = dilation, window

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(t_q,), (t_k,) -> (1, 1, t_q, t_k)."""
        dist = (q_pos[:, None] - k_pos[None, :]).abs()  # (t_q, t_k)
        allowed = dist % self.dilation == 0
        if self.window is not None:
            allowed &= dist <= self.window * self.dilation
        return allowed[None, None]
