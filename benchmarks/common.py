"""What the decoding benchmarks share: a randomly initialised ``model=small``-sized model (d_model 256,
4 heads, 3 + 3 layers, FFN 1024; vocabulary 8000, about Multi30k's SentencePiece size), random sources,
and special ids whose <eos> the model never produces, so every sentence decodes to the length limit."""

from __future__ import annotations

import torch

from attnlab.attention.patterns.full import FullPattern
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.data.tokenizers.base import SpecialIds
from attnlab.model.spec import AttentionParts, TransformerSpec
from attnlab.model.transformer import Seq2Seq, build_transformer
from attnlab.posenc.sinusoidal import SinusoidalPositions

VOCAB, PAD = 8000, 0
IDS = SpecialIds(pad_id=PAD, bos_id=1, eos_id=VOCAB, unk_id=3)  # <eos> outside the vocabulary


def small_model(device: torch.device, num_heads: int = 4, num_kv_heads: int | None = None) -> Seq2Seq:
    """A ``model=small``-sized Transformer with scaled dot and sinusoids, dropout off, in eval mode."""
    spec = TransformerSpec(
        d_model=256,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        encoder_layers=3,
        decoder_layers=3,
        ffn_dim=1024,
        dropout=0.0,
    )
    parts = AttentionParts(ScaledDotScore, FullPattern(), SinusoidalPositions)
    return build_transformer(spec, parts, VOCAB, PAD).to(device).eval()


def random_sources(batch: int, device: torch.device, seed: int = 0) -> torch.Tensor:
    """(batch, 24) random sources of 12–24 tokens, padded."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, 24), generator=g).to(device)  # (b, s)
    lengths = torch.randint(12, 25, (batch,), generator=g).to(device)  # (b,)
    return src.masked_fill(torch.arange(24, device=device)[None] >= lengths[:, None], PAD)


def post_ln_model(
    device: torch.device, d_model: int = 256, ffn_dim: int = 1024, dropout: float = 0.1
) -> Seq2Seq:
    """``small_model``'s layout (4 heads, 3 + 3 layers, scaled dot, sinusoids, vocabulary 8000) set up for
    training as Vaswani et al. (2017) did: post-LN, dropout on, in train mode. ``d_model`` and ``ffn_dim``
    shrink for tests."""
    spec = TransformerSpec(
        d_model=d_model,
        num_heads=4,
        encoder_layers=3,
        decoder_layers=3,
        ffn_dim=ffn_dim,
        dropout=dropout,
        norm_first=False,
    )
    parts = AttentionParts(ScaledDotScore, FullPattern(), SinusoidalPositions)
    return build_transformer(spec, parts, VOCAB, PAD).to(device).train()
