"""Greedy decoding: y_t = argmax_v p(v | y_<t, x), batched, until <eos> or the length limit.

The limit is ``max_len_ratio * source length + max_len_offset`` per sentence. This version re-runs
the decoder over the whole prefix at each step; the key/value cache and beam search come with the
real-data issue and must give the same tokens.
"""

from __future__ import annotations

import torch

from attnlab.model.transformer import Seq2Seq


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_len_ratio: float = 1.5,
    max_len_offset: int = 10,
) -> torch.Tensor:
    """src (b, s) -> output ids (b, t) without <bos>; finished rows are padded after <eos>."""
    memory, src_mask = model.encoder(src)  # (b, s, m), (b, 1, 1, s)
    src_len = (src != pad_id).sum(1)  # (b,)
    limit = (src_len.float() * max_len_ratio).long() + max_len_offset  # (b,)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (b, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (b,)
    for step in range(int(limit.max())):
        logits = model.generator(model.decoder(ys, memory, src_mask)[:, -1])  # (b, V)
        nxt = logits.argmax(-1)  # (b,)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        nxt = torch.where(~done & (step + 1 >= limit), torch.full_like(nxt, eos_id), nxt)
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (b, t + 1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys[:, 1:]
