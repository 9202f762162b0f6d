"""Encoder–decoder Transformer (Vaswani et al., 2017) built from pluggable attention parts.

Shape letters: b batch, s source length, t target length, m d_model, V vocabulary.
``build_transformer`` wires the parts (``attnlab.model.spec``): each attention site gets the configured
score (or scaled dot where the score is restricted to other sites) and structural mask pattern (or
none); each stack gets its own positional encoding instance, and cross-attention gets the decoder's only
when the encoding acts there (``PositionalEncoding.acts_in_cross_attention``). ``attention.backend=auto``
reaches only the sites where FlexAttention can gain, those with a mask pattern or a score bias; the
others get ``sdpa``. ``pad_id=None`` in
``Encoder``/``Decoder`` means padded keys are not masked. ``Decoder`` also runs one step at a time
with a ``DecoderCache`` (incremental decoding, see attnlab.model.cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from attnlab.attention.masks import causal_mask, combine, padding_mask
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.patterns.base import MaskPattern
from attnlab.attention.patterns.full import FullPattern
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.model.cache import DecoderCache
from attnlab.model.layers import DecoderLayer, EncoderLayer, FeedForward
from attnlab.model.spec import AttentionParts, TransformerSpec
from attnlab.posenc.base import PositionalEncoding


class Encoder(nn.Module):
    def __init__(
        self,
        embed: nn.Embedding,
        posenc: PositionalEncoding,
        layers: Sequence[EncoderLayer],
        pattern: MaskPattern,
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
        mask = combine(key_mask, self.pattern(pos, pos))  # (b, 1, s|1, s)
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
        self_pattern: MaskPattern,
        cross_pattern: MaskPattern,
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
            self.self_pattern(tgt_pos, key_pos),
        )  # (b, 1, t_new, t)
        cross_mask = combine(src_key_mask, self.cross_pattern(tgt_pos, src_pos))
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


def build_transformer(spec: TransformerSpec, parts: AttentionParts, vocab_size: int, pad_id: int) -> Seq2Seq:
    """Builds the model that ``spec`` sizes from the attention ``parts``, for a vocabulary.

    The score factory is called with ``key_dim`` (the query/key width d_k it scores over) and
    ``num_heads``; the posenc factory with ``d_model``, ``num_heads``, ``head_dim`` (the value width d_v)
    and ``key_dim`` (None when it is not set, meaning head_dim): the way Hydra ``_partial_`` configs are
    finished.
    """
    if vocab_size <= 0:
        raise ValueError(f"model.vocab_size must be positive, got {vocab_size}")
    d_model, num_heads, dropout, norm_first = spec.d_model, spec.num_heads, spec.dropout, spec.norm_first
    d_v, d_k = spec.value_dim, spec.query_key_dim
    enc_pe, dec_pe = (
        parts.posenc(d_model=d_model, num_heads=num_heads, head_dim=d_v, key_dim=spec.key_dim)
        for _ in range(2)
    )
    cross_pe = dec_pe if dec_pe.acts_in_cross_attention else PositionalEncoding(d_model, num_heads, d_v)

    def pattern(site: str) -> MaskPattern:
        return parts.mask if site in parts.mask_sites else FullPattern()

    def backend(site: str, pe: PositionalEncoding) -> str:
        gains = not isinstance(pattern(site), FullPattern) or pe.adds_score_bias  # skipped blocks, no bias
        return "sdpa" if parts.backend == "auto" and not gains else parts.backend

    def attention(site: str, pe: PositionalEncoding) -> MultiHeadAttention:
        score = parts.score if site in parts.score_sites else ScaledDotScore
        return MultiHeadAttention(
            d_model,
            num_heads,
            score(key_dim=d_k, num_heads=num_heads),
            pe,
            site,
            head_dim=d_v,
            key_dim=d_k,
            num_kv_heads=spec.num_kv_heads,
            dropout=spec.attention_dropout,
            projections=spec.projections,
            backend=backend(site, pe),
        )

    def ffn() -> FeedForward:
        return FeedForward(d_model, spec.ffn_dim, dropout)

    embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
    nn.init.normal_(embed.weight, std=d_model**-0.5)
    with torch.no_grad():
        embed.weight[pad_id].zero_()
    enc_layers = [
        EncoderLayer(attention("encoder", enc_pe), ffn(), dropout, norm_first)
        for _ in range(spec.encoder_layers)
    ]
    dec_layers = [
        DecoderLayer(attention("decoder", dec_pe), attention("cross", cross_pe), ffn(), dropout, norm_first)
        for _ in range(spec.decoder_layers)
    ]
    mask_pad = pad_id if parts.padding_mask else None
    encoder = Encoder(embed, enc_pe, enc_layers, pattern("encoder"), mask_pad, dropout, norm_first)
    decoder = Decoder(
        embed, dec_pe, dec_layers, pattern("decoder"), pattern("cross"), mask_pad, dropout, norm_first
    )
    return Seq2Seq(encoder, decoder, vocab_size, spec.tie_embeddings)
