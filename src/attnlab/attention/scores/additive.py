"""score(q, k) = vᵀ tanh(W_q q + W_k k), W_q, W_k, v per head  (Bahdanau et al., 2015).

Shape letters: b batch, h heads, t_q / t_k query / key length, d_k query/key head dim, n hidden size,
m queries in a chunk.

The score needs tanh of every (query, key, hidden) triple: (b, h, t_q, t_k, n) values. They are never
held whole. ``AdditiveScores`` (an ``autograd.Function``) keeps only a = W_q q and c = W_k k (or their
exponentials) for backward and recomputes the triples there, avoiding tanh with

    tanh(a + c) = 1 − 2r,   r = 1 / (1 + e^{2a} e^{2c}),   so vᵀ tanh(a + c) = Σ v − 2 vᵀ r,
    d tanh(x)/dx = 1 − tanh² = (2 − 2r)(2r) = 4 r (1 − r),

with e^{2a} taken once per query row and e^{2c} once per key row, leaving a multiply-add and a
division per triple. It has two loops for that:

- CPU float32 (``_additive_kernel.py``): C loops compiled on first use (about 0.3 s, then cached) that
  keep each triple in registers and write only scores and gradients. Forward + backward runs 48× faster
  than the naive broadcast formula at t = 128 (68× at 256; 2 CPU cores shared with other jobs), near
  the core's division rate.
- Everything else (CUDA, bfloat16 autocast, float16/64, no C compiler): an eager loop over chunks of
  queries, each a (b, h, m, t_k, n) tensor (one ``addcmul``, one ``reciprocal_``). The forward folds v
  into the reciprocal, v r = 1 / (1/v + e^{2a} (e^{2c}/v)), so the sum over n is a plain sum (v = 0
  gives 1/inf = 0); the backward forms g · r (1 − r) in one pass with ``sigmoid_backward``, whose
  formula it is. On CPU 11× faster than the naive formula at t = 128, every pass near the core's
  division or store rate.

Both are timed in benchmarks/attention.py. The exponentials must stay finite and nonzero: when any |a|
or |c| exceeds 20 (float32; less for float16) the function falls back to plain tanh in the eager loop,
same chunks, same memory. SDPA cannot express this score, so there is no ``fused`` form.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from attnlab.attention.scores import _additive_kernel
from attnlab.attention.scores.base import Score

#: Largest chunk, in elements of the (b, h, chunk, t_k, n) tensor (2**22 float32 = 16 MiB).
MAX_CHUNK_ELEMENTS = 2**22


def exp_identity_limit(dtype: torch.dtype) -> float:
    """Largest |a|, |c| for which e^{±2a} · e^{±2c} stays finite and normal in ``dtype``."""
    return min(20.0, math.log(torch.finfo(dtype).max) / 4)


def fits_exp_identity(a: torch.Tensor, c: torch.Tensor) -> bool:
    """Whether every |a| and |c| is within ``exp_identity_limit`` (so the identity holds); one sync."""
    if a.numel() == 0 or c.numel() == 0:
        return True
    bounds = torch.stack([*torch.aminmax(a), *torch.aminmax(c)])  # (4,)
    return bounds.abs().max().item() <= exp_identity_limit(a.dtype)


class AdditiveScores(torch.autograd.Function):
    """s[..., i, j] = Σ_n v[h, n] tanh(a[..., i, n] + c[..., j, n]), recomputing the triples backward.

    ``apply(a, c, v, chunk)``: a (b, h, t_q, n), c (b, h, t_k, n), v (h, n), chunk = queries per step of
    the eager loop. The forward picks the loop (kernel, eager identity or eager tanh); backward follows.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, c: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
        b, h, t_q, n = a.shape
        t_k = c.shape[2]
        exact = fits_exp_identity(a, c)
        ctx.chunk, ctx.exact, ctx.kernel = chunk, exact, exact and _additive_kernel.usable(a, c, v)
        if ctx.kernel:
            ea = a.mul(2).exp_()  # e^{2a}, (b, h, t_q, n)
            ec_t = c.mul(2).exp_().transpose(2, 3).contiguous()  # e^{2c}, keys last: (b, h, n, t_k)
            ctx.save_for_backward(ea, ec_t, v)
            return _additive_kernel.forward(ea, ec_t, v)  # (b, h, t_q, t_k)
        ctx.save_for_backward(a, c, v)
        out = a.new_empty(b, h, t_q, t_k)  # (b, h, t_q, t_k)
        work = a.new_empty(b * h * min(chunk, t_q) * t_k * n)  # one buffer for every chunk
        if exact:
            inv_v = v.reciprocal()[:, None, :]  # (h, 1, n)
            ea, ec_v = (2 * a).exp(), (2 * c).exp() * inv_v  # e^{2a} (b, h, t_q, n), e^{2c}/v (b, h, t_k, n)
            v_sum = v.sum(-1)[:, None, None]  # (h, 1, 1)
        for i in range(0, t_q, chunk):
            j = min(i + chunk, t_q)
            if exact:
                vr = _chunk(ea[:, :, i:j], ec_v, inv_v.unsqueeze(1), work)  # v r, (b, h, m, t_k, n)
                out[:, :, i:j] = v_sum - 2 * vr.sum(-1)  # (b, h, m, t_k)
            else:
                tanh = _chunk(a[:, :, i:j], c, None, work)  # (b, h, m, t_k, n)
                out[:, :, i:j] = (tanh.view(b, h, -1, n) @ v.unsqueeze(-1)).view(b, h, j - i, t_k)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        if ctx.kernel:
            return *_additive_kernel.backward(grad, *ctx.saved_tensors), None  # da, dc, dv
        a, c, v = ctx.saved_tensors
        b, h, t_q, n = a.shape
        t_k = c.shape[2]
        grad = grad.contiguous()  # (b, h, t_q, t_k)
        da = torch.empty_like(a)  # (b, h, t_q, n)
        dc = torch.zeros_like(c)  # (b, h, t_k, n)
        gr = torch.zeros(b, h, 1, n, dtype=a.dtype, device=a.device)  # Σ g r (exact) or Σ g tanh
        work = a.new_empty(b * h * min(ctx.chunk, t_q) * t_k * n)  # one buffer for every chunk
        one = torch.ones((), dtype=a.dtype, device=a.device) if ctx.exact else None
        x, y = ((2 * a).exp(), (2 * c).exp()) if ctx.exact else (a, c)  # (b, h, t_q | t_k, n)
        derivative = torch.ops.aten.sigmoid_backward if ctx.exact else torch.ops.aten.tanh_backward
        for i in range(0, t_q, ctx.chunk):
            j = min(i + ctx.chunk, t_q)
            g = grad[:, :, i:j]  # (b, h, m, t_k)
            r = _chunk(x[:, :, i:j], y, one, work)  # r or tanh, (b, h, m, t_k, n)
            gr += g.reshape(b, h, 1, -1) @ r.view(b, h, -1, n)  # (b, h, 1, n)
            # r ← g r (1 − r) = g · d tanh / 4  (exact),  or  g (1 − tanh²)  (fallback), in place
            derivative.grad_input(g.unsqueeze(-1), r, grad_input=r)  # (b, h, m, t_k, n)
            torch.sum(r, 3, out=da[:, :, i:j])  # (b, h, m, n)
            dc += r.sum(2)  # (b, h, t_k, n)
        scale = (4.0 * v if ctx.exact else v)[:, None, :]  # (h, 1, n)
        gr = gr.sum(0).squeeze(1)  # (h, n)
        dv = grad.sum((0, 2, 3)).unsqueeze(-1) - 2 * gr if ctx.exact else gr  # (h, n)
        return da * scale, dc * scale, dv, None


