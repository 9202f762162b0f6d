"""K_≤t = [K_<t; x_t W_K], V_≤t = [V_<t; x_t W_V]: what incremental decoding keeps between steps.

Shape letters: b batch (sentences × beams), h_kv key/value heads, t keys so far, s source length,
d_k key head dim (``model.key_dim``), d_v value head dim (``model.head_dim``).

Without a cache, decoding step t re-runs the decoder over the whole prefix: every layer projects and
attends from all t positions again, and cross-attention re-projects the source, O(t) work for one new
token. With it, a step feeds the new token only: decoder self-attention appends that token's key and
value to the layer's ``KVCache`` and attends over the stored ones, and cross-attention projects the
source once (on the first step) and reuses it. Keys are stored after the positional rotation (RoPE
rotates each key by its own position, so a stored key never changes) and before heads are repeated
for grouped-query attention: h_kv heads, not h, which is the memory and bandwidth saving that
multi-query and grouped-query attention exist for (Shazeer, 2019; Ainslie et al., 2023).
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys (b, h_kv, t, d_k) and values (b, h_kv, t, d_v) of one attention module; None before a call.

    Args:
        static: True for cross-attention: keys and values are computed on the first call and reused
            after (the source does not change while decoding); False: each call appends its tokens'.
    """

    def __init__(self, static: bool):
        self.static = static
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def ready(self) -> bool:
        """True when the stored keys and values are all the next call needs (a filled static cache)."""
        return self.static and self.k is not None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stores new keys (b, h_kv, t_new, d_k) and values (b, h_kv, t_new, d_v); returns all so far."""
        if self.k is None or self.static:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)  # (b, h_kv, t, d_k)
            self.v = torch.cat([self.v, v], dim=2)  # (b, h_kv, t, d_v)
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> None:
        """Keeps rows ``index`` (b',) of the batch, in that order (beam search follows its beams)."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)  # (b', h_kv, t, d_k)
            self.v = self.v.index_select(0, index)  # (b', h_kv, t, d_v)


class DecoderCache:
    """The decoder's state between steps: the tokens fed so far and each layer's (self, cross) caches.

    The tokens give the new queries their positions (they follow the cached ones) and the self-attention
    padding mask over every cached key, so a cached step sees exactly the keys an uncached one would.

    Args:
        num_layers: decoder layers.
    """

    def __init__(self, num_layers: int):
        self.tokens: torch.Tensor | None = None  # (b, t)
        self.layers = [(KVCache(static=False), KVCache(static=True)) for _ in range(num_layers)]

    @property
    def length(self) -> int:
        """Positions already decoded (t)."""
        return 0 if self.tokens is None else self.tokens.size(1)

    def append(self, tokens: torch.Tensor) -> torch.Tensor:
        """Records new tokens (b, t_new); returns every token so far, (b, t)."""
        self.tokens = tokens if self.tokens is None else torch.cat([self.tokens, tokens], dim=1)  # (b, t)
        return self.tokens

    def reorder_beams(self, index: torch.Tensor) -> None:
        """Keeps rows ``index`` (b,) of the batch, each taken from the same sentence's beams.

        Cross-attention keys and values are equal for every beam of a sentence, so they stay as they
        are; ``index`` must therefore never move a row to another sentence.
        """
        self.tokens = self.tokens.index_select(0, index)  # (b, t)
        for self_cache, _ in self.layers:
            self_cache.reorder(index)
