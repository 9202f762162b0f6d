"""MultiHead(Q, K, V) = Concat(g_1 head_1 … g_h head_h) W_O,
head_i = softmax(score(Q W_Q^i, K W_K^i) + bias) V W_V^i  (Vaswani et al., 2017), g = per-head gate,
W_Q^i, W_K^i: d_model × d_k,  W_V^i: d_model × d_v,  W_O: h d_v × d_model.

Shape letters: b batch, t_q / t_k query / key length, h query heads, h_kv key/value heads, d_k query/key
head dim (``key_dim``), d_v value head dim (``head_dim``). d_k = d_v unless ``key_dim`` is set: a smaller
d_k at fixed d_v is Vaswani et al.'s Table 3 row B.

Three paths that agree numerically (tested):
- fused: ``torch.nn.functional.scaled_dot_product_attention`` for any score that can say how SDPA
  computes it (``score.fused(q, k) -> (q, k, scale)``, None when it cannot); positional biases join
  the mask as floats;
- flex: the same fused scores through FlexAttention (``attnlab.attention.flex``): biases as the
  encoding's ``score_mod``, masks as a ``BlockMask``. ``backend`` chooses: ``sdpa`` never; ``auto`` on
  CUDA, outside incremental decoding; ``flex`` always (forward only off CUDA: training there is
  refused). Never with Shaw's query-dependent score terms or attention dropout while training;
- explicit: ``score(q, k)`` + bias, then ``AttentionProbs`` (masked softmax), then ``@ v``. Taken for
  scores without a ``fused`` form, for encodings that need the probabilities (Shaw's value terms), and
  whenever a hook observes ``self.probs`` (recording attention).

The gate ``head_gate`` (all ones, not trained) scales each head's output: zero removes a head, and the
gradient of the loss with respect to it measures the head's importance (Michel et al., 2019).
``projections=False`` gives the textbook "simplified attention" Q = K = V = X, with no projections.

Incremental decoding hands ``forward`` a ``KVCache`` (attnlab.model.cache): ``x_kv`` then holds only
the new tokens, ``k_pos`` every key position so far; the new keys are rotated at the last positions of
``k_pos`` and appended (self-attention), or the source's keys are projected once and reused (cross).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.attention.flex import flex_attend
from attnlab.attention.probs import AttentionProbs
from attnlab.attention.scores.base import Score
from attnlab.posenc.base import PositionalEncoding

if TYPE_CHECKING:
    from attnlab.model.cache import KVCache

SITES = ("encoder", "decoder", "cross")
BACKENDS = ("auto", "sdpa", "flex")  # attention.backend


def resolve_head_dim(d_model: int, num_heads: int, head_dim: int | None) -> int:
    """``head_dim`` if given, else d_model / num_heads (which must divide)."""
    if num_heads <= 0:
        raise ValueError(f"model.num_heads must be positive, got {num_heads}")
    if head_dim is not None:
        if head_dim <= 0:
            raise ValueError(f"model.head_dim must be positive or null, got {head_dim}")
        return head_dim
    if d_model % num_heads:
        raise ValueError(
            f"model.num_heads ({num_heads}) must divide model.d_model ({d_model}): "
            "pick a divisor or set model.head_dim"
        )
    return d_model // num_heads


def resolve_key_dim(head_dim: int, key_dim: int | None) -> int:
    """``key_dim`` if given, else ``head_dim`` (queries and keys as wide as values)."""
    if key_dim is None:
        return head_dim
    if key_dim <= 0:
        raise ValueError(f"model.key_dim must be positive or null, got {key_dim}")
    return key_dim


def _add(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    if a is None:
        return b
    return a if b is None else a + b


class MultiHeadAttention(nn.Module):
    """Multi-head attention with a pluggable score, positional encoding and key/value head count.

    Args:
        d_model: model width.
        num_heads: query heads.
        score: the score function (``attnlab.attention.scores.base.Score``).
        posenc: the positional encoding whose attention hooks apply at this site (a no-op
            ``PositionalEncoding()`` where the encoding does not act, see ``build_transformer``).
        site: ``"encoder"``, ``"decoder"`` or ``"cross"``.
        head_dim: per-head value width d_v (None = d_model / num_heads).
        key_dim: per-head query/key width d_k, the width the score sees (None = head_dim).
        num_kv_heads: key/value heads (None = num_heads; 1 = multi-query; else grouped-query).
        dropout: dropout on attention probabilities.
        projections: False = no Q/K/V/output projections (needs num_heads x head_dim = d_model
            and key_dim = head_dim).
        backend: ``auto``, ``sdpa`` or ``flex``: when fused scores run on FlexAttention (module
            docstring).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        score: Score,
        posenc: PositionalEncoding,
        site: str,
        head_dim: int | None = None,
        num_kv_heads: int | None = None,
        dropout: float = 0.0,
        projections: bool = True,
        key_dim: int | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        if site not in SITES:
            raise ValueError(f"attention site must be one of {SITES}, got '{site}'")
        if backend not in BACKENDS:
            raise ValueError(f"attention.backend must be one of {list(BACKENDS)}, got '{backend}'")
        self.head_dim = resolve_head_dim(d_model, num_heads, head_dim)
        self.key_dim = resolve_key_dim(self.head_dim, key_dim)
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if self.num_kv_heads <= 0 or num_heads % self.num_kv_heads:
            raise ValueError(
                f"model.num_kv_heads ({self.num_kv_heads}) must be positive and divide "
                f"model.num_heads ({num_heads})"
            )
        if not projections and (num_heads * self.head_dim != d_model or self.num_kv_heads != num_heads):
            raise ValueError(
                f"model.projections=false needs model.num_heads x model.head_dim ({num_heads} x "
                f"{self.head_dim}) = model.d_model ({d_model}) and model.num_kv_heads = model.num_heads"
            )
        if not projections and self.key_dim != self.head_dim:
            raise ValueError(
                f"model.projections=false needs model.key_dim ({self.key_dim}) = model.head_dim "
                f"({self.head_dim}): queries, keys and values are all the input"
            )
        self.site, self.score, self.posenc, self.dropout, self.backend = site, score, posenc, dropout, backend
        linear = nn.Linear if projections else (lambda i, o: nn.Identity())
        self.q_proj = linear(d_model, num_heads * self.key_dim)  # h d_k
        self.k_proj = linear(d_model, self.num_kv_heads * self.key_dim)  # h_kv d_k
        self.v_proj = linear(d_model, self.num_kv_heads * self.head_dim)  # h_kv d_v
        self.out_proj = linear(num_heads * self.head_dim, d_model)  # h d_v -> d_model
        self.head_gate = nn.Parameter(torch.ones(num_heads), requires_grad=False)  # (h,)
        self.probs = AttentionProbs()

    @staticmethod
    def _split(x: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
        """x (b, t, heads dim) -> (b, heads, t, dim)."""
        b, t, _ = x.shape
        return x.view(b, t, heads, dim).transpose(1, 2)  # (b, heads, t, dim)

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor,
        mask: torch.Tensor | None,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """x_q (b, t_q, d_model), x_kv (b, t_k, d_model), mask (b|1, 1, t_q, t_k) -> (b, t_q, d_model).

        With a ``cache``, ``x_kv`` holds the new keys' inputs only (b, t_new, d_model) and ``k_pos`` all
        t_k key positions; the keys and values attended to are the cache's after the update.
        """
        h, h_kv, d_k, d_v = self.num_heads, self.num_kv_heads, self.key_dim, self.head_dim
        q = self._split(self.q_proj(x_q), h, d_k)  # (b, h, t_q, d_k)
        if cache is None:
            k = self._split(self.k_proj(x_kv), h_kv, d_k)  # (b, h_kv, t_k, d_k)
            v = self._split(self.v_proj(x_kv), h_kv, d_v)  # (b, h_kv, t_k, d_v)
            q, k = self.posenc.rotate(q, k, q_pos, k_pos, self.site)
        elif cache.ready:  # the source's keys and values, projected on the first step
            k, v = cache.k, cache.v  # (b, h_kv, t_k, d_k), (b, h_kv, t_k, d_v)
            q, _ = self.posenc.rotate(q, k[:, :, :0], q_pos, k_pos[:0], self.site)  # q only
        else:
            k = self._split(self.k_proj(x_kv), h_kv, d_k)  # (b, h_kv, t_new, d_k)
            v = self._split(self.v_proj(x_kv), h_kv, d_v)  # (b, h_kv, t_new, d_v)
            q, k = self.posenc.rotate(q, k, q_pos, k_pos[k_pos.size(0) - k.size(2) :], self.site)
            k, v = cache.update(k, v)  # (b, h_kv, t_k, d_k), (b, h_kv, t_k, d_v)
        if h_kv != h:
            k = k.repeat_interleave(h // h_kv, dim=1)  # (b, h, t_k, d_k)
            v = v.repeat_interleave(h // h_kv, dim=1)  # (b, h, t_k, d_v)
        terms = self.posenc.score_terms(q, q_pos, k_pos, self.site)  # (b, h, t_q, t_k) or None
        fused = None
        if not self.posenc.needs_probs and not self.probs.observed:
            fused = self.score.fused(q, k)  # (q', k', scale) or None
        if fused is not None and terms is None and self._takes_flex(*fused[:2], v, cache is not None):
            mod = self.posenc.score_mod(q_pos, k_pos, self.site)
            out = flex_attend(*fused[:2], v, fused[2], mask, mod)  # (b, h, t_q, d_v)
        else:
            bias = _add(self.posenc.bias(q_pos, k_pos, self.site), terms)  # (b|1, h, t_q, t_k) or None
            if bias is not None:
                bias = bias.to(q.dtype)  # fused kernels want the mask in the query dtype (bf16 on GPU)
            if fused is not None:
                out = self._fused(*fused, v, mask, bias)
            else:
                out = self._explicit(q, k, v, mask, bias, q_pos, k_pos)
        if mask is not None:
            out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # empty rows -> 0 on every backend
        out = out * self.head_gate.view(1, -1, 1, 1)  # (b, h, t_q, d_v)
        b, _, t_q, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t_q, -1))  # (b, t_q, h d_v) -> (b, t_q, d_model)

    def _takes_flex(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decoding: bool) -> bool:
        """Whether a forward that FlexAttention can express (a fused score's q', k', no probabilities,
        no query-dependent terms) runs on it, by ``backend``."""
        if self.backend == "sdpa" or (self.training and self.dropout > 0):
            return False
        if self.backend == "auto":
            return q.is_cuda and not decoding
        if q.device.type == "cpu" and (q.requires_grad or k.requires_grad or v.requires_grad):
            raise ValueError(
                "attention.backend=flex cannot train on CPU (FlexAttention has no backward there): "
                "use attention.backend=auto or sdpa, or run without gradients (torch.no_grad())"
            )
        return True

    def _fused(self, q, k, scale, v, mask, bias) -> torch.Tensor:
        """q (b, h, t_q, d_k), k (b, h, t_k, d_k), v (b, h, t_k, d_v) -> (b, h, t_q, d_v)."""
        attn_mask = mask
        if bias is not None:
            attn_mask = bias if mask is None else bias.masked_fill(~mask, torch.finfo(bias.dtype).min)
        dropout = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout, scale=scale
        )  # (b, h, t_q, d_v)

    def _explicit(self, q, k, v, mask, bias, q_pos, k_pos) -> torch.Tensor:
        """q (b, h, t_q, d_k), k (b, h, t_k, d_k), v (b, h, t_k, d_v) -> (b, h, t_q, d_v)."""
        scores = self.score(q, k)  # (b, h, t_q, t_k)
        if bias is not None:
            scores = scores + bias
        p = self.probs(scores, mask)  # (b, h, t_q, t_k)
        p = F.dropout(p, self.dropout, self.training)
        return _add(p @ v, self.posenc.value_terms(p, q_pos, k_pos, self.site))  # (b, h, t_q, d_v)
