"""allowed(i, j) = True: no structural restriction beyond the padding and causal masks."""

from __future__ import annotations

import torch

from attnlab.attention.patterns.base import MaskPattern


class FullPattern(MaskPattern):
    """Every key the padding/causal masks allow (``attention/mask=full``, the default)."""

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        return None
