"""I_h = E_x |∂L(x) / ∂ξ_h|: head importance as the gradient of the loss w.r.t. each head's gate
(Michel et al., 2019, "Are Sixteen Heads Really Better than One?").

Every ``MultiHeadAttention`` carries a gate ξ (all ones, not trained); setting ξ_h = 0 removes head h.

Pruning by importance, as Michel et al. do it:

- ``normalise_by_layer``: I_h ← I_h / ‖I_layer‖₂, each layer's scores divided by their l2 norm (their
  "importance score normalization", ``--normalize-by-layer`` in the authors' MT pruning script), so a
  head is weighed against its own layer: without it the heads of a layer whose gradients are small
  overall would all go first;
- ``pruning_order``: every head of every attention layer (encoder self, decoder self, cross), sorted
  by ascending importance in one global list;
- ``heads_to_prune``: the first round(p × N) heads of that list (halves round up);
- ``prune_heads``: a context manager that sets those heads' gates to 0 and restores every gate after.

Pruning is global, so a layer may lose all its heads. That sublayer then outputs its output
projection's bias only, and the residual connection carries the input past it: still a valid model.

Importance is measured once, on the unpruned model. A head is named by its layer (module name, as in
``head_gates``) and index: ``("encoder.layers.0.self_attn", 2)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

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

    The absolute value is taken per batch, of the batch loss's gradient (as the authors' code does); with
    one sentence per batch it is exactly E_x |∂L(x)/∂ξ_h|. Gradients are taken with
    ``torch.autograd.grad``, so parameters' ``.grad`` are left untouched.
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


Head = tuple[str, int]


def normalise_by_layer(importance: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """I_h / ‖I_layer‖₂ for every layer: name -> (h,) tensor of unit l2 norm (a layer of zeros stays zero)."""
    out = {}
    for name, scores in importance.items():
        norm = scores.norm()
        out[name] = scores / norm if norm > 0 else scores.clone()
    return out


def pruning_order(importance: dict[str, torch.Tensor]) -> list[Head]:
    """Every head, least important first, across all layers; ties keep layer order, then head order."""
    heads = [(name, h, v) for name, scores in importance.items() for h, v in enumerate(scores.tolist())]
    return [(name, h) for name, h, _ in sorted(heads, key=lambda item: item[2])]  # stable: ties keep order


def pruned_count(total: int, fraction: float) -> int:
    """round(fraction × total) heads, halves rounded up (0.5 of 5 heads is 3)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"a pruning fraction must be in [0, 1], got {fraction}")
    return min(total, math.floor(fraction * total + 0.5))


def heads_to_prune(order: list[Head], fraction: float) -> list[Head]:
    """The ``fraction`` least important heads: the first round(fraction × N) of ``order``."""
    return order[: pruned_count(len(order), fraction)]


@contextmanager
def prune_heads(model: nn.Module, heads: Iterable[Head]) -> Iterator[None]:
    """Sets the gates of ``heads`` to 0 inside the ``with`` block; every gate gets its old value back after.

    Raises:
        ValueError: a head names no attention layer of ``model`` or an index outside its heads.
    """
    gates = head_gates(model)
    heads = list(heads)
    for name, h in heads:
        if name not in gates:
            raise ValueError(f"no attention layer '{name}' to prune; layers: {sorted(gates)}")
        if not 0 <= h < gates[name].numel():
            raise ValueError(f"head {h} of '{name}' does not exist: it has {gates[name].numel()} heads")
    saved = {name: gate.detach().clone() for name, gate in gates.items()}
    try:
        with torch.no_grad():
            for name, h in heads:
                gates[name][h] = 0.0
        yield
    finally:
        with torch.no_grad():
            for name, gate in gates.items():
                gate.copy_(saved[name])
