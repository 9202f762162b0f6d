"""What ``build_transformer`` builds: the sizes (``TransformerSpec``, ``conf/model/``) and the attention
parts with the sites they apply to (``AttentionParts``, ``conf/attention/`` and ``conf/posenc/``).

Both check their values where they are made, so a bad size or site stops a run before anything is
built, with a message that names the key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attnlab.attention.multi_head import BACKENDS, SITES, resolve_head_dim, resolve_key_dim
from attnlab.attention.patterns.base import MaskPattern
from attnlab.attention.scores.base import Score
from attnlab.posenc.base import PositionalEncoding


@dataclass(frozen=True)
class TransformerSpec:
    """Sizes of an encoder–decoder Transformer (``model.*``).

    Args:
        d_model: model width.
        num_heads: query heads per attention layer.
        head_dim: per-head value width d_v; None = d_model / num_heads.
        key_dim: per-head query/key width d_k; None = head_dim. A smaller d_k at fixed d_v is Vaswani
            et al. (2017), Table 3 row B.
        num_kv_heads: key/value heads; None = num_heads, 1 = multi-query, a divisor = grouped-query.
        encoder_layers, decoder_layers: layer counts.
        ffn_dim: hidden width of the feed-forward sublayers.
        dropout: dropout on embeddings and sublayer outputs.
        attention_dropout: dropout on attention probabilities.
        norm_first: pre-LN (True) or post-LN as in Vaswani et al. (False).
        tie_embeddings: the output projection shares the embedding matrix.
        projections: False = the textbook simplified attention Q = K = V = X (no projections).
    """

    d_model: int = 128
    num_heads: int = 4
    head_dim: int | None = None
    key_dim: int | None = None
    num_kv_heads: int | None = None
    encoder_layers: int = 2
    decoder_layers: int = 2
    ffn_dim: int = 512
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm_first: bool = True
    tie_embeddings: bool = True
    projections: bool = True

    def __post_init__(self) -> None:
        sizes = dict(
            d_model=self.d_model,
            encoder_layers=self.encoder_layers,
            decoder_layers=self.decoder_layers,
            ffn_dim=self.ffn_dim,
        )
        for key, value in sizes.items():
            if value <= 0:
                raise ValueError(f"model.{key} must be positive, got {value}")
        for key, value in dict(dropout=self.dropout, attention_dropout=self.attention_dropout).items():
            if not 0.0 <= value < 1.0:
                raise ValueError(f"model.{key} must be in [0, 1), got {value}")
        self.query_key_dim  # noqa: B018 - resolving it raises for a bad key_dim

    @property
    def value_dim(self) -> int:
        """d_v: ``head_dim``, else d_model / num_heads (which must divide)."""
        return resolve_head_dim(self.d_model, self.num_heads, self.head_dim)

    @property
    def query_key_dim(self) -> int:
        """d_k: ``key_dim``, else d_v."""
        return resolve_key_dim(self.value_dim, self.key_dim)


@dataclass(frozen=True)
class AttentionParts:
    """The attention choices of a model and the sites (``encoder``, ``decoder``, ``cross``) they apply to.

    Args:
        score: makes a score from ``(key_dim, num_heads)`` (a ``_partial_`` of ``conf/attention/score``).
        mask: the structural mask pattern (``conf/attention/mask``).
        posenc: makes a positional encoding from ``(d_model, num_heads, head_dim, key_dim)`` (a
            ``_partial_`` of ``conf/posenc``); one per stack.
        score_sites: sites that use ``score``; the others use scaled dot product.
        mask_sites: sites that use ``mask``; the others attend everywhere padding and causality allow.
        padding_mask: False lets attention see padded keys (an ablation).
        backend: ``auto``: FlexAttention on CUDA at the sites with a mask pattern or a score bias,
            where it can express the forward (a fused score, no recording, no attention dropout while
            training, no incremental decoding), SDPA or the explicit path otherwise; ``sdpa``: never
            FlexAttention; ``flex``: FlexAttention wherever it can express the forward (off CUDA
            forward only: training there is refused). See ``attnlab.attention.flex``.
    """

    score: Callable[..., Score]
    mask: MaskPattern
    posenc: Callable[..., PositionalEncoding]
    score_sites: tuple[str, ...] = SITES
    mask_sites: tuple[str, ...] = ("encoder", "decoder")
    padding_mask: bool = True
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"attention.backend must be one of {list(BACKENDS)}, got '{self.backend}'")
        for key in ("score_sites", "mask_sites"):
            sites = tuple(getattr(self, key))
            object.__setattr__(self, key, sites)
            unknown = sorted(set(sites) - set(SITES))
            if unknown:
                raise ValueError(f"attention.{key} has unknown sites {unknown}; choose from {list(SITES)}")
