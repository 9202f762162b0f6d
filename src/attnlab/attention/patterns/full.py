"""allowed(i, j) = True: no structural restriction beyond the padding and causal masks."""

from __future__ import annotations

import torch


class FullPattern:
    """Every key the padding/causal masks allow (``attention/mask=full``, the default)."""

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool) -> torch.Tensor | None:
        return None