def _chunk(x: torch.Tensor, y: torch.Tensor, offset: torch.Tensor | None, work: torch.Tensor) -> torch.Tensor:
    """x (b, h, m, n), y (b, h, t_k, n) -> (b, h, m, t_k, n), written into the flat buffer ``work``.

    With an ``offset`` o: 1 / (o + x y), the identity's reciprocal; without: tanh(x + y), the fallback.
    """
    b, h, m, n = x.shape
    t_k = y.shape[2]
    out = work[: b * h * m * t_k * n].view(b, h, m, t_k, n)  # (b, h, m, t_k, n)
    if offset is not None:
        return torch.addcmul(offset, x.unsqueeze(3), y.unsqueeze(2), out=out).reciprocal_()
    return torch.add(x.unsqueeze(3), y.unsqueeze(2), out=out).tanh_()


class AdditiveScore(Score):
    """Additive (Bahdanau) score: a one-hidden-layer network on each (query, key) pair.

    Args:
        key_dim: query/key width d_k.
        num_heads: heads h; each has its own W_q, W_k (d_k, n) and v (n,).
        hidden_dim: hidden size n; None = key_dim.
        max_chunk_elements: bound on the (b, h, chunk, t_k, n) tensor held at once; a chunk has at
            least one query, so the bound is really max(max_chunk_elements, b·h·t_k·n).
    """

    def __init__(
        self,
        key_dim: int,
        num_heads: int,
        hidden_dim: int | None = None,
        max_chunk_elements: int = MAX_CHUNK_ELEMENTS,
    ):
        super().__init__(key_dim, num_heads)
        n = key_dim if hidden_dim is None else hidden_dim
        if n <= 0:
            raise ValueError(f"attention.score.hidden_dim must be positive or null, got {hidden_dim}")
        self.hidden_dim, self.max_chunk_elements = n, max_chunk_elements
        bound_in, bound_out = key_dim**-0.5, n**-0.5  # nn.Linear's default ranges
        w_shape = (num_heads, key_dim, n)
        self.w_q = nn.Parameter(torch.empty(w_shape).uniform_(-bound_in, bound_in))  # (h, d_k, n)
        self.w_k = nn.Parameter(torch.empty(w_shape).uniform_(-bound_in, bound_in))  # (h, d_k, n)
        self.v = nn.Parameter(torch.empty(num_heads, n).uniform_(-bound_out, bound_out))  # (h, n)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(b, h, t_q, d_k), (b, h, t_k, d_k) -> (b, h, t_q, t_k)."""
        a = q @ self.w_q  # (b, h, t_q, n)
        c = k @ self.w_k  # (b, h, t_k, n)
        b, h, _, n = a.shape
        chunk = max(1, self.max_chunk_elements // max(1, b * h * c.shape[2] * n))
        return AdditiveScores.apply(a.contiguous(), c.contiguous(), self.v.to(a.dtype), chunk)
