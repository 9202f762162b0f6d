"""The places a positional encoding may act; each encoding overrides only those it needs.

- ``embed``: add to token embeddings (sinusoidal, learned);
- ``rotate``: transform queries and keys per head (RoPE);
- ``score_mod``: add a content-free term to attention scores (ALiBi, T5), written once as a
  FlexAttention ``score_mod``: a function of the head and the query and key indices, which the flex
  kernel evaluates per score, so the term is never materialised (``attnlab.attention.flex``);
- ``bias``: the same term as a (1, h, t_q, t_k) tensor for the SDPA and explicit paths, derived here
  by evaluating ``score_mod`` on the whole (head, query, key) grid (indexing broadcasts), so the two
  forms cannot drift apart;
- ``score_terms`` and ``value_terms``: content-dependent relative terms, q_i·a^K_ij added to the scores
  and Σ_j p_ij a^V_ij added to the output (Shaw et al., 2018). An encoding with value terms sets
  ``needs_probs = True``, which sends attention through the explicit path (the probabilities must exist).

One instance serves one stack (encoder or decoder). Cross-attention is a policy, one class attribute:
``acts_in_cross_attention`` (default False). When it is False, ``build_transformer`` hands
cross-attention a no-op ``PositionalEncoding()`` instead of the decoder's encoding, so no hook below
ever sees site ``"cross"``. That is the right default for every relative or rotary encoding: there the
query position indexes the target and the key position the source, so i − j compares positions in two
different sentences. A bias or rotation on it would impose a monotone, diagonal alignment prior that is
wrong for reordering language pairs (the synthetic corpus is SVO → SOV), has no published counterpart
(T5 and ALiBi add nothing there; Shaw et al. define relative terms for self-attention only; RoPE was
defined for self-attention), and would bias the alignment error rate measured on cross-attention.
Content alone finds the source word; the encoder's memory already carries relative order. Encodings
that only ``embed`` never act in attention at all.

Every encoding is built as ``(d_model, num_heads, head_dim, key_dim)`` plus its own hyperparameters
(a Hydra ``_partial_`` finished by ``build_transformer``): ``head_dim`` is the value width d_v,
``key_dim`` the query/key width d_k (None = head_dim), so what touches q and k uses d_k and what adds
to the output uses d_v. Shape letters: b batch, h query heads, h_kv key/value heads, t_q / t_k query /
key length, d_k query/key head dim, d_v value head dim.
``site`` is ``"encoder"`` or ``"decoder"`` (or ``"cross"`` for an encoding that acts there), so an
encoding can treat them differently (e.g. symmetric vs causal ALiBi).

A new encoding is one file here, ``<name>.py`` defining ``<Name>Positions(PositionalEncoding)``, and one
YAML, ``conf/posenc/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import nn

# FlexAttention's score_mod: (score, b, h, q_idx, kv_idx) -> score, on 0-d tensors (scalars in the kernel)
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class PositionalEncoding(nn.Module):
    """Acts nowhere (``posenc=none``); subclasses override the hooks they need."""

    needs_probs = False
    acts_in_cross_attention: ClassVar[bool] = False  # see the module docstring

    def __init__(self, d_model: int, num_heads: int, head_dim: int, key_dim: int | None = None):
        super().__init__()
        self.num_heads = num_heads

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x (b, t, d_model), positions (t,) -> (b, t, d_model)."""
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q (b, h, t_q, d_k), k (b, h_kv, t_k, d_k) -> same shapes."""
        return q, k

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str) -> ScoreMod | None:
        """The content-free score term as a FlexAttention score_mod: ``mod(score, b, h, i, j)`` is the
        score plus the term of head h, query ``q_pos[i]`` (t_q,) and key ``k_pos[j]`` (t_k,); it must
        also accept broadcasting index tensors (``bias`` relies on it). None = no term."""
        return None

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str) -> torch.Tensor | None:
        """``score_mod`` as an additive score bias (1, h, t_q, t_k), or None."""
        mod = self.score_mod(q_pos, k_pos, site)
        if mod is None:
            return None
        device = q_pos.device
        h = torch.arange(self.num_heads, device=device)[:, None, None]  # (h, 1, 1)
        i = torch.arange(q_pos.numel(), device=device)[:, None]  # (t_q, 1)
        j = torch.arange(k_pos.numel(), device=device)[None, :]  # (1, t_k)
        held = next(iter([*self.parameters(), *self.buffers()]), None)
        zero = torch.zeros((), device=device, dtype=held.dtype if held is not None else None)
        return mod(zero, 0, h, i, j).expand(self.num_heads, i.size(0), j.size(1))[None]  # (1, h, t_q, t_k)

    @property
    def adds_score_bias(self) -> bool:
        """True when the encoding defines ``score_mod``: it adds a content-free score term."""
        return type(self).score_mod is not PositionalEncoding.score_mod

    def score_terms(
        self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str
    ) -> torch.Tensor | None:
        """Query-dependent additive score terms: q (b, h, t_q, d_k) -> (b, h, t_q, t_k), or None."""
        return None

    def value_terms(
        self, p: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, site: str
    ) -> torch.Tensor | None:
        """Output additions from probabilities: p (b, h, t_q, t_k) -> (b, h, t_q, d_v), or None."""
        return None
