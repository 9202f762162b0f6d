"""The mask-pattern contract: which keys each query may attend to, from positions alone.

    pattern(q_pos (t_q,), k_pos (t_k,))  ->  allowed (1, 1, t_q, t_k) boolean, or None (no restriction)

A pattern composes on top of the padding and causal masks, which are always on, so it never needs to
know the site: in the decoder the causal mask cuts a symmetric window down to its past half. Patterns
take positions (not lengths), so they work unchanged during incremental decoding, where the queries
are the last positions only.

A new pattern is one file here, ``<name>.py`` defining ``<Name>Pattern(MaskPattern)``, and one YAML,
``conf/attention/mask/<name>.yaml``.
"""

from __future__ import annotations

import torch


class MaskPattern:
    """Base of every structural mask pattern."""

    def __call__(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """(t_q,), (t_k,) -> (1, 1, t_q, t_k), True = may attend; None = every key."""
        raise NotImplementedError
