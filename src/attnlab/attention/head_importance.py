"""I_h = E_x |∂L(x) / ∂ξ_h|: head importance as the gradient of the loss w.r.t. each head's gate
(Michel et al., 2019, "Are Sixteen Heads Really Better than One?").

Every ``MultiHeadAttention`` carries a gate ξ (all ones, not trained); setting ξ_h = 0 removes head h.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from attnlab.attention.multi_head import MultiHeadAttention


def head_gates(model: nn.Module) -> dict[str, nn.Parameter]:
    """The gate of every attention layer, by module name (e.g. ``encoder.layers.0.self_attn``)."""
    return {name: m.head_gate for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}


def head_importance(
    model: nn.Module, loss_fn: Callable[[object], torch.Tensor], batches: Iterable
) -> dict[str, torch.Tensor]:
    """Mean |∂loss/∂gate| over ``batches``, per attention layer: name -> (h,) tensor.

    Gradients are taken with ``torch.autograd.grad``, so parameters' ``.grad`` are left untouched.
    """
    gates = head_gates(model)
    names, params = list(gates), list(gates.values())
    total = [torch.zeros_like(p) for p in params]
    count = 0
    for p in params:
        p.requires_grad_(True)
    try:
        for batch in batches:
            grads = torch.autograd.grad(loss_fn(batch), params, allow_unused=True)
            for acc, g in zip(total, grads):
                if g is not None:
                    acc += g.detach().abs()
            count += 1
    finally:
        for p in params:
            p.requires_grad_(False)
    if count == 0:
        raise ValueError("head_importance needs at least one batch")
    return {name: acc / count for name, acc in zip(names, total)}
