"""Greedy decoding, y_t = argmax_v p(v | y_<t, x), and beam search ranked by
log p(Y | x) / lp(Y),  lp(Y) = ((5 + |Y|) / 6)^α  (Wu et al., 2016, GNMT), batched, with a key/value cache.

Shape letters: b batch (sentences), k beam size, s source length, t output length so far, V vocabulary.

The limit is ``max_len_ratio * source length + max_len_offset`` per sentence; a sentence still open at
its limit gets <eos> there. Outputs are (b, t) ids without <bos>, padded after <eos>. ``use_cache``
feeds the decoder one token per step (attnlab.model.cache); False re-runs it over the whole prefix,
which is slower and gives the same tokens. Beam search keeps the k best open hypotheses; a hypothesis
ending in <eos> among the k best candidates of a step is finished, and a sentence is done once k are
finished (or at its limit); the best finished one by length-penalised score is returned. Beam size 1 is
greedy decoding.

The ``decode.*`` keys travel as one ``DecodeSettings``; the special token ids as one ``SpecialIds`` (any
tokenizer's ``special_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab.data.tokenizers.base import SpecialIds
from attnlab.model.cache import DecoderCache
from attnlab.model.transformer import Seq2Seq

STRATEGIES = ("greedy", "beam")


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode (``decode.*``).

    Args:
        strategy: ``"greedy"`` or ``"beam"`` (beam search with the GNMT length penalty).
        beam_size: hypotheses kept per sentence by beam search (k ≥ 1); 1 gives greedy's tokens.
        length_penalty: α of the length penalty ((5 + |Y|) / 6)^α; 0 ranks by total log-probability.
        max_len_ratio, max_len_offset: the output limit, ratio × source length + offset.
        use_cache: decode with the key/value cache (the same tokens, faster).
    """

    strategy: str = "greedy"
    beam_size: int = 4
    length_penalty: float = 0.6
    max_len_ratio: float = 1.5
    max_len_offset: int = 10
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"decode.strategy must be 'greedy' or 'beam', got '{self.strategy}'")
        if self.beam_size < 1:
            raise ValueError(f"decode.beam_size must be at least 1, got {self.beam_size}")


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6)^α for a hypothesis of |Y| tokens (counting <eos>); α = 0 gives 1."""
    return ((5.0 + length) / 6.0) ** alpha


def _limits(src: torch.Tensor, pad_id: int, settings: DecodeSettings) -> torch.Tensor:
    src_len = (src != pad_id).sum(1)  # (b,)
    return (src_len.float() * settings.max_len_ratio).long() + settings.max_len_offset  # (b,)


def _next_logits(
    model: Seq2Seq,
    ys: torch.Tensor,
    memory: torch.Tensor,
    src_mask: torch.Tensor | None,
    cache: DecoderCache | None,
) -> torch.Tensor:
    """Logits (b, V) of the token after ys (b, t); with a cache only ys' last token is fed."""
    if cache is None:
        return model.generator(model.decoder(ys, memory, src_mask)[:, -1])  # (b, V)
    return model.generator(model.decoder(ys[:, -1:], memory, src_mask, cache)[:, -1])  # (b, V)


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq, src: torch.Tensor, ids: SpecialIds, settings: DecodeSettings = DecodeSettings()
) -> torch.Tensor:
    """src (b, s) -> output ids (b, t) without <bos>; finished rows are padded after <eos>.

    Uses the limits and the cache switch of ``settings``, whatever its strategy.
    """
    bos_id, eos_id, pad_id = ids.bos_id, ids.eos_id, ids.pad_id
    memory, src_mask = model.encoder(src)  # (b, s, m), (b, 1, 1, s)
    limit = _limits(src, pad_id, settings)  # (b,)
    cache = DecoderCache(len(model.decoder.layers)) if settings.use_cache else None
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (b, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (b,)
    for step in range(int(limit.max())):
        nxt = _next_logits(model, ys, memory, src_mask, cache).argmax(-1)  # (b,)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        nxt = torch.where(~done & (step + 1 >= limit), torch.full_like(nxt, eos_id), nxt)
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (b, t + 1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def beam_search(
    model: Seq2Seq, src: torch.Tensor, ids: SpecialIds, settings: DecodeSettings = DecodeSettings()
) -> torch.Tensor:
    """src (b, s) -> the best hypothesis per sentence (b, t) without <bos>, padded after <eos>.

    Uses ``settings.beam_size`` and ``length_penalty`` (and the limits and cache switch), whatever its
    strategy.
    """
    bos_id, eos_id, pad_id = ids.bos_id, ids.eos_id, ids.pad_id
    length_penalty = settings.length_penalty
    k, (b, _) = settings.beam_size, src.shape
    device = src.device
    memory, src_mask = model.encoder(src)  # (b, s, m), (b, 1, 1, s)
    memory = memory.repeat_interleave(k, dim=0)  # (b k, s, m)
    if src_mask is not None:
        src_mask = src_mask.repeat_interleave(k, dim=0)  # (b k, 1, 1, s)
    limit = _limits(src, pad_id, settings)  # (b,)
    max_steps = int(limit.max())
    cache = DecoderCache(len(model.decoder.layers)) if settings.use_cache else None
    ys = torch.full((b * k, 1), bos_id, dtype=torch.long, device=device)  # (b k, 1)
    scores = torch.full((b, k), float("-inf"), device=device)  # (b, k) total log-probabilities
    scores[:, 0] = 0.0  # one open hypothesis (<bos>) per sentence to start
    best = torch.full((b, max_steps), pad_id, dtype=torch.long, device=device)  # (b, t_max)
    best_score = torch.full((b,), float("-inf"), device=device)  # (b,)
    best_len = torch.zeros(b, dtype=torch.long, device=device)  # (b,)
    finished = torch.zeros(b, dtype=torch.long, device=device)  # (b,)
    done = torch.zeros(b, dtype=torch.bool, device=device)  # (b,)
    base = (torch.arange(b, device=device) * k)[:, None]  # (b, 1) first row of each sentence
    for step in range(max_steps):
        logp = _next_logits(model, ys, memory, src_mask, cache).float().log_softmax(-1)  # (b k, V)
        vocab = logp.size(-1)
        at_limit = step + 1 >= limit  # (b,)
        not_eos = torch.arange(vocab, device=device) != eos_id  # (V,)
        logp = logp.masked_fill(at_limit.repeat_interleave(k)[:, None] & not_eos, float("-inf"))  # only <eos>
        cand = (scores[:, :, None] + logp.view(b, k, vocab)).view(b, k * vocab)  # (b, k V)
        top, idx = cand.topk(min(2 * k, k * vocab), dim=1)  # (b, 2k)
        beam, token = idx // vocab, idx % vocab  # (b, 2k)
        is_eos = token == eos_id  # (b, 2k)

        # finish the hypotheses that end in <eos> among the k best candidates
        fin = is_eos[:, :k] & torch.isfinite(top[:, :k]) & ~done[:, None]  # (b, k)
        norm = top[:, :k] / gnmt_length_penalty(step + 1, length_penalty)  # (b, k)
        norm = norm.masked_fill(~fin, float("-inf"))  # (b, k)
        cand_best, cand_at = norm.max(1)  # (b,), (b,)
        better = cand_best > best_score  # (b,)
        if better.any():
            rows = (base[:, 0] + beam.gather(1, cand_at[:, None])[:, 0])[better]  # (n,)
            best[better, :step] = ys[rows, 1:]
            best[better, step] = eos_id
            best[better, step + 1 :] = pad_id
            best_score = torch.where(better, cand_best, best_score)
            best_len = torch.where(better, torch.full_like(best_len, step + 1), best_len)
        finished += fin.sum(1)
        done |= (finished >= k) | at_limit
        if done.all():
            break

        # the k best candidates not ending in <eos> stay open
        order = torch.sort(is_eos.long(), dim=1, stable=True).indices[:, :k]  # (b, k)
        scores = top.gather(1, order)  # (b, k)
        scores = scores.masked_fill(done[:, None], float("-inf"))  # (b, k)
        rows = (base + beam.gather(1, order)).view(-1)  # (b k,)
        ys = torch.cat([ys.index_select(0, rows), token.gather(1, order).view(-1, 1)], dim=1)  # (b k, t + 1)
        if cache is not None:
            cache.reorder_beams(rows)
    return best[:, : int(best_len.max())]


def decode_batch(
    model: Seq2Seq, src: torch.Tensor, ids: SpecialIds, settings: DecodeSettings = DecodeSettings()
) -> torch.Tensor:
    """``greedy_decode`` or ``beam_search`` as ``settings.strategy`` says: src (b, s) -> ids (b, t)."""
    if settings.strategy == "beam":
        return beam_search(model, src, ids, settings)
    return greedy_decode(model, src, ids, settings)
