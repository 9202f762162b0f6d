"""Encoder–decoder Transformer (Vaswani et al., 2017) built from pluggable attention parts.

Shape letters: b batch, s source length, t target length, m d_model, V vocabulary.
``build_transformer`` wires the parts: each attention site gets the configured score (or scaled dot
where the score is restricted to other sites) and structural mask pattern (or none); each stack gets
its own positional encoding instance, the decoder's also serving cross-attention. ``pad_id=None`` in
``Encoder``/``Decoder`` means padded keys are not masked. ``Decoder`` also runs one step at a time
with a ``DecoderCache`` (incremental decoding, see attnlab.model.cache).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from attnlab.attention.masks import causal_mask, combine, padding_mask
from attnlab.attention.multi_head import SITES, MultiHeadAttention, resolve_head_dim, resolve_key_dim
from attnlab.attention.patterns.full import FullPattern
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.model.cache import DecoderCache
from attnlab.model.layers import DecoderLayer, EncoderLayer, FeedForward
from attnlab.posenc.base import PositionalEncoding


class Encoder(nn.Module):
    def __init__(
        self,
        embed: nn.Embedding,
        posenc: PositionalEncoding,
        layers: Sequence[EncoderLayer],
        pattern: Callable,
        pad_id: int | None,
        dropout: float,
        final_norm: bool,
    ):
        super().__init__()
        self.embed, self.posenc, self.layers = embed, posenc, nn.ModuleList(layers)
        self.pattern, self.pad_id = pattern, pad_id
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(embed.embedding_dim) if final_norm else nn.Identity()

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src (b, s) token ids -> memory (b, s, m), key mask (b, 1, 1, s) or None (padding unmasked)."""
        pos = torch.arange(src.size(1), device=src.device)  # (s,)
        key_mask = padding_mask(src, self.pad_id)  # (b, 1, 1, s)
        mask = combine(key_mask, self.pattern(pos, pos, causal=False))  # (b, 1, s|1, s)
        x = self.embed(src) * math.sqrt(self.embed.embedding_dim)  # (b, s, m)
        x = self.dropout(self.posenc.embed(x, pos))
        for layer in self.layers:
            x = layer(x, mask, pos)
        return self.norm(x), key_mask


class Decoder(nn.Module):
    def __init__(
        self,
        embed: nn.Embedding,
        posenc: PositionalEncoding,
        layers: Sequence[DecoderLayer],
        self_pattern: Callable,
        cross_pattern: Callable,
        pad_id: int | None,
        dropout: float,
        final_norm: bool,
    ):
        super().__init__()
        self.embed, self.posenc, self.layers = embed, posenc, nn.ModuleList(layers)
        self.self_pattern, self.cross_pattern, self.pad_id = self_pattern, cross_pattern, pad_id
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(embed.embedding_dim) if final_norm else nn.Identity()

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_key_mask: torch.Tensor | None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """tgt (b, t) ids (starting with <bos>), memory (b, s, m) -> hidden states (b, t, m).

        With a ``cache`` (``DecoderCache(len(decoder.layers))``, empty at the first step), ``tgt`` holds
        only the new tokens (b, t_new), placed after the cached ones; returns their states (b, t_new, m)
        and extends the cache. Feeding a sentence in pieces gives the states of feeding it whole.
        """
        if cache is None:
            tgt_pos = torch.arange(tgt.size(1), device=tgt.device)  # (t,)
            keys, key_pos = tgt, tgt_pos
        else:
            start = cache.length
            tgt_pos = torch.arange(start, start + tgt.size(1), device=tgt.device)  # (t_new,)
            keys = cache.append(tgt)  # (b, t)
            key_pos = torch.arange(keys.size(1), device=tgt.device)  # (t,)
        src_pos = torch.arange(memory.size(1), device=memory.device)  # (s,)
        self_mask = combine(
            padding_mask(keys, self.pad_id),
            causal_mask(tgt_pos, key_pos),
            self.self_pattern(tgt_pos, key_pos, causal=True),
        )  # (b, 1, t_new, t)
        cross_mask = combine(src_key_mask, self.cross_pattern(tgt_pos, src_pos, causal=False))
        y = self.embed(tgt) * math.sqrt(self.embed.embedding_dim)  # (b, t_new, m)
        y = self.dropout(self.posenc.embed(y, tgt_pos))
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[i]
            y = layer(y, memory, self_mask, cross_mask, tgt_pos, src_pos, layer_cache, key_pos)
        return self.norm(y)


