"""No positional information: attention is permutation-equivariant (a baseline and an ablation)."""

from attnlab.posenc.base import PositionalEncoding


class NonePositions(PositionalEncoding):
    """Adds nothing anywhere (every hook of ``PositionalEncoding`` is a no-op)."""
