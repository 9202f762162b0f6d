"""Recording attention maps without touching the model: forward hooks on ``AttentionProbs``.

    with record_attention(model) as maps:
        model(src, tgt)
    maps[("cross", 1)]  # (b, h, t_q, t_k) probabilities of the decoder's second cross-attention

While a hook is registered, ``MultiHeadAttention`` takes its explicit path (the fused kernel never
forms the probabilities), so the recorded maps are exactly what the model used. On exit every hook is
removed and nothing is left on the model. A module called several times in the block (incremental
decoding) keeps its last call's map.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from attnlab.attention.multi_head import MultiHeadAttention

_LAYER = re.compile(r"layers\.(\d+)\.")


def attention_sites(model: nn.Module) -> dict[tuple[str, int], MultiHeadAttention]:
    """Every attention module by (site, layer index), e.g. ``("encoder", 0)``, in model order."""
    found = {}
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            match = _LAYER.search(name + ".")
            found[(module.site, int(match.group(1)) if match else 0)] = module
    return found


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[tuple[str, int], torch.Tensor]]:
    """Yields a dict that fills with detached maps (b, h, t_q, t_k) keyed by (site, layer)."""
    maps: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for key, module in attention_sites(model).items():

        def store(mod, inputs, output, key=key):
            maps[key] = output.detach()

        handles.append(module.probs.register_forward_hook(store))
    try:
        yield maps
    finally:
        for handle in handles:
            handle.remove()