class Seq2Seq(nn.Module):
    """Encoder, decoder and an output projection (tied to the shared embedding when asked)."""

    def __init__(self, encoder: Encoder, decoder: Decoder, vocab_size: int, tie_embeddings: bool):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        d_model = decoder.embed.embedding_dim
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.generator.weight = decoder.embed.weight

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src (b, s), tgt (b, t) -> logits (b, t, V)."""
        memory, src_mask = self.encoder(src)
        return self.generator(self.decoder(tgt, memory, src_mask))


def build_transformer(
    vocab_size: int,
    pad_id: int,
    score: Callable[..., nn.Module],
    mask_pattern: Callable,
    posenc: Callable[..., PositionalEncoding],
    d_model: int = 128,
    num_heads: int = 4,
    head_dim: int | None = None,
    key_dim: int | None = None,
    num_kv_heads: int | None = None,
    encoder_layers: int = 2,
    decoder_layers: int = 2,
    ffn_dim: int = 512,
    dropout: float = 0.1,
    attention_dropout: float = 0.0,
    norm_first: bool = True,
    tie_embeddings: bool = True,
    projections: bool = True,
    score_sites: Sequence[str] = SITES,
    mask_sites: Sequence[str] = ("encoder", "decoder"),
    padding_mask: bool = True,
) -> Seq2Seq:
    """Builds the model from sizes and factories for the score, mask pattern and positional encoding.

    ``score`` is called with ``key_dim`` (the query/key width d_k it scores over) and ``num_heads``;
    ``posenc`` with ``d_model``, ``num_heads``, ``head_dim`` (the value width d_v) and ``key_dim`` (None
    when it is not set, meaning head_dim): the way Hydra ``_partial_`` configs are finished.
    ``head_dim=None`` is d_model / num_heads; ``key_dim=None`` is head_dim, and a smaller ``key_dim`` at
    fixed ``head_dim`` is Vaswani et al. (2017), Table 3 row B. ``projections=False`` is the textbook
    simplified attention (Q = K = V = X); ``padding_mask=False`` lets attention see padded keys (an
    ablation).
    """
    for key, value in dict(
        d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        ffn_dim=ffn_dim,
        vocab_size=vocab_size,
    ).items():
        if value <= 0:
            raise ValueError(f"model.{key} must be positive, got {value}")
    for key, value in dict(dropout=dropout, attention_dropout=attention_dropout).items():
        if not 0.0 <= value < 1.0:
            raise ValueError(f"model.{key} must be in [0, 1), got {value}")
    for key, sites in dict(score_sites=score_sites, mask_sites=mask_sites).items():
        unknown = sorted(set(sites) - set(SITES))
        if unknown:
            raise ValueError(f"attention.{key} has unknown sites {unknown}; choose from {list(SITES)}")
    d = resolve_head_dim(d_model, num_heads, head_dim)
    d_k = resolve_key_dim(d, key_dim)
    enc_pe = posenc(d_model=d_model, num_heads=num_heads, head_dim=d, key_dim=key_dim)
    dec_pe = posenc(d_model=d_model, num_heads=num_heads, head_dim=d, key_dim=key_dim)

    def attention(site: str, pe: PositionalEncoding) -> MultiHeadAttention:
        site_score = score if site in score_sites else ScaledDotScore
        return MultiHeadAttention(
            d_model,
            num_heads,
            site_score(key_dim=d_k, num_heads=num_heads),
            pe,
            site,
            head_dim=d,
            key_dim=d_k,
            num_kv_heads=num_kv_heads,
            dropout=attention_dropout,
            projections=projections,
        )

    def pattern(site: str) -> Callable:
        return mask_pattern if site in mask_sites else FullPattern()

    embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
    nn.init.normal_(embed.weight, std=d_model**-0.5)
    with torch.no_grad():
        embed.weight[pad_id].zero_()
    enc_layers = [
        EncoderLayer(
            attention("encoder", enc_pe), FeedForward(d_model, ffn_dim, dropout), dropout, norm_first
        )
        for _ in range(encoder_layers)
    ]
    dec_layers = [
        DecoderLayer(
            attention("decoder", dec_pe),
            attention("cross", dec_pe),
            FeedForward(d_model, ffn_dim, dropout),
            dropout,
            norm_first,
        )
        for _ in range(decoder_layers)
    ]
    mask_pad = pad_id if padding_mask else None
    encoder = Encoder(embed, enc_pe, enc_layers, pattern("encoder"), mask_pad, dropout, norm_first)
    decoder = Decoder(
        embed, dec_pe, dec_layers, pattern("decoder"), pattern("cross"), mask_pad, dropout, norm_first
    )
    return Seq2Seq(encoder, decoder, vocab_size, tie_embeddings)
