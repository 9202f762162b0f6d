"""Attention diagnostics: per-head entropy and peak weight, and word alignment error rate (AER).

Pure functions of recorded attention probabilities; the recording and the callback live elsewhere.
A fully masked query row is all zeros (see ``attnlab.attention.probs``) and every statistic here
ignores it.

Shapes: b batch, l layers, h heads, t_q queries, t_k keys, t_tgt target words, t_src source words.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

Links = set[tuple[int, int]]


def _as_batched(p: Tensor, row_mask: Tensor | None, name: str) -> tuple[Tensor, Tensor]:
    """Returns p as (b, h, t_q, t_k) and the valid-row mask as (b, h, t_q)."""
    if p.dim() not in (3, 4):
        raise ValueError(f"{name} needs p of shape (h, t_q, t_k) or (b, h, t_q, t_k), got {tuple(p.shape)}")
    unbatched, p_shape = p.dim() == 3, tuple(p.shape)
    if unbatched:
        p = p.unsqueeze(0)  # (1, h, t_q, t_k)
    b, h, t_q, _ = p.shape
    valid = (p > 0).any(dim=-1)  # (b, h, t_q)
    if row_mask is None:
        return p, valid
    if row_mask.dtype != torch.bool:
        raise ValueError(f"{name} needs a boolean row_mask, got dtype {row_mask.dtype}")
    given = tuple(row_mask.shape)
    if unbatched:
        row_mask = row_mask.unsqueeze(0)  # (1, t_q) or (1, h, t_q)
    if row_mask.dim() == 2:
        row_mask = row_mask.unsqueeze(1)  # (b, 1, t_q)
    if (
        row_mask.dim() != 3
        or row_mask.shape[0] != b
        or row_mask.shape[1] not in (1, h)
        or row_mask.shape[2] != t_q
    ):
        allowed = f"({t_q},) or ({h}, {t_q})" if unbatched else f"({b}, {t_q}) or ({b}, {h}, {t_q})"
        raise ValueError(f"{name} needs row_mask of shape {allowed} for p of shape {p_shape}, got {given}")
    return p, valid & row_mask.to(p.device)  # (b, h, t_q)


def _mean_over_valid_rows(per_row: Tensor, valid: Tensor, name: str) -> Tensor:
    """Mean of (b, h, t_q) row values over valid rows, batch and rows weighted equally -> (h,)."""
    counts = valid.sum(dim=(0, 2))  # (h,)
    if (counts == 0).any():
        raise ValueError(f"{name}: no valid query rows for heads {counts.eq(0).nonzero().flatten().tolist()}")
    total = torch.where(valid, per_row, torch.zeros_like(per_row)).sum(dim=(0, 2))  # (h,)
    return total / counts


def attention_entropy(p: Tensor, row_mask: Tensor | None = None) -> Tensor:
    """H_i = −Σ_j p_ij log p_ij (nats, 0·log 0 = 0), averaged over valid query rows, per head.

    Entropy near zero means a head attends to one key per query. Unscaled dot-product scores grow
    like √d_k, which saturates the softmax into near one-hot rows at large head dimension — the reason
    for the 1/√d_k factor (Vaswani et al., 2017, "Attention Is All You Need", footnote 4). Uniform
    attention over n keys gives log n.

    Args:
        p: attention probabilities, (b, h, t_q, t_k) or (h, t_q, t_k). All-zero rows are ignored.
        row_mask: optional boolean (b, t_q) or (b, h, t_q) — (t_q,) or (h, t_q) for unbatched ``p``;
            True keeps a row. Combined with the all-zero-row rule.

    Returns:
        (h,) mean entropy per head, every valid row in the batch weighted equally.

    Raises:
        ValueError: on bad shapes, a non-boolean mask, or a head with no valid row.
    """
    p, valid = _as_batched(p, row_mask, "attention_entropy")
    p = p.float()
    plogp = torch.where(p > 0, p * p.clamp_min(torch.finfo(p.dtype).tiny).log(), torch.zeros_like(p))
    per_row = -plogp.sum(dim=-1)  # (b, h, t_q)
    return _mean_over_valid_rows(per_row, valid, "attention_entropy")


def max_weight(p: Tensor, row_mask: Tensor | None = None) -> Tensor:
    """m = mean_i max_j p_ij over valid query rows, per head (1 = one-hot, 1/n = uniform over n keys).

    Args:
        p: attention probabilities, (b, h, t_q, t_k) or (h, t_q, t_k). All-zero rows are ignored.
        row_mask: optional boolean (b, t_q) or (b, h, t_q) — (t_q,) or (h, t_q) for unbatched ``p``.

    Returns:
        (h,) mean peak weight per head.

    Raises:
        ValueError: on bad shapes, a non-boolean mask, or a head with no valid row.
    """
    p, valid = _as_batched(p, row_mask, "max_weight")
    per_row = p.float().amax(dim=-1)  # (b, h, t_q)
    return _mean_over_valid_rows(per_row, valid, "max_weight")


def alignments_from_attention(p: Tensor) -> Links:
    """A = {(argmax_s p[t, s], t)}: link every target word t to the source word it attends to most.

    Args:
        p: (t_tgt, t_src) cross-attention of one sentence, one head or averaged over heads.

    Returns:
        Set of (src_index, tgt_index) links; an all-zero row (a masked target word) yields no link.
    """
    if p.dim() != 2:
        raise ValueError(f"alignments_from_attention needs p of shape (t_tgt, t_src), got {tuple(p.shape)}")
    if p.shape[-1] == 0:
        return set()
    src = p.argmax(dim=-1)  # (t_tgt,)
    keep = (p > 0).any(dim=-1)  # (t_tgt,)
    return {(int(s), t) for t, (s, k) in enumerate(zip(src.tolist(), keep.tolist())) if k}


def alignment_error_rate(
    hyp: Iterable[set[tuple[int, int]]], gold: Iterable[Iterable[tuple[int, int]]]
) -> float:
    """AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) with S = P = G, i.e. 1 − 2|A∩G| / (|A| + |G|).

    Corpus-level alignment error rate (Och & Ney, 2003, "A Systematic Comparison of Various Statistical
    Alignment Models"): counts are summed over sentences before dividing. Gold has no sure/possible
    split here, so every gold link is both.

    Args:
        hyp: per sentence, the hypothesis links (src_index, tgt_index).
        gold: per sentence, the gold links (src_index, tgt_index), in the same order.

    Returns:
        AER in [0, 1]; 0.0 for a perfect match.

    Raises:
        ValueError: if the sentence counts differ, or if hypothesis and gold are both empty.
    """
    hyp, gold = [set(a) for a in hyp], [set(g) for g in gold]
    if len(hyp) != len(gold):
        raise ValueError(
            f"alignment_error_rate got {len(hyp)} hypothesis sentences but {len(gold)} gold ones"
        )
    n_hyp = sum(len(a) for a in hyp)
    n_gold = sum(len(g) for g in gold)
    if n_hyp + n_gold == 0:
        raise ValueError(f"alignment_error_rate is undefined: {len(hyp)} sentences with no links at all")
    n_both = sum(len(a & g) for a, g in zip(hyp, gold))
    return 1.0 - 2.0 * n_both / (n_hyp + n_gold)


def cross_attention_aer(maps: list[Tensor], gold: list[tuple[tuple[int, int], ...]]) -> dict:
    """AER(l, h) of argmax alignments read off each layer's and head's cross-attention (Och & Ney, 2003).

    Args:
        maps: per sentence, (l, h, t_tgt, t_src) cross-attention cut to real target × source words.
        gold: per sentence, its gold links (src_index, tgt_index).

    Returns:
        ``{"per_head": (l, h) AER per layer and head, "layer_avg": (l,) AER of each layer's
        head-averaged map, "best": (layer, head, aer) of the lowest per-head AER}`` (first on ties).

    Raises:
        ValueError: on no sentences, mismatched counts, maps that are not 4-D, or differing (l, h).
    """
    if len(maps) != len(gold):
        raise ValueError(f"cross_attention_aer got {len(maps)} maps but {len(gold)} gold alignments")
    if not maps:
        raise ValueError("cross_attention_aer needs at least one sentence")
    for i, m in enumerate(maps):
        if m.dim() != 4:
            raise ValueError(
                f"cross_attention_aer needs maps of shape (l, h, t_tgt, t_src); map {i} is {tuple(m.shape)}"
            )
        if m.shape[:2] != maps[0].shape[:2]:
            raise ValueError(
                f"cross_attention_aer: map {i} has (l, h) = {tuple(m.shape[:2])},"
                f" map 0 has {tuple(maps[0].shape[:2])}"
            )
    n_layers, n_heads = maps[0].shape[:2]
    per_head = torch.empty(n_layers, n_heads)  # (l, h)
    layer_avg = torch.empty(n_layers)  # (l,)
    for layer in range(n_layers):
        for head in range(n_heads):
            hyp = [alignments_from_attention(m[layer, head]) for m in maps]
            per_head[layer, head] = alignment_error_rate(hyp, gold)
        hyp = [alignments_from_attention(m[layer].float().mean(dim=0)) for m in maps]  # (t_tgt, t_src) each
        layer_avg[layer] = alignment_error_rate(hyp, gold)
    flat = int(per_head.argmin())
    best_layer, best_head = divmod(flat, n_heads)
    best = (best_layer, best_head, float(per_head[best_layer, best_head]))
    return {"per_head": per_head, "layer_avg": layer_avg, "best": best}
