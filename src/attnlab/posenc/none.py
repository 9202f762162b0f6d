"""No positional information: attention is permutation-equivariant (a baseline and an ablation)."""

from attnlab.posenc.base import PositionalEncoding as NoPositions

__all__ = ["NoPositions"]
