"""out_i = Σ_j softmax_j(scale · q'_i · k'_j + mod_h(i, j), over keys j with allowed(i, j)) v_j,
through FlexAttention (Dong et al., 2024, ``torch.nn.attention.flex_attention``).

- (q', k', scale) come from the score (``score.fused``: scaled dot, dot, general, cosine), as on SDPA;
- ``mod`` is the positional encoding's ``score_mod``, a function of the head and the two indices that
  the kernel evaluates per score (ALiBi from positions and slopes, T5 by looking its table up), so the
  (b, h, t_q, t_k) float mask that SDPA needs for a bias never exists;
- ``allowed`` is the boolean mask (padding, causal, pattern; (b|1, 1, t_q|1, t_k)) as a ``BlockMask``:
  tiles of 128 × 128 scores that are wholly masked are skipped, so causal, local and dilated masks cost
  less than the full matrix. The mask is the same for every layer of a stack, so its block mask is
  built once per mask tensor and kept for the last few (``block_mask``).

On CUDA the kernel is ``torch.compile(flex_attention, dynamic=True)``, once per process (``compiled``);
elsewhere eager ``flex_attention``, which materialises the scores and has no backward (forward only:
agreement tests, benchmarks). A query row with nothing to attend gets zeros.

Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim, d_v value head dim.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from attnlab.posenc.base import ScoreMod

RECENT_MASKS = 4  # block masks kept: the encoder's, the decoder's self and cross masks, one spare
Recent = tuple[torch.Tensor, int | None, tuple[int, ...], BlockMask]  # mask, its version, shape, blocks
_recent: list[Recent] = []


@functools.cache
def compiled() -> Callable[..., torch.Tensor]:
    """``torch.compile(flex_attention, dynamic=True)``, made once per process.

    Its graphs are cached by the code (not the captured tensors) of the score and mask functions and by
    grad mode, so new closures reuse them. Dynamic because every batch has its own lengths: one
    length-generic kernel per score_mod and grad mode. Automatic dynamic shapes would first compile a
    static one too, and (measured with dynamo's eager backend on CPU: two sites, three grad modes)
    reach dynamo's recompile limit of 8, past which calls fall back to the unfused eager path.
    """
    return torch.compile(flex_attention, dynamic=True)


def block_mask(mask: torch.Tensor, shape: tuple[int, int, int, int]) -> BlockMask:
    """mask (b|1, 1|h, t_q|1, t_k) boolean, True = may attend, for scores of ``shape`` (b, h, t_q, t_k)
    -> the same pattern as a ``BlockMask``.

    Kept for the last ``RECENT_MASKS`` mask tensors (by identity and in-place version, which inference
    tensors lack), so the layers of a stack, which share one mask, build it once.
    """
    version = None if mask.is_inference() else mask._version  # inference tensors keep no version
    for seen, seen_version, seen_shape, blocks in _recent:
        if seen is mask and seen_version == version and seen_shape == shape:
            return blocks
    allowed = mask.expand(shape)  # (b, h, t_q, t_k), no copy: the kernel asks for every b and h

    def mask_mod(b, h, q_idx, kv_idx):
        return allowed[b, h, q_idx, kv_idx]

    blocks = create_block_mask(mask_mod, mask.size(0), mask.size(1), *shape[2:], device=mask.device)
    _recent.append((mask, version, shape, blocks))
    del _recent[:-RECENT_MASKS]
    return blocks


def flex_attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    mask: torch.Tensor | None,
    mod: ScoreMod | None,
) -> torch.Tensor:
    """q (b, h, t_q, d_k), k (b, h, t_k, d_k), v (b, h, t_k, d_v), mask (b|1, 1, t_q|1, t_k) or None
    -> (b, h, t_q, d_v). Compiled on CUDA, eager (forward only) elsewhere."""
    b, h, t_q, _ = q.shape
    q, k = q.to(v.dtype), k.to(v.dtype)  # as SDPA under autocast: a float32 norm (cosine) meets bf16 v
    blocks = None if mask is None else block_mask(mask, (b, h, t_q, k.size(2)))
    attend = compiled() if q.is_cuda else flex_attention
    return attend(q, k, v, score_mod=mod, block_mask=blocks, scale=scale)  # (b, h, t_q, d_v)
